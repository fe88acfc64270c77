// Metadata, write, deletion and history semantics of the test API server's object store,
// driven directly with a fake clock and counting uids.

import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { ApiError } from './api-error.js';
import { evalRule } from '../../common/cel-rules.js';
import { ObjectStore, type Obj, type StoreEvent } from './object-store.js';

const T0 = Date.parse('2026-01-02T03:04:05Z');

function newStore(historyLimit?: number) {
  let now = T0;
  let n = 0;
  const store = new ObjectStore({
    now: () => now,
    uid: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`,
    historyLimit,
    evalRule,
  });
  const events: StoreEvent[] = [];
  store.subscribe((e) => events.push(e));
  const t = (g: string, v: string, p: string) => store.registry.get(g, v, p)!;
  return { store, events, t, advance: (ms: number) => (now += ms) };
}

function err(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error('expected an ApiError');
}

const widgetCrd = yaml.load(readFileSync(new URL('./testdata/widget-crd.yaml', import.meta.url), 'utf8')) as Obj;

describe('object metadata', () => {
  test('create sets uid, a global resourceVersion, creationTimestamp and generation', () => {
    const { store, t } = newStore();
    const before = store.currentRv();
    const cm = store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'a' }, data: { k: 'v' } });
    const dep = store.create(t('apps', 'v1', 'deployments'), 'default', deployment('d'));
    expect(cm.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(cm.metadata.resourceVersion)).toBe(before + 1);
    expect(Number(dep.metadata.resourceVersion)).toBe(before + 2);
    expect(cm.metadata.creationTimestamp).toBe('2026-01-02T03:04:05Z');
    expect(cm.metadata.generation).toBeUndefined();
    expect(dep.metadata.generation).toBe(1);
    expect(cm).toMatchObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'default' } });
  });

  test('generateName gets a random suffix; a missing name is 422', () => {
    const { store, t } = newStore();
    const a = store.create(t('', 'v1', 'pods'), 'default', pod({ generateName: 'web-' }));
    expect(a.metadata.name).toMatch(/^web-[a-z0-9]{5}$/);
    expect(err(() => store.create(t('', 'v1', 'pods'), 'default', pod({}))).code).toBe(422);
  });

  test('creating an existing name is 409 AlreadyExists; unknown namespace is 404', () => {
    const { store, t } = newStore();
    store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'a' } });
    const e = err(() => store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'a' } }));
    expect([e.code, e.reason, e.message]).toEqual([409, 'AlreadyExists', 'configmaps "a" already exists']);
    expect(err(() => store.create(t('', 'v1', 'configmaps'), 'nope', { metadata: { name: 'a' } })).code).toBe(404);
  });

  test('an update with a stale resourceVersion is 409 Conflict and changes nothing', () => {
    const { store, t } = newStore();
    const cm = store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'a' }, data: { k: '1' } });
    store.update(t('', 'v1', 'configmaps'), 'default', 'a', { ...cm, data: { k: '2' } });
    const e = err(() => store.update(t('', 'v1', 'configmaps'), 'default', 'a', { ...cm, data: { k: '3' } }));
    expect([e.code, e.reason]).toEqual([409, 'Conflict']);
    expect(store.get(t('', 'v1', 'configmaps'), 'default', 'a').data).toEqual({ k: '2' });
  });

  test('generation bumps on spec changes only; status goes through the status subresource', () => {
    const { store, t } = newStore();
    const sts = t('apps', 'v1', 'statefulsets');
    const s1 = store.create(sts, 'default', { ...deployment('s'), kind: 'StatefulSet', status: { replicas: 9 } });
    expect(s1.status).toBeUndefined();
    const s2 = store.update(sts, 'default', 's', { ...s1, spec: { ...s1.spec, replicas: 3 }, status: { replicas: 7 } });
    expect(s2.metadata.generation).toBe(2);
    expect(s2.status).toBeUndefined();
    const s3 = store.update(sts, 'default', 's', { ...s2, status: { replicas: 3 } }, {}, 'status');
    expect(s3.metadata.generation).toBe(2);
    expect(s3.status).toEqual({ replicas: 3 });
    expect(Number(s3.metadata.resourceVersion)).toBeGreaterThan(Number(s2.metadata.resourceVersion));
    const s4 = store.patch(sts, 'default', 's', 'merge', { metadata: { labels: { x: 'y' } } });
    expect(s4.metadata.generation).toBe(2);
  });

  test('a write that changes nothing keeps the resourceVersion and emits no event', () => {
    const { store, t, events } = newStore();
    const cm = store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'a' }, data: { k: '1' } });
    const n = events.length;
    const again = store.patch(t('', 'v1', 'configmaps'), 'default', 'a', 'merge', { data: { k: '1' } });
    expect(again.metadata.resourceVersion).toBe(cm.metadata.resourceVersion);
    expect(events.length).toBe(n);
  });

  test('server-managed metadata cannot be overwritten by clients', () => {
    const { store, t } = newStore();
    const cm = store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'a', uid: 'mine', creationTimestamp: '1999-01-01T00:00:00Z' } });
    expect(cm.metadata.uid).not.toBe('mine');
    const up = store.update(t('', 'v1', 'configmaps'), 'default', 'a', { ...cm, metadata: { ...cm.metadata, uid: 'x', deletionTimestamp: '2000-01-01T00:00:00Z' } });
    expect(up.metadata.uid).toBe(cm.metadata.uid);
    expect(up.metadata.deletionTimestamp).toBeUndefined();
  });
});

describe('selectors and paging', () => {
  test('label and field selectors filter lists; limit/continue pages through', () => {
    const { store, t } = newStore();
    const cms = t('', 'v1', 'configmaps');
    store.create(t('', 'v1', 'namespaces'), '', { metadata: { name: 'other' } });
    for (const [ns, name, tier] of [
      ['default', 'a', 'web'],
      ['default', 'b', 'db'],
      ['other', 'c', 'web'],
      ['default', 'd', undefined],
    ]) {
      store.create(cms, ns!, { metadata: { name, labels: tier ? { tier } : {} } });
    }
    const names = (l: Obj) => l.items.map((o: Obj) => `${o.metadata.namespace}/${o.metadata.name}`);
    expect(names(store.list(cms, '', { labelSelector: 'tier=web' }))).toEqual(['default/a', 'other/c']);
    expect(names(store.list(cms, 'default', { labelSelector: 'tier in (web,db)' }))).toEqual(['default/a', 'default/b']);
    expect(names(store.list(cms, 'default', { labelSelector: '!tier' }))).toEqual(['default/d']);
    expect(names(store.list(cms, 'default', { labelSelector: 'tier,tier!=db' }))).toEqual(['default/a']);
    expect(names(store.list(cms, '', { fieldSelector: 'metadata.namespace=other' }))).toEqual(['other/c']);
    expect(names(store.list(cms, '', { fieldSelector: 'metadata.name!=a,metadata.namespace==default' }))).toEqual(['default/b', 'default/d']);
    const p1 = store.list(cms, '', { limit: 3 });
    expect(names(p1)).toEqual(['default/a', 'default/b', 'default/d']);
    const p2 = store.list(cms, '', { limit: 3, continueToken: p1.metadata.continue });
    expect(names(p2)).toEqual(['other/c']);
    expect(p2.metadata.continue).toBeUndefined();
    expect(err(() => store.list(cms, '', { fieldSelector: 'spec.x=1' })).code).toBe(400);
  });
});

describe('deletion', () => {
  test('finalizers hold the object with a deletionTimestamp until the last one is removed', () => {
    const { store, t, events } = newStore();
    const cms = t('', 'v1', 'configmaps');
    store.create(cms, 'default', { metadata: { name: 'a', finalizers: ['x/one', 'x/two'] } });
    const marked = store.delete(cms, 'default', 'a');
    expect(marked.metadata.deletionTimestamp).toBe('2026-01-02T03:04:05Z');
    expect(marked.metadata.deletionGracePeriodSeconds).toBe(0);
    const dep = store.create(t('apps', 'v1', 'deployments'), 'default', { ...deployment('held'), metadata: { name: 'held', finalizers: ['x/f'] } });
    expect(store.delete(t('apps', 'v1', 'deployments'), 'default', 'held').metadata.generation).toBe(dep.metadata.generation + 1);
    expect(store.get(cms, 'default', 'a').metadata.deletionTimestamp).toBeDefined();
    const e = err(() => store.patch(cms, 'default', 'a', 'json', [{ op: 'add', path: '/metadata/finalizers/-', value: 'x/three' }]));
    expect(e.code).toBe(422);
    store.patch(cms, 'default', 'a', 'json', [{ op: 'remove', path: '/metadata/finalizers/0' }]);
    expect(store.get(cms, 'default', 'a').metadata.finalizers).toEqual(['x/two']);
    store.patch(cms, 'default', 'a', 'merge', { metadata: { finalizers: null } });
    expect(err(() => store.get(cms, 'default', 'a')).code).toBe(404);
    expect(events.at(-1)?.type).toBe('DELETED');
  });

  test('deleting an owner garbage-collects its dependents, keeping those with another live owner', () => {
    const { store, t } = newStore();
    const cms = t('', 'v1', 'configmaps');
    const o1 = store.create(cms, 'default', { metadata: { name: 'owner1' } });
    const o2 = store.create(cms, 'default', { metadata: { name: 'owner2' } });
    const ref = (o: Obj) => ({ apiVersion: 'v1', kind: 'ConfigMap', name: o.metadata.name, uid: o.metadata.uid });
    store.create(cms, 'default', { metadata: { name: 'only1', ownerReferences: [ref(o1)] } });
    const child = store.create(cms, 'default', { metadata: { name: 'child-of-only1', ownerReferences: [] } });
    store.update(cms, 'default', 'child-of-only1', { ...child, metadata: { ...child.metadata, ownerReferences: [ref(store.get(cms, 'default', 'only1'))] } });
    store.create(cms, 'default', { metadata: { name: 'both', ownerReferences: [ref(o1), ref(o2)] } });
    store.delete(cms, 'default', 'owner1');
    const left = store.list(cms, 'default').items.map((o: Obj) => o.metadata.name);
    expect(left).toEqual(['both', 'owner2']);
    expect(store.get(cms, 'default', 'both').metadata.ownerReferences.map((r: Obj) => r.name)).toEqual(['owner2']);
  });

  test('Orphan propagation keeps dependents and strips the owner reference', () => {
    const { store, t } = newStore();
    const cms = t('', 'v1', 'configmaps');
    const o = store.create(cms, 'default', { metadata: { name: 'o' } });
    store.create(cms, 'default', { metadata: { name: 'd', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o', uid: o.metadata.uid }] } });
    store.delete(cms, 'default', 'o', { propagationPolicy: 'Orphan' });
    expect(store.get(cms, 'default', 'd').metadata.ownerReferences).toBeUndefined();
  });

  test('preconditions on uid and resourceVersion are enforced', () => {
    const { store, t } = newStore();
    const cms = t('', 'v1', 'configmaps');
    store.create(cms, 'default', { metadata: { name: 'a' } });
    expect(err(() => store.delete(cms, 'default', 'a', { preconditions: { uid: 'other' } })).code).toBe(409);
    expect(err(() => store.delete(cms, 'default', 'a', { preconditions: { resourceVersion: '1' } })).code).toBe(409);
  });

  test('deleting a namespace deletes its content, waiting for finalizers', () => {
    const { store, t } = newStore();
    const ns = t('', 'v1', 'namespaces');
    const cms = t('', 'v1', 'configmaps');
    store.create(ns, '', { metadata: { name: 'team' } });
    store.create(cms, 'team', { metadata: { name: 'a' } });
    store.create(cms, 'team', { metadata: { name: 'held', finalizers: ['x/f'] } });
    store.delete(ns, '', 'team');
    expect(store.get(ns, '', 'team').status.phase).toBe('Terminating');
    expect(err(() => store.create(cms, 'team', { metadata: { name: 'late' } })).code).toBe(403);
    expect(store.list(cms, 'team').items.map((o: Obj) => o.metadata.name)).toEqual(['held']);
    store.patch(cms, 'team', 'held', 'merge', { metadata: { finalizers: null } });
    expect(err(() => store.get(ns, '', 'team')).code).toBe(404);
  });
});

describe('history', () => {
  test('events after a resourceVersion are replayed; older than the window is 410 Expired', () => {
    const { store, t } = newStore(5);
    const cms = t('', 'v1', 'configmaps');
    const rv0 = store.currentRv();
    for (let i = 0; i < 3; i++) store.create(cms, 'default', { metadata: { name: `c${i}` } });
    expect(store.eventsSince(cms, rv0).map((e) => e.object.metadata.name)).toEqual(['c0', 'c1', 'c2']);
    for (let i = 3; i < 10; i++) store.create(cms, 'default', { metadata: { name: `c${i}` } });
    const e = err(() => store.eventsSince(cms, rv0));
    expect([e.code, e.reason]).toEqual([410, 'Expired']);
    store.compact();
    expect(err(() => store.eventsSince(cms, store.currentRv() - 1)).code).toBe(410);
    expect(store.eventsSince(cms, store.currentRv())).toEqual([]);
  });
});

describe('custom resources', () => {
  function withCrd() {
    const s = newStore();
    s.store.create(s.t('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), '', widgetCrd);
    return { ...s, w: s.t('test.kvcache.io', 'v1', 'widgets') };
  }

  test('a CRD is Established and serves its kind; deleting it removes instances', () => {
    const { store, t, w } = withCrd();
    const crd = store.get(t('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), '', 'widgets.test.kvcache.io');
    expect(crd.status.conditions.find((c: Obj) => c.type === 'Established').status).toBe('True');
    store.create(w, 'default', { apiVersion: 'test.kvcache.io/v1', kind: 'Widget', metadata: { name: 'a' }, spec: { size: 1 } });
    store.delete(t('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), '', 'widgets.test.kvcache.io');
    expect(store.registry.get('test.kvcache.io', 'v1', 'widgets')).toBeUndefined();
  });

  test('defaults are applied, unknown fields pruned (or rejected under Strict), status ignored on create', () => {
    const { store, w } = withCrd();
    const a = store.create(w, 'default', { metadata: { name: 'a' }, spec: { size: 2, bogus: 1, extra: { any: { deep: true } } }, status: { phase: 'X' } });
    expect(a.spec).toEqual({ size: 2, kind: 'shm', minReplicas: 1, maxReplicas: 3, extra: { any: { deep: true } } });
    expect(a.status).toBeUndefined();
    expect(store.lastWarnings).toEqual(['unknown field "spec.bogus"']);
    const e = err(() => store.create(w, 'default', { metadata: { name: 'b' }, spec: { size: 2, bogus: 1 } }, { fieldValidation: 'Strict' }));
    expect(e.code).toBe(400);
    expect(e.message).toContain('unknown field "spec.bogus"');
  });

  test('schema violations are one 422 listing every cause', () => {
    const { store, w } = withCrd();
    const e = err(() => store.create(w, 'default', { metadata: { name: 'a' }, spec: { size: 'big', kind: 'disk', name: 'x'.repeat(30), minReplicas: 4 } }));
    expect([e.code, e.reason]).toEqual([422, 'Invalid']);
    expect(e.details?.causes?.map((c) => c.field).sort()).toEqual(['spec', 'spec.kind', 'spec.name', 'spec.size']);
    expect(e.message).toContain('spec.size: Invalid value: "big": spec.size in body must be of type integer: "string"');
    expect(e.message).toContain('spec: Invalid value: "object": minReplicas must not exceed maxReplicas');
    const req = err(() => store.create(w, 'default', { metadata: { name: 'a' }, spec: {} }));
    expect(req.message).toBe('Widget.test.kvcache.io "a" is invalid: spec.size: Required value');
  });

  test('transition rules compare with the stored object', () => {
    const { store, w } = withCrd();
    store.create(w, 'default', { metadata: { name: 'a' }, spec: { size: 1, kind: 'shm' } });
    const e = err(() => store.patch(w, 'default', 'a', 'merge', { spec: { kind: 'dax' } }));
    expect(e.message).toContain('kind is immutable');
    expect(store.patch(w, 'default', 'a', 'merge', { spec: { size: 9 } }).metadata.generation).toBe(2);
  });

  test('strategic merge patch is refused for custom resources (415)', () => {
    const { store, w } = withCrd();
    store.create(w, 'default', { metadata: { name: 'a' }, spec: { size: 1 } });
    expect(err(() => store.patch(w, 'default', 'a', 'strategic', { spec: { size: 2 } })).code).toBe(415);
  });

  test('server-side apply records the manager, creates, merges, and drops fields it no longer applies', () => {
    const { store, w } = withCrd();
    const cfg = (spec: Obj) => ({ apiVersion: 'test.kvcache.io/v1', kind: 'Widget', metadata: { name: 'a', labels: { app: 'x' } }, spec });
    const a = store.patch(w, 'default', 'a', 'apply', cfg({ size: 1, tags: ['t'] }), { fieldManager: 'op' });
    expect(a.metadata.managedFields).toEqual([
      expect.objectContaining({ manager: 'op', operation: 'Apply', fieldsV1: expect.objectContaining({ 'f:spec': expect.objectContaining({ 'f:tags': {} }) }) }),
    ]);
    store.patch(w, 'default', 'a', 'merge', { spec: { labels: { by: 'other' } } }, { fieldManager: 'other' });
    const b = store.patch(w, 'default', 'a', 'apply', cfg({ size: 2 }), { fieldManager: 'op' });
    expect(b.spec.tags).toBeUndefined();
    expect(b.spec.labels).toEqual({ by: 'other' });
    expect(b.spec.size).toBe(2);
    expect(err(() => store.patch(w, 'default', 'a', 'apply', cfg({ size: 2 }), {})).code).toBe(400);
  });
});

function pod(meta: Obj): Obj {
  return { metadata: meta, spec: { containers: [{ name: 'c', image: 'busybox' }] } };
}

function deployment(name: string): Obj {
  return {
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    },
  };
}

describe('dry run', () => {
  test('a dry-run create or delete validates and answers but stores nothing', () => {
    const { store, t, events } = newStore();
    const n = events.length;
    const out = store.create(t('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), '', widgetCrd, { dryRun: true });
    expect(out.metadata.name).toBe('widgets.test.kvcache.io');
    expect(store.registry.get('test.kvcache.io', 'v1', 'widgets')).toBeUndefined();
    expect(err(() => store.create(t('', 'v1', 'pods'), 'default', { metadata: { name: 'p' }, spec: { containers: [] } }, { dryRun: true })).code).toBe(422);
    store.create(t('', 'v1', 'configmaps'), 'default', { metadata: { name: 'keep' } });
    store.delete(t('', 'v1', 'configmaps'), 'default', 'keep', { dryRun: true });
    expect(store.get(t('', 'v1', 'configmaps'), 'default', 'keep').metadata.name).toBe('keep');
    expect(events.length).toBe(n + 1);
  });
});

describe('metadata validation', () => {
  test('owner references must be complete with at most one controller; annotations are bounded', () => {
    const { store, t } = newStore();
    const cms = t('', 'v1', 'configmaps');
    const ref = (uid: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', name: 'o', uid, controller: true });
    const two = err(() => store.create(cms, 'default', { metadata: { name: 'a', ownerReferences: [ref('1'), ref('2')] } }));
    expect(two.message).toContain('Only one reference can have Controller set to true');
    const partial = err(() => store.create(cms, 'default', { metadata: { name: 'a', ownerReferences: [{ kind: 'ConfigMap', name: 'o' }] } }));
    expect(partial.details?.causes?.map((c) => c.field)).toEqual(['metadata.ownerReferences[0].apiVersion', 'metadata.ownerReferences[0].uid']);
    const big = err(() => store.create(cms, 'default', { metadata: { name: 'a', annotations: { k: 'x'.repeat(300_000) } } }));
    expect([big.code, big.details?.causes?.[0].field]).toEqual([422, 'metadata.annotations']);
    expect(err(() => store.create(cms, 'default', { metadata: { name: 'a', labels: { 'bad key!': 'v' } } })).code).toBe(422);
  });
});

describe('garbage collection of late dependents', () => {
  test('an object written with an owner that no longer exists is collected', () => {
    const { store, t } = newStore();
    const cms = t('', 'v1', 'configmaps');
    const live = store.create(cms, 'default', { metadata: { name: 'live' } });
    const ref = (name: string, uid: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', name, uid });
    store.create(cms, 'default', { metadata: { name: 'late', ownerReferences: [ref('gone', 'no-such-uid')] } });
    store.create(cms, 'default', { metadata: { name: 'mixed', ownerReferences: [ref('gone', 'no-such-uid'), ref('live', live.metadata.uid)] } });
    store.collectIfOrphaned('/configmaps', 'default', 'late');
    store.collectIfOrphaned('/configmaps', 'default', 'mixed');
    expect(err(() => store.get(cms, 'default', 'late')).code).toBe(404);
    expect(store.get(cms, 'default', 'mixed').metadata.ownerReferences.map((r: Obj) => r.name)).toEqual(['live']);
  });
});

describe('pod validation', () => {
  test('mounts must name a volume, port names are short, restartPolicy only on init containers', () => {
    const { store, t } = newStore();
    const e = err(() =>
      store.create(t('', 'v1', 'pods'), 'default', {
        metadata: { name: 'p' },
        spec: {
          initContainers: [{ name: 'side', image: 's', restartPolicy: 'Always', volumeMounts: [{ name: 'shm', mountPath: '/shm' }] }],
          containers: [
            {
              name: 'side',
              image: 'a',
              restartPolicy: 'Always',
              ports: [{ name: 'a-very-long-port-name', containerPort: 80 }],
              volumeMounts: [{ name: 'missing', mountPath: '/m' }],
            },
          ],
          volumes: [{ name: 'shm', emptyDir: {} }],
        },
      }),
    );
    expect(e.details?.causes?.map((c) => `${c.field} ${c.reason}`)).toEqual([
      'spec.containers[0].name FieldValueDuplicate',
      'spec.containers[0].volumeMounts[0].name FieldValueNotFound',
      'spec.containers[0].ports[0].name FieldValueInvalid',
      'spec.containers[0].restartPolicy FieldValueForbidden',
    ]);
  });
});
