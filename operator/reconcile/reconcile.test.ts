// Reconcile passes against an in-memory API (create, merge patch, status subresource,
// generations): first pass creates everything, the next writes nothing, spec changes patch and
// delete, invalid specs end in a terminal error with conditions, and status reflects what the
// StatefulSet, the leader pod and the master's segment detail say.
import { FakeClock } from '../../common/clock.js';
import { MemoryApi } from '../testing/memory-api.js';
import { reconcileCluster } from './cluster-reconciler.js';
import { reconcileSegment } from './segment-reconciler.js';
import { TerminalError, type ReconcileContext } from './context.js';
import { MemoryEventRecorder } from './events.js';
import { isSubset, mergePatchFor } from './object-diff.js';
import { setConditions } from './conditions.js';
import { Backoff } from './backoff.js';
import type { SegmentsDetail } from './segments-detail.js';

function setup(detail?: SegmentsDetail | Error) {
  const api = new MemoryApi();
  const events = new MemoryEventRecorder();
  const ctx: ReconcileContext = {
    api,
    events,
    defaults: { image: 'store:2', namespace: 'default' },
    fetchSegments:
      detail === undefined
        ? undefined
        : async () => {
            if (detail instanceof Error) throw detail;
            return detail;
          },
    masterHttpUrl: () => 'http://master',
    wallNow: () => '2026-01-01T00:00:00Z',
    log: () => {},
  };
  return { api, events, ctx };
}

const clusterObj = (spec: object) => ({ apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'kv', namespace: 'ml' }, spec });

