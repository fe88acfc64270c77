// The test API server over HTTP: discovery, status codes and Status bodies, content types,
// Table output, watches (resumption, selectors, bookmarks, 410), and @kubernetes/client-node.

import { readFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';
import { KubeApiServer, startKubeApiServer } from './http-server.js';
import { writeKubeconfig } from './kubeconfig.js';
import { WatchStream } from './watch-client.js';

let server: KubeApiServer;
let base: string;
const crdYaml = readFileSync(new URL('./testdata/widget-crd.yaml', import.meta.url), 'utf8');

async function call(method: string, path: string, body?: unknown, contentType = 'application/json', accept?: string) {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['Content-Type'] = contentType;
  if (accept) headers.Accept = accept;
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

beforeAll(async () => {
  server = await startKubeApiServer({ bookmarkIntervalMs: 20 });
  base = server.url;
  const r = await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crdYaml, 'application/yaml');
  expect(r.status).toBe(201);
});

afterAll(() => server.stop());

const W = '/apis/test.kvcache.io/v1/namespaces/default/widgets';
const widget = (name: string, spec: object = { size: 1 }, labels?: Record<string, string>) => ({
  apiVersion: 'test.kvcache.io/v1',
  kind: 'Widget',
  metadata: { name, labels },
  spec,
});

describe('discovery', () => {
  test('serves version, core and group resource lists including CRD kinds', async () => {
    expect((await call('GET', '/version')).body.major).toBe('1');
    expect((await call('GET', '/api')).body.versions).toEqual(['v1']);
    const groups = (await call('GET', '/apis')).body.groups.map((g: any) => g.name);
    expect(groups).toEqual(expect.arrayContaining(['apps', 'policy', 'rbac.authorization.k8s.io', 'coordination.k8s.io', 'apiextensions.k8s.io', 'test.kvcache.io']));
    const rl = (await call('GET', '/apis/test.kvcache.io/v1')).body;
    expect(rl.resources).toEqual([
      { name: 'widgets', singularName: 'widget', namespaced: true, kind: 'Widget', verbs: expect.arrayContaining(['watch', 'patch']), shortNames: ['wd'], categories: ['kvcache'] },
      expect.objectContaining({ name: 'widgets/status' }),
    ]);
    const core = (await call('GET', '/api/v1')).body.resources.map((r: any) => r.name);
    expect(core).toEqual(expect.arrayContaining(['pods', 'services', 'configmaps', 'secrets', 'serviceaccounts', 'events', 'namespaces']));
    expect((await call('GET', '/apis/nope/v1')).status).toBe(404);
  });
});

describe('REST verbs', () => {
  test('status codes and Status bodies follow the real server', async () => {
    expect((await call('POST', W, widget('a'))).status).toBe(201);
    const dup = await call('POST', W, widget('a'));
    expect(dup.status).toBe(409);
    expect(dup.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'AlreadyExists', code: 409 });
    const missing = await call('GET', `${W}/zz`);
    expect([missing.status, missing.body.reason, missing.body.message]).toEqual([404, 'NotFound', 'widgets.test.kvcache.io "zz" not found']);
    const bad = await call('POST', W, widget('b', { size: 0 }));
    expect(bad.status).toBe(422);
    expect(bad.body.details.causes).toEqual([
      { reason: 'FieldValueInvalid', field: 'spec.size', message: 'Invalid value: 0: spec.size in body should be greater than or equal to 1' },
    ]);
    const got = (await call('GET', `${W}/a`)).body;
    const stale = await call('PUT', `${W}/a`, { ...got, metadata: { ...got.metadata, resourceVersion: '1' } });
    expect([stale.status, stale.body.reason]).toEqual([409, 'Conflict']);
    expect((await call('PUT', `${W}/a`, { ...got, spec: { size: 2 } })).body.metadata.generation).toBe(2);
    expect((await call('GET', '/api/v1/namespaces/default/widgets')).status).toBe(404);
    expect((await call('GET', `/apis/test.kvcache.io/v1/widgets`)).body.items.map((o: any) => o.metadata.name)).toContain('a');
  });

  test('all four patch content types, and 415 for others', async () => {
    const P = '/api/v1/namespaces/default/configmaps';
    await call('POST', P, { metadata: { name: 'p' }, data: { a: '1' } });
    expect((await call('PATCH', `${P}/p`, [{ op: 'add', path: '/data/b', value: '2' }], 'application/json-patch+json')).body.data).toEqual({ a: '1', b: '2' });
    expect((await call('PATCH', `${P}/p`, { data: { a: null } }, 'application/merge-patch+json')).body.data).toEqual({ b: '2' });
    expect((await call('PATCH', `${P}/p`, { data: { c: '3' } }, 'application/strategic-merge-patch+json')).body.data).toEqual({ b: '2', c: '3' });
    const applied = await call('PATCH', `${P}/q?fieldManager=me`, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: q\ndata:\n  x: "1"\n', 'application/apply-patch+yaml');
    expect([applied.status, applied.body.data, applied.body.metadata.managedFields[0].manager]).toEqual([201, { x: '1' }, 'me']);
    expect((await call('PATCH', `${P}/p`, 'x', 'text/plain')).status).toBe(415);
  });

  test('status subresource: main writes ignore status, /status writes only status', async () => {
    await call('POST', W, widget('s'));
    const main = await call('PATCH', `${W}/s`, { status: { phase: 'Hacked' }, spec: { size: 3 } }, 'application/merge-patch+json');
    expect(main.body.status).toBeUndefined();
    const st = await call('PATCH', `${W}/s/status`, { status: { phase: 'Ready' }, spec: { size: 50 } }, 'application/merge-patch+json');
    expect([st.body.status.phase, st.body.spec.size, st.body.metadata.generation]).toEqual(['Ready', 3, 2]);
    expect((await call('GET', `${W}/s/status`)).body.status.phase).toBe('Ready');
  });

  test('scale subresource for workloads, absent for types without it', async () => {
    const S = '/apis/apps/v1/namespaces/default/statefulsets';
    await call('POST', S, {
      metadata: { name: 'sc' },
      spec: {
        replicas: 2,
        serviceName: 'sc',
        selector: { matchLabels: { app: 'sc' } },
        template: { metadata: { labels: { app: 'sc' } }, spec: { containers: [{ name: 'c', image: 'i' }] } },
      },
    });
    const scale = (await call('GET', `${S}/sc/scale`)).body;
    expect(scale).toMatchObject({ kind: 'Scale', apiVersion: 'autoscaling/v1', spec: { replicas: 2 }, status: { replicas: 0, selector: 'app=sc' } });
    const put = await call('PUT', `${S}/sc/scale`, { ...scale, spec: { replicas: 4 } });
    expect(put.body.spec.replicas).toBe(4);
    expect((await call('PUT', `${S}/sc/scale`, { ...scale, spec: { replicas: 5 } })).status).toBe(409);
    expect((await call('GET', `${S}/sc`)).body.metadata.generation).toBe(2);
    expect((await call('GET', `${W}/a/scale`)).status).toBe(404);
  });

  test('delete with finalizers answers 202 and keeps the object until they are removed', async () => {
    await call('POST', W, { ...widget('f'), metadata: { name: 'f', finalizers: ['test/hold'] } });
    const del = await call('DELETE', `${W}/f`);
    expect(del.status).toBe(202);
    expect(del.body.metadata.deletionTimestamp).toBeDefined();
    await call('PATCH', `${W}/f`, { metadata: { finalizers: [] } }, 'application/merge-patch+json');
    expect((await call('GET', `${W}/f`)).status).toBe(404);
  });

  test('Table output uses the printer columns', async () => {
    await call('PATCH', `${W}/a/status`, { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } }, 'application/merge-patch+json');
    const t = (await call('GET', `${W}?limit=500`, undefined, undefined, 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json')).body;
    expect(t.kind).toBe('Table');
    expect(t.columnDefinitions.map((c: any) => c.name)).toEqual(['Name', 'Phase', 'Size', 'Ready', 'Age']);
    const row = t.rows.find((r: any) => r.cells[0] === 'a');
    expect(row.cells.slice(0, 4)).toEqual(['a', 'Running', 2, 'True']);
    expect(row.cells[4]).toMatch(/^\d+s$/);
    expect(row.object.metadata.name).toBe('a');
  });
});

describe('mutating admission', () => {
  test('an unreachable webhook fails the create under failurePolicy Fail and is skipped under Ignore', async () => {
    const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
    const cfg = (policy: string) => ({
      metadata: { name: 'unreachable' },
      webhooks: [
        {
          name: 'inject.example.com',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: policy,
          clientConfig: { service: { namespace: 'default', name: 'nowhere', path: '/mutate' } },
          rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['configmaps'] }],
          objectSelector: { matchLabels: { hooked: 'yes' } },
        },
      ],
    });
    await call('POST', MWC, cfg('Fail'));
    const cm = (name: string, hooked: string) => ({ metadata: { name, labels: { hooked } }, data: {} });
    const failed = await call('POST', '/api/v1/namespaces/default/configmaps', cm('hooked', 'yes'));
    expect([failed.status, failed.body.message]).toEqual([500, expect.stringContaining('failed calling webhook "inject.example.com"')]);
    expect((await call('POST', '/api/v1/namespaces/default/configmaps', cm('not-selected', 'no'))).status).toBe(201);
    const cur = (await call('GET', `${MWC}/unreachable`)).body;
    await call('PUT', `${MWC}/unreachable`, { ...cfg('Ignore'), metadata: cur.metadata });
    expect((await call('POST', '/api/v1/namespaces/default/configmaps', cm('hooked', 'yes'))).status).toBe(201);
    await call('DELETE', `${MWC}/unreachable`);
  });

  test('matchConditions decide whether the webhook is called at all', async () => {
    const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
    await call('POST', MWC, {
      metadata: { name: 'conditional' },
      webhooks: [
        {
          name: 'cond.example.com',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          clientConfig: { service: { namespace: 'default', name: 'nowhere' } },
          rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['configmaps'] }],
          matchConditions: [{ name: 'annotated', expression: "has(object.metadata.annotations) && 'hook/me' in object.metadata.annotations" }],
        },
      ],
    });
    expect((await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'plain' } })).status).toBe(201);
    const hooked = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'annotated', annotations: { 'hook/me': 'yes' } } });
    expect(hooked.status).toBe(500);
    await call('DELETE', `${MWC}/conditional`);
  });
});

