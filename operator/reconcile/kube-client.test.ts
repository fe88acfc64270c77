// KubeClient (the operator's KubeApi on @kubernetes/client-node) against the test API server
// over real HTTP: reads give the server's JSON, lists restore kind/apiVersion and filter by label,
// writes keep optimistic concurrency, merge patches delete with null, the status subresource of a
// custom resource changes only status, and failures arrive as KubeApiError with status and reason.
import type { KubernetesObject } from '@kubernetes/client-node';
import { startKubeFixture, type KubeFixture } from '../testing/kube-fixture.js';
import { KubeApiError, KubeClient } from './kube-client.js';

const NS = 'ml';
let fx: KubeFixture;
let api: KubeClient;

beforeAll(async () => {
  fx = await startKubeFixture(NS);
  api = new KubeClient(fx.kc);
});
afterAll(() => fx.server.stop());

const configMap = (name: string, labels: Record<string, string> = {}, data: Record<string, string> = { a: '1' }) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: NS, labels },
  data,
});

async function rejection(p: Promise<unknown>): Promise<KubeApiError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof KubeApiError) return e;
    throw e;
  }
  throw new Error('expected a KubeApiError');
}

describe('KubeClient', () => {
  it('creates and reads objects as the server sends them (plain JSON, timestamps as strings)', async () => {
    expect(await api.get({ kind: 'ConfigMap', namespace: NS, name: 'absent' })).toBeUndefined();
    const created = await api.create<KubernetesObject>(configMap('cm1'));
    expect(created.metadata?.uid).toBeTruthy();
    const got = await api.get<KubernetesObject & { data?: Record<string, string> }>({ kind: 'ConfigMap', namespace: NS, name: 'cm1' });
    expect(got?.data).toEqual({ a: '1' });
    expect(typeof got?.metadata?.creationTimestamp).toBe('string');
    expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
  });

  it("writes a NetworkPolicy's rules whole: `from` is not lost to the library's model names (a policy would admit everyone)", async () => {
    const rule = { from: [{ podSelector: { matchLabels: { member: 'yes' } } }], ports: [{ port: 50051, protocol: 'TCP' }] };
    const policy = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'np', namespace: NS },
      spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [rule] },
    };
    await api.create(policy);
    const stored = (await fx.call('GET', `/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies/np`)).body;
    expect(stored.spec.ingress).toEqual([rule]);
    await api.replace({ ...policy, metadata: { ...policy.metadata, resourceVersion: stored.metadata.resourceVersion } });
    expect((await fx.call('GET', `/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies/np`)).body.spec.ingress).toEqual([rule]);
  });

  it('lists with a label selector and restores kind and apiVersion on the items', async () => {
    await api.create(configMap('sel-a', { pick: 'yes' }));
    await api.create(configMap('sel-b', { pick: 'no' }));
    const list = await api.list({ kind: 'ConfigMap', namespace: NS }, 'pick=yes');
    expect(list.items.map((i) => [i.kind, i.apiVersion, i.metadata?.name])).toEqual([['ConfigMap', 'v1', 'sel-a']]);
    expect(Number(list.resourceVersion)).toBeGreaterThan(0);
  });

  it('refuses a replace with a stale resourceVersion (409 Conflict) and a duplicate create (409 AlreadyExists)', async () => {
    const cm = await api.create(configMap('cm2'));
    await api.replace({ ...cm, data: { a: '2' } });
    const stale = await rejection(api.replace({ ...cm, data: { a: '3' } }));
    expect([stale.status, stale.reason, stale.conflict]).toEqual([409, 'Conflict', true]);
    const dup = await rejection(api.create(configMap('cm2')));
    expect([dup.status, dup.reason]).toEqual([409, 'AlreadyExists']);
  });

  it('merge-patches an object: null deletes, other fields merge', async () => {
    await api.create(configMap('cm3', { keep: '1', drop: '1' }, { a: '1', b: '2' }));
    const out = await api.mergePatch<KubernetesObject & { data?: Record<string, string> }>(
      { kind: 'ConfigMap', namespace: NS, name: 'cm3' },
      { metadata: { labels: { drop: null } }, data: { b: null, c: '3' } },
    );
    expect(out.metadata?.labels).toEqual({ keep: '1' });
    expect(out.data).toEqual({ a: '1', c: '3' });
  });

  it("patches a custom resource's status through the subresource, leaving its spec", async () => {
    const sc = await api.create({
      apiVersion: 'store.kvcache.io/v1alpha1',
      kind: 'StoreCluster',
      metadata: { name: 'kv', namespace: NS },
      spec: { master: { replicas: 1 } },
    } as KubernetesObject);
    const out = await api.mergePatch<KubernetesObject & { spec?: any; status?: any }>(
      { kind: 'StoreCluster', namespace: NS, name: 'kv' },
      { status: { phase: 'Ready' }, spec: { master: { replicas: 3 } } },
      'status',
    );
    expect(out.status).toEqual({ phase: 'Ready' });
    expect(out.spec.master.replicas).toBe(1);
    expect(out.metadata?.generation).toBe(sc.metadata?.generation);
  });

  it('reports a schema violation as 422 Invalid naming the field', async () => {
    const e = await rejection(
      api.create({
        apiVersion: 'store.kvcache.io/v1alpha1',
        kind: 'StoreSegment',
        metadata: { name: 'bad', namespace: NS },
        spec: { cluster: 'kv', size: '1Gi', replicas: -1 },
      } as KubernetesObject),
    );
    expect([e.status, e.reason]).toEqual([422, 'Invalid']);
    expect(e.message).toContain('spec.replicas');
  });

  it('deletes, and treats an object already gone as deleted', async () => {
    await api.create(configMap('cm4'));
    await api.delete({ kind: 'ConfigMap', namespace: NS, name: 'cm4' });
    expect(await api.get({ kind: 'ConfigMap', namespace: NS, name: 'cm4' })).toBeUndefined();
    await expect(api.delete({ kind: 'ConfigMap', namespace: NS, name: 'cm4' })).resolves.toBeUndefined();
  });

  it('reads cluster-scoped kinds and finds collection paths by discovery', async () => {
    await fx.call('POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'hook' },
      webhooks: [],
    });
    expect((await api.get({ kind: 'MutatingWebhookConfiguration', name: 'hook' }))?.metadata?.name).toBe('hook');
    expect(await api.collectionPath('StoreSegment', NS)).toBe(`/apis/store.kvcache.io/v1alpha1/namespaces/${NS}/storesegments`);
    expect(await api.collectionPath('Pod')).toBe('/api/v1/pods');
  });

  it('refuses a kind it has no apiVersion for with a clear error', async () => {
    await expect(api.get({ kind: 'Gadget', namespace: NS, name: 'x' })).rejects.toThrow('kube client: unknown kind Gadget');
  });
});