describe('the cluster secret', () => {
  it('is created once with 32 random bytes as hex, owned by the cluster, and never overwritten', async () => {
    const { api, ctx, events } = setup();
    await api.create(clusterObj({}));
    await reconcileCluster(ctx, 'ml', 'kv');
    const secret = (await api.get<any>({ kind: 'Secret', namespace: 'ml', name: 'kv-cluster-secret' }))!;
    const value = Buffer.from(secret.data.secret, 'base64').toString();
    expect(value).toMatch(/^[0-9a-f]{64}$/);
    const uid = (await api.get({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.metadata!.uid;
    expect(secret.metadata.ownerReferences[0]).toMatchObject({ kind: 'StoreCluster', uid, controller: true });
    expect(events.events.filter((e) => e.reason === 'ClusterSecretCreated')).toHaveLength(1);
    // A value put there by a person stays, even a bad one (reported, not replaced).
    await api.replace({ ...secret, data: { secret: Buffer.from('short').toString('base64') } });
    api.writes = [];
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(api.writes.filter((w) => w.includes('Secret'))).toEqual([]);
    expect(events.events.find((e) => e.reason === 'ClusterSecretInvalid')?.message).toMatch(/shorter than 32 bytes/);
  });

  it('a second cluster gets a different secret', async () => {
    const { api, ctx } = setup();
    await api.create(clusterObj({}));
    await api.create({ ...clusterObj({}), metadata: { name: 'kv2', namespace: 'ml' } });
    await reconcileCluster(ctx, 'ml', 'kv');
    await reconcileCluster(ctx, 'ml', 'kv2');
    const read = async (n: string) => (await api.get<any>({ kind: 'Secret', namespace: 'ml', name: `${n}-cluster-secret` }))!.data.secret;
    expect(await read('kv')).not.toBe(await read('kv2'));
  });

  it("scrapes a TLS cluster's master with the CA of its spec.tls Secret", async () => {
    const seen: unknown[] = [];
    const { api, ctx } = setup();
    ctx.fetchSegments = async (_url, tls) => {
      seen.push(tls);
      return { total_segments: 0, segments: [] };
    };
    await api.create(clusterObj({ tls: { secretName: 'kv-tls' } }));
    await api.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'kv-master-0', namespace: 'ml', labels: { 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' } },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    } as any);
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(seen).toEqual([]);
    const st = (await api.get<any>({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.status;
    expect(JSON.stringify(st)).toContain('spec.tls.secretName: Secret ml/kv-tls not found');
    await api.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'kv-tls', namespace: 'ml' }, data: { 'ca.crt': Buffer.from('CA PEM').toString('base64') } } as any);
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(seen).toEqual([{ ca: Buffer.from('CA PEM') }]);
  });
});

describe('reconcileCluster', () => {
  it('creates every rendered object, owned by the cluster, then writes nothing on the next pass', async () => {
    const { api, ctx, events } = setup();
    await api.create(clusterObj({ master: { replicas: 3, haBackend: { type: 'k8s' } }, metadataServer: { type: 'p2p' } }));
    api.writes = [];
    const res = await reconcileCluster(ctx, 'ml', 'kv');
    expect(api.writes).toEqual([
      'create Secret/ml/kv-cluster-secret',
      'create ServiceAccount/ml/kv-master',
      'create Role/ml/kv-master',
      'create RoleBinding/ml/kv-master',
      'create ConfigMap/ml/kv-master-config',
      'create Service/ml/kv-master',
      'create Service/ml/kv-master-headless',
      'create Service/ml/kv-master-metrics',
      'create PodDisruptionBudget/ml/kv-master',
      'create StatefulSet/ml/kv-master',
      'create NetworkPolicy/ml/kv-master',
      'patch/status StoreCluster/ml/kv',
    ]);
    const uid = (await api.get({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.metadata!.uid;
    expect((await api.get({ kind: 'StatefulSet', namespace: 'ml', name: 'kv-master' }))!.metadata!.ownerReferences![0]).toMatchObject({
      kind: 'StoreCluster',
      uid,
      controller: true,
    });
    expect(res.requeueAfterMs).toBe(5000); // masters not ready yet: an expected wait
    expect(events.events.filter((e) => e.reason === 'Created')).toHaveLength(10);
    const st = (await api.get<any>({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.status;
    expect(st).toMatchObject({ phase: 'Pending', readyMasters: 0, observedGeneration: 1, masterAddress: 'kv-master.ml.svc:50051' });
    expect(st.conditions.map((c: any) => `${c.type}=${c.status}`)).toEqual(['Ready=False', 'Progressing=True', 'Degraded=False']);

    api.writes = [];
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(api.writes).toEqual([]);
  });

  it("shows the master's objects and the hit rate of the last minute, from successive scrapes", async () => {
    const { api, ctx } = setup();
    const clock = new FakeClock(0);
    let counters = { objects: 10, lookups: 100, misses: 40 };
    Object.assign(ctx, { fetchFigures: async () => counters, hitRates: new Map(), clock });
    await api.create(clusterObj({}));
    await reconcileCluster(ctx, 'ml', 'kv');
    api.objects.get('StatefulSet/ml/kv-master').status = { observedGeneration: 1, replicas: 1, readyReplicas: 1, updatedReplicas: 1 };
    await api.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'kv-master-0', namespace: 'ml', labels: { 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' } },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
    await reconcileCluster(ctx, 'ml', 'kv');
    const status = async () => (await api.get<any>({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.status;
    expect(await status()).toMatchObject({ objects: 10, hitRate: '-' }); // one scrape: no rate yet
    await clock.advance(30_000);
    counters = { objects: 12, lookups: 300, misses: 60 };
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(await status()).toMatchObject({ objects: 12, hitRate: '90.0%' });
  });

  it('reports Ready with the leader and segment figures once masters are up, patching status only on change', async () => {
    const detail = {
      total_segments: 2,
      segments: [
        { segment_name: '10.0.0.5:12300', size_bytes: 2 ** 30, status: 'MOUNTED', allocator_capacity_bytes: 2 ** 30, allocator_used_bytes: 100 },
        { segment_name: '10.0.0.6:12300', size_bytes: 2 ** 31, status: 'MOUNTED', allocator_capacity_bytes: 2 ** 31, allocator_used_bytes: 50 },
      ],
    };
    const { api, ctx, events } = setup(detail);
    await api.create(clusterObj({ master: { replicas: 2, haBackend: { type: 'k8s' } }, metadataServer: { type: 'p2p' } }));
    await reconcileCluster(ctx, 'ml', 'kv');
    const sts = api.objects.get('StatefulSet/ml/kv-master');
    sts.status = { observedGeneration: 1, replicas: 2, readyReplicas: 2, updatedReplicas: 2 };
    const labels = { 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' };
    await api.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'kv-master-0', namespace: 'ml', labels } });
    await api.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'kv-master-1', namespace: 'ml', labels: { ...labels, 'store.kvcache.io/leader': 'true' } } });
    const res = await reconcileCluster(ctx, 'ml', 'kv');
    const st = (await api.get<any>({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.status;
    expect(st).toMatchObject({ phase: 'Ready', leader: 'kv-master-1', readyMasters: 2, segments: 2, capacityBytes: 3 * 2 ** 30, usedBytes: 150, capacity: '3.0Gi' });
    expect(res.requeueAfterMs).toBe(30_000);
    expect(events.events.map((e) => e.reason)).toContain('LeaderElected');
    api.writes = [];
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(api.writes).toEqual([]);
  });

  it('marks the cluster Degraded when the master cannot be queried', async () => {
    const { api, ctx } = setup(new Error('connect ECONNREFUSED'));
    await api.create(clusterObj({}));
    await reconcileCluster(ctx, 'ml', 'kv');
    api.objects.get('StatefulSet/ml/kv-master').status = { observedGeneration: 1, replicas: 1, readyReplicas: 1, updatedReplicas: 1 };
    await api.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'kv-master-0', namespace: 'ml', labels: { 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' } },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
    await reconcileCluster(ctx, 'ml', 'kv');
    const st = (await api.get<any>({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.status;
    expect(st.phase).toBe('Degraded');
    expect(st.conditions.find((c: any) => c.type === 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'SegmentsUnavailable',
      message: 'cannot read segments from the master: connect ECONNREFUSED',
    });
  });

  it('patches drifted objects and deletes the ones a smaller spec no longer wants', async () => {
    const { api, ctx } = setup();
    await api.create(clusterObj({ master: { replicas: 3, haBackend: { type: 'k8s' } }, metadataServer: { type: 'p2p' } }));
    await reconcileCluster(ctx, 'ml', 'kv');
    await api.mergePatch({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }, { spec: { master: { replicas: 1, haBackend: null } } });
    api.writes = [];
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(api.writes).toEqual(
      expect.arrayContaining([
        'patch ServiceAccount/ml/kv-master',
        'patch ConfigMap/ml/kv-master-config',
        'patch Service/ml/kv-master',
        'patch StatefulSet/ml/kv-master',
        'delete RoleBinding/ml/kv-master',
        'delete Role/ml/kv-master',
        'delete PodDisruptionBudget/ml/kv-master',
      ]),
    );
    expect(api.objects.get('StatefulSet/ml/kv-master').spec.replicas).toBe(1);
    expect(JSON.parse(api.objects.get('ConfigMap/ml/kv-master-config').data['master.json']).enable_ha).toBeUndefined();
    // A single master sets no leader label: the RPC Service must stop requiring it.
    expect(api.objects.get('Service/ml/kv-master').spec.selector).toEqual({ 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' });
    expect(api.objects.get('StatefulSet/ml/kv-master').spec.template.spec.affinity).toBeUndefined();
    api.writes = [];
    await reconcileCluster(ctx, 'ml', 'kv');
    expect(api.writes).toEqual([]);
  });

  it('ends an invalid spec with a terminal error, conditions naming every problem, and a Warning event', async () => {
    const { api, ctx, events } = setup();
    await api.create(clusterObj({ master: { replicas: 3, rpcPort: 9003 } }));
    await expect(reconcileCluster(ctx, 'ml', 'kv')).rejects.toBeInstanceOf(TerminalError);
    const st = (await api.get<any>({ kind: 'StoreCluster', namespace: 'ml', name: 'kv' }))!.status;
    expect(st.phase).toBe('Failed');
    const ready = st.conditions.find((c: any) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'InvalidSpec', observedGeneration: 1 });
    expect(ready.message).toMatch(/haBackend is required when master.replicas > 1.*metadataServer.type 'http' is embedded.*metricsPort: 9003 is already used/);
    expect(events.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'InvalidSpec' })]);
    expect([...api.objects.keys()].filter((k) => !k.startsWith('StoreCluster') && !k.startsWith('Event'))).toEqual([]);
    // Retrying the same spec changes nothing and records no new event.
    api.writes = [];
    await expect(reconcileCluster(ctx, 'ml', 'kv')).rejects.toBeInstanceOf(TerminalError);
    expect(api.writes).toEqual([]);
    expect(events.events).toHaveLength(1);
  });

  it('does nothing for a deleted cluster (its objects are garbage-collected by owner)', async () => {
    const { api, ctx } = setup();
    expect(await reconcileCluster(ctx, 'ml', 'gone')).toEqual({});
    expect(api.writes).toEqual([]);
  });
});

describe('reconcileSegment', () => {
  const segObj = { apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreSegment', metadata: { name: 'pool', namespace: 'ml' }, spec: { cluster: 'kv', size: '4Gi', replicas: 2 } };

  it('waits for its cluster (requeue, ClusterNotFound), then renders against it', async () => {
    const { api, ctx, events } = setup();
    await api.create(segObj);
    expect(await reconcileSegment(ctx, 'ml', 'pool')).toEqual({ requeueAfterMs: 30_000 });
    const st = (await api.get<any>({ kind: 'StoreSegment', namespace: 'ml', name: 'pool' }))!.status;
    expect(st.phase).toBe('Pending');
    expect(st.conditions.find((c: any) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'ClusterNotFound', message: 'StoreCluster kv not found in namespace ml' });
    expect(events.events.map((e) => e.reason)).toEqual(['ClusterNotFound']);

    await api.create(clusterObj({}));
    await reconcileSegment(ctx, 'ml', 'pool');
    expect([...api.objects.keys()]).toEqual(expect.arrayContaining(['ConfigMap/ml/pool-store-config', 'Service/ml/pool-store', 'StatefulSet/ml/pool-store']));
  });

  it('counts only the segments its own pods mounted', async () => {
    const detail = {
      total_segments: 3,
      segments: [
        { segment_name: 'a', te_endpoint: '10.1.0.1:12300', size_bytes: 4 * 2 ** 30, status: 'MOUNTED' },
        { segment_name: 'b', te_endpoint: '10.1.0.2:12301', size_bytes: 4 * 2 ** 30, status: 'MOUNTED' },
        { segment_name: 'c', te_endpoint: '10.9.9.9:12300', size_bytes: 2 ** 30, status: 'MOUNTED' },
      ],
    };
    const { api, ctx } = setup(detail);
    await api.create(clusterObj({}));
    await api.create(segObj);
    await reconcileSegment(ctx, 'ml', 'pool');
    api.objects.get('StatefulSet/ml/pool-store').status = { observedGeneration: 1, replicas: 2, readyReplicas: 2, updatedReplicas: 2 };
    const labels = { 'store.kvcache.io/segment': 'pool', 'store.kvcache.io/role': 'store' };
    await api.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'pool-store-0', namespace: 'ml', labels }, status: { podIP: '10.1.0.1' } });
    await api.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'pool-store-1', namespace: 'ml', labels }, status: { podIP: '10.1.0.2' } });
    await reconcileSegment(ctx, 'ml', 'pool');
    const st = (await api.get<any>({ kind: 'StoreSegment', namespace: 'ml', name: 'pool' }))!.status;
    expect(st).toMatchObject({ phase: 'Ready', readyReplicas: 2, mountedSegments: 2, mountedBytes: 8 * 2 ** 30, capacity: '8.0Gi' });
  });

  it('rejects an invalid segment terminally', async () => {
    const { api, ctx } = setup();
    await api.create({ ...segObj, spec: { cluster: 'kv', size: '0', memory: { kind: 'dax' } } });
    await expect(reconcileSegment(ctx, 'ml', 'pool')).rejects.toThrow(/memory.devicePath is required when memory.kind is dax.*spec.size: 0 is below the minimum/);
  });
});

describe('helpers', () => {
  it('isSubset ignores server defaults but not missing or changed fields', () => {
    expect(isSubset({ spec: { a: 1, l: [{ n: 'x' }] } }, { spec: { a: 1, extra: true, l: [{ n: 'x', d: 0 }] }, status: {} })).toBe(true);
    expect(isSubset({ spec: { a: 1 } }, { spec: { a: 2 } })).toBe(false);
    expect(isSubset({ spec: { l: [1, 2] } }, { spec: { l: [1] } })).toBe(false);
    expect(isSubset({ port: 8080 }, { port: '8080' })).toBe(true);
    // Owned maps and pod fields: extra keys or dropped fields are drift.
    expect(isSubset({ spec: { selector: { a: '1' } } }, { spec: { selector: { a: '1', leader: 'true' } } })).toBe(false);
    expect(isSubset({ template: { spec: { containers: [] } } }, { template: { spec: { containers: [], nodeSelector: { x: 'y' } } } })).toBe(false);
  });

  it('mergePatchFor removes extra keys of owned maps and dropped pod fields with null', () => {
    expect(mergePatchFor({ spec: { selector: { a: '1' } } }, { spec: { selector: { a: '1', leader: 'true' }, clusterIP: '10.0.0.1' } })).toEqual({
      spec: { selector: { a: '1', leader: null } },
    });
    expect(mergePatchFor({ spec: { template: { spec: { containers: [] } } } }, { spec: { template: { spec: { containers: [], affinity: {} } } } })).toEqual({
      spec: { template: { spec: { containers: [], affinity: null } } },
    });
  });

  it('setConditions keeps lastTransitionTime unless the status flips', () => {
    const a = setConditions(undefined, [{ type: 'Ready', status: 'False', reason: 'x', message: 'm' }], 't1');
    const b = setConditions(a, [{ type: 'Ready', status: 'False', reason: 'y', message: 'n' }], 't2');
    const c = setConditions(b, [{ type: 'Ready', status: 'True', reason: 'z', message: 'o' }], 't3');
    expect([a[0].lastTransitionTime, b[0].lastTransitionTime, c[0].lastTransitionTime]).toEqual(['t1', 't1', 't3']);
  });

  it('Backoff doubles per failure up to the cap, with bounded jitter, and resets on success', () => {
    const b = new Backoff({ baseMs: 100, maxMs: 1000, jitter: 0.5 }, () => 1);
    expect([b.fail('k'), b.fail('k'), b.fail('k'), b.fail('k'), b.fail('k')]).toEqual([150, 300, 600, 1200, 1500]);
    b.succeed('k');
    expect(b.fail('k')).toBe(150);
    expect(new Backoff({ baseMs: 100, maxMs: 1000, jitter: 0.5 }, () => 0).fail('j')).toBe(100);
  });
});