describe('watch', () => {
  test('resumes after a resourceVersion and streams ADDED, MODIFIED, DELETED in order', async () => {
    const rv = (await call('GET', W)).body.metadata.resourceVersion;
    await call('POST', W, widget('w1'));
    const w = new WatchStream(base, `${W}?resourceVersion=${rv}`);
    await call('PATCH', `${W}/w1`, { spec: { size: 7 } }, 'application/merge-patch+json');
    await call('DELETE', `${W}/w1`);
    const del = await w.next((e) => e.type === 'DELETED');
    w.close();
    const mine = w.events.filter((e) => e.object.metadata.name === 'w1');
    expect(mine.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    expect(mine[1].object.spec.size).toBe(7);
    expect(Number(del.object.metadata.resourceVersion)).toBeGreaterThan(Number(mine[1].object.metadata.resourceVersion));
  });

  test('without a resourceVersion the current state comes first as ADDED', async () => {
    const w = new WatchStream(base, `${W}?fieldSelector=metadata.name%3Da`);
    const first = await w.next();
    w.close();
    expect([first.type, first.object.metadata.name]).toEqual(['ADDED', 'a']);
  });

  test('label selectors turn objects moving in and out into ADDED and DELETED', async () => {
    await call('POST', W, widget('l1', { size: 1 }, { tier: 'x' }));
    const rv = (await call('GET', W)).body.metadata.resourceVersion;
    const w = new WatchStream(base, `${W}?labelSelector=tier%3Dy&resourceVersion=${rv}`);
    await call('PATCH', `${W}/l1`, { metadata: { labels: { tier: 'y' } } }, 'application/merge-patch+json');
    await call('PATCH', `${W}/l1`, { spec: { size: 2 } }, 'application/merge-patch+json');
    await call('PATCH', `${W}/l1`, { metadata: { labels: { tier: 'z' } } }, 'application/merge-patch+json');
    await w.next((e) => e.type === 'DELETED');
    w.close();
    expect(w.events.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
  });

  test('bookmarks arrive at the start and periodically when allowed', async () => {
    const w = new WatchStream(base, `${W}?allowWatchBookmarks=true&resourceVersion=${server.store.currentRv()}`);
    const first = await w.next((e) => e.type === 'BOOKMARK');
    await w.next((e) => e.type === 'BOOKMARK', w.events.indexOf(first) + 1);
    w.close();
    expect(first.object).toMatchObject({ kind: 'Widget', apiVersion: 'test.kvcache.io/v1', metadata: { resourceVersion: expect.any(String) } });
  });

  test('a resourceVersion older than the history window gets an ERROR event with a 410 Status', async () => {
    const old = server.store.currentRv() - 1;
    server.store.compact();
    const w = new WatchStream(base, `${W}?resourceVersion=${old}`);
    await w.done;
    expect(w.events).toEqual([{ type: 'ERROR', object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' }) }]);
  });
});

describe('@kubernetes/client-node against the server', () => {
  test('typed API, object API and Watch work', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kas-'));
    const kc = new KubeConfig();
    kc.loadFromFile(writeKubeconfig(join(dir, 'kubeconfig'), base));
    const core = kc.makeApiClient(CoreV1Api);
    const made = await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'typed' }, data: { k: 'v' } } });
    expect(made.metadata?.uid).toBeDefined();
    const list = await core.listNamespacedConfigMap({ namespace: 'default', labelSelector: '' });
    expect(list.items.map((i) => i.metadata?.name)).toContain('typed');
    await expect(core.readNamespacedConfigMap({ namespace: 'default', name: 'absent' })).rejects.toMatchObject({ code: 404 });
    const objects = KubernetesObjectApi.makeApiClient(kc);
    const cr = await objects.create(widget('via-object-api', { size: 4 }));
    expect((cr as any).spec.kind).toBe('shm');

    const seen: string[] = [];
    let resolveSeen!: () => void;
    const gotIt = new Promise<void>((r) => (resolveSeen = r));
    const ctl = await new Watch(kc).watch(
      W,
      { resourceVersion: server.store.currentRv() },
      (type, obj) => {
        seen.push(`${type} ${obj.metadata.name}`);
        if (obj.metadata.name === 'via-watch') resolveSeen();
      },
      () => undefined,
    );
    await call('POST', W, widget('via-watch'));
    await gotIt;
    ctl.abort();
    expect(seen).toEqual(['ADDED via-watch']);
  });
});
