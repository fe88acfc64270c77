// JSON patch, merge patch and strategic merge patch as kubectl and controllers send them.

import { ApiError } from './api-error.js';
import { jsonPatch, mergePatch } from './json-patch.js';
import { strategicMergePatch } from './strategic-merge-patch.js';

const podSpec = () => ({
  spec: {
    containers: [
      {
        name: 'app',
        image: 'app:1',
        env: [
          { name: 'A', value: '1' },
          { name: 'B', value: '2' },
        ],
        ports: [{ containerPort: 80, name: 'http' }],
      },
      { name: 'side', image: 'side:1' },
    ],
    volumes: [{ name: 'shm', emptyDir: { medium: 'Memory' } }],
    tolerations: [{ key: 'a' }],
  },
  metadata: { name: 'p', finalizers: ['x/a'], labels: { l: '1' } },
});

describe('strategic merge patch', () => {
  test('merges containers, env and ports by their merge keys and replaces other lists', () => {
    const out = strategicMergePatch(podSpec(), {
      metadata: { finalizers: ['x/b'], labels: { l: null, m: '2' } },
      spec: {
        containers: [
          {
            name: 'app',
            image: 'app:2',
            env: [
              { name: 'B', value: '3' },
              { name: 'C', value: '4' },
            ],
            ports: [{ containerPort: 81 }],
          },
        ],
        tolerations: [{ key: 'b' }],
      },
    });
    expect(out.metadata.finalizers).toEqual(['x/a', 'x/b']);
    expect(out.metadata.labels).toEqual({ m: '2' });
    const app = out.spec.containers[0];
    expect(out.spec.containers.map((c: any) => c.name)).toEqual(['app', 'side']);
    expect(app.image).toBe('app:2');
    expect(app.env).toEqual([
      { name: 'A', value: '1' },
      { name: 'B', value: '3' },
      { name: 'C', value: '4' },
    ]);
    expect(app.ports.map((p: any) => p.containerPort)).toEqual([80, 81]);
    expect(out.spec.tolerations).toEqual([{ key: 'b' }]);
  });

  test('honours $patch delete/replace, $setElementOrder, $deleteFromPrimitiveList and $retainKeys', () => {
    const out = strategicMergePatch(podSpec(), {
      metadata: { '$deleteFromPrimitiveList/finalizers': ['x/a'] },
      spec: {
        containers: [{ name: 'side', $patch: 'delete' }],
        '$setElementOrder/volumes': [{ name: 'data' }, { name: 'shm' }],
        volumes: [
          { name: 'data', hostPath: { path: '/d' } },
          { name: 'shm', $retainKeys: ['name', 'hostPath'], hostPath: { path: '/dev/shm' } },
        ],
      },
    });
    expect(out.metadata.finalizers).toEqual([]);
    expect(out.spec.containers.map((c: any) => c.name)).toEqual(['app']);
    expect(out.spec.volumes).toEqual([
      { name: 'data', hostPath: { path: '/d' } },
      { name: 'shm', hostPath: { path: '/dev/shm' } },
    ]);
    const replaced = strategicMergePatch(podSpec(), { spec: { containers: [{ name: 'only', image: 'o' }, { $patch: 'replace' }] } });
    expect(replaced.spec.containers).toEqual([{ name: 'only', image: 'o' }]);
  });

  test('Service ports merge by port', () => {
    const out = strategicMergePatch(
      {
        spec: {
          ports: [
            { port: 80, name: 'a' },
            { port: 90, name: 'b' },
          ],
        },
      },
      { spec: { ports: [{ port: 90, targetPort: 9090 }] } },
    );
    expect(out.spec.ports).toEqual([
      { port: 80, name: 'a' },
      { port: 90, name: 'b', targetPort: 9090 },
    ]);
  });

  test('an element without its merge key is a 400', () => {
    expect(() => strategicMergePatch(podSpec(), { spec: { containers: [{ image: 'x' }] } })).toThrow(ApiError);
  });
});

describe('merge patch (RFC 7386)', () => {
  test('null deletes, objects merge, lists replace', () => {
    expect(mergePatch({ a: { b: 1, c: 2 }, l: [1, 2] }, { a: { b: null, d: 3 }, l: [3] })).toEqual({ a: { c: 2, d: 3 }, l: [3] });
  });
});

describe('json patch (RFC 6902)', () => {
  test('add, remove, replace, move, copy and test', () => {
    const doc = { a: [1, 2], b: { c: 'x' } };
    const out = jsonPatch(doc, [
      { op: 'add', path: '/a/-', value: 3 },
      { op: 'add', path: '/a/0', value: 0 },
      { op: 'remove', path: '/a/1' },
      { op: 'replace', path: '/b/c', value: 'y' },
      { op: 'copy', from: '/b/c', path: '/d' },
      { op: 'move', from: '/d', path: '/e~1f' },
      { op: 'test', path: '/e~1f', value: 'y' },
    ]);
    expect(out).toEqual({ a: [0, 2, 3], b: { c: 'y' }, 'e/f': 'y' });
    expect(doc).toEqual({ a: [1, 2], b: { c: 'x' } });
  });

  test('a failed test or a missing path rejects the whole patch with 422', () => {
    const e1 = (() => {
      try {
        jsonPatch({ a: 1 }, [
          { op: 'replace', path: '/a', value: 2 },
          { op: 'test', path: '/a', value: 1 },
        ]);
      } catch (e) {
        return e as ApiError;
      }
    })();
    expect(e1?.code).toBe(422);
    expect(e1?.message).toBe('testing value /a failed: test operation failed');
    const e2 = (() => {
      try {
        jsonPatch({ a: 1 }, [{ op: 'remove', path: '/b' }]);
      } catch (e) {
        return e as ApiError;
      }
    })();
    expect(e2?.code).toBe(422);
    expect(e2?.message).toBe('jsonpatch remove operation does not apply: doc is missing key: /b');
    const e3 = (() => {
      try {
        jsonPatch({ a: { b: 1 } }, [{ op: 'copy', from: '/a/b', path: '/x/y' }]);
      } catch (e) {
        return e as ApiError;
      }
    })();
    expect(e3?.message).toBe('jsonpatch copy operation does not apply: doc is missing path: "/x/y"');
    const doc = { a: 1 };
    expect(() =>
      jsonPatch(doc, [
        { op: 'replace', path: '/a', value: 2 },
        { op: 'add', path: '/x/y', value: 1 },
      ]),
    ).toThrow(ApiError);
    expect(doc).toEqual({ a: 1 });
    expect(jsonPatch(doc, [{ op: 'replace', path: '', value: { b: 2 } }])).toEqual({ b: 2 });
    for (const bad of [{ op: 'frob', path: '/a' }, { op: 'add' }, { op: 'move', path: '/a' }, { op: 'add', path: 'a', value: 1 }]) {
      expect(() => jsonPatch(doc, [bad])).toThrow(expect.objectContaining({ code: 400 }));
    }
  });
});
