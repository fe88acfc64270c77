// Sidecar injection: the patch the webhook returns, applied to a real-looking pod, gives the
// expected pod; injection is idempotent; bad annotations are denied with every reason.
import type { V1Pod } from '@kubernetes/client-node';
import { defaultStoreCluster } from '../api/defaults.js';
import { review, mutatePod, type ClusterLookup } from './admission.js';
import { applyPatch, type PatchOp } from './json-patch.js';
import { injectSidecar, injectionSettings, InjectionError, parseInjectAnnotations } from './inject.js';

const cluster = defaultStoreCluster(
  {
    apiVersion: 'store.kvcache.io/v1alpha1',
    kind: 'StoreCluster',
    metadata: { name: 'kvcache', namespace: 'ml' },
    spec: { master: { replicas: 3, haBackend: { type: 'k8s' } }, metadataServer: { type: 'p2p' }, sidecar: { globalSegmentSize: '8Gi', localBufferSize: '1Gi' } },
  },
  { image: 'store:2', namespace: 'default' },
);
const lookup: ClusterLookup = (ns, name) => (ns === 'ml' && (name === undefined || name === 'kvcache') ? cluster : `StoreCluster ${ns}/${name ?? '?'} not found`);

function vllmPod(annotations: Record<string, string> = { 'store.kvcache.io/inject': 'true' }): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'llm-', namespace: 'ml', labels: { app: 'llm' }, annotations },
    spec: {
      initContainers: [{ name: 'fetch-model', image: 'busybox', command: ['sh', '-c', 'true'] }],
      containers: [
        {
          name: 'engine',
          image: 'vllm/vllm-openai:v0.8',
          ports: [{ containerPort: 8000 }],
          env: [{ name: 'STORE_SHM_DIR', value: '/custom' }],
          volumeMounts: [{ name: 'models', mountPath: '/models' }],
        },
        { name: 'metrics', image: 'exporter:1' },
      ],
      volumes: [{ name: 'models', persistentVolumeClaim: { claimName: 'models' } }],
      restartPolicy: 'Always',
    },
  };
}

function admit(pod: V1Pod) {
  const out = review(
    {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: { uid: 'u-1', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: 'ml', operation: 'CREATE', object: pod },
    },
    lookup,
  );
  return out.response!;
}

describe('webhook injection', () => {
  it('patch applied to a vLLM pod gives the pod with a native sidecar, shared volume and env', () => {
    const pod = vllmPod();
    const res = admit(pod);
    expect(res).toMatchObject({ uid: 'u-1', allowed: true, patchType: 'JSONPatch' });
    const ops = JSON.parse(Buffer.from(res.patch!, 'base64').toString()) as PatchOp[];
    const got = applyPatch(pod, ops);

    const sidecar = got.spec!.initContainers![1];
    expect(got.spec!.initContainers![0].name).toBe('fetch-model');
    expect(sidecar).toMatchObject({ name: 'store-sidecar', image: 'store:2', restartPolicy: 'Always', command: ['store_service'] });
    expect(sidecar.args).toEqual([
      '--host=0.0.0.0',
      '--port=8080',
      '--rpc_port=50052',
      '--local_hostname=$(POD_IP):12300',
      '--metadata_server=P2PHANDSHAKE',
      '--master_server=kvcache-master.ml.svc:50051',
      `--global_segment_size=${8 * 2 ** 30}`,
      '--protocol=tcp',
    ]);
    expect(sidecar.startupProbe?.httpGet).toEqual({ path: '/health', port: 'store-http' });
    // an 8 GiB segment is pre-faulted before /health answers: 30 s + 2 s per GiB
    expect(sidecar.startupProbe!.periodSeconds! * sidecar.startupProbe!.failureThreshold!).toBe(46);
    expect(sidecar.resources).toEqual({ requests: { cpu: '500m', memory: '8448Mi' }, limits: { memory: '8448Mi' } });
    const secretMount = { name: 'store-cluster-secret', mountPath: '/var/run/store/cluster-secret', readOnly: true };
    expect(sidecar.volumeMounts).toEqual([{ name: 'store-shm', mountPath: '/store-shm' }, secretMount]);
    expect(sidecar.env).toContainEqual({ name: 'STORE_CLUSTER_SECRET_FILE', value: '/var/run/store/cluster-secret/secret' });

    expect(got.spec!.volumes).toEqual([
      { name: 'models', persistentVolumeClaim: { claimName: 'models' } },
      { name: 'store-shm', emptyDir: { medium: 'Memory', sizeLimit: '1Gi' } },
      // no fsGroup on this pod: readable by the pod's own containers whatever their uid
      { name: 'store-cluster-secret', secret: { secretName: 'kvcache-cluster-secret', defaultMode: 0o444, items: [{ key: 'secret', path: 'secret' }] } },
    ]);
    for (const c of got.spec!.containers) {
      expect(c.volumeMounts).toContainEqual({ name: 'store-shm', mountPath: '/store-shm' });
      expect(c.volumeMounts).toContainEqual(secretMount);
    }
    const engine = got.spec!.containers[0];
    expect(engine.volumeMounts![0]).toEqual({ name: 'models', mountPath: '/models' });
    expect(engine.env).toEqual([
      { name: 'STORE_SHM_DIR', value: '/custom' }, // the pod's own value wins
      { name: 'STORE_SIDECAR_ADDRESS', value: '127.0.0.1:50052' },
      { name: 'STORE_LOCAL_BUFFER_SIZE', value: String(2 ** 30) },
      { name: 'STORE_CLUSTER', value: 'kvcache' },
      { name: 'STORE_MASTER_ADDRESS', value: 'kvcache-master.ml.svc:50051' },
      { name: 'STORE_METADATA_SERVER', value: 'P2PHANDSHAKE' },
      { name: 'STORE_SERVICE_HTTP_ADDRESS', value: 'http://127.0.0.1:8080' },
      { name: 'MC_STORE_CLUSTER_ID', value: 'kvcache' },
      { name: 'STORE_CLUSTER_SECRET_FILE', value: '/var/run/store/cluster-secret/secret' },
    ]);
    expect(got.metadata!.annotations!['store.kvcache.io/injected']).toBe('store:2');
    // the member label admits the pod through the cluster's NetworkPolicies; the pod's own labels stay
    expect(got.metadata!.labels).toEqual({ app: 'llm', 'store.kvcache.io/cluster': 'kvcache' });
    // Nothing else changed.
    expect({
      ...got,
      spec: { ...got.spec, initContainers: undefined, containers: undefined, volumes: undefined },
      metadata: { ...got.metadata, annotations: undefined, labels: undefined },
    }).toEqual({
      ...pod,
      spec: { ...pod.spec, initContainers: undefined, containers: undefined, volumes: undefined },
      metadata: { ...pod.metadata, annotations: undefined, labels: undefined },
    });
    // The patch is exactly the before/after difference of the pure injection.
    expect(got).toEqual(injectSidecar(pod, injectionSettings(cluster)));
  });

  it('creates the arrays a minimal pod lacks', () => {
    const pod: V1Pod = { metadata: { name: 'p', annotations: { 'store.kvcache.io/inject': 'true' } }, spec: { containers: [{ name: 'c', image: 'i' }] } };
    const got = applyPatch(pod, mutatePod(pod, 'ml', lookup).patch);
    expect(got.spec!.initContainers!.map((c) => c.name)).toEqual(['store-sidecar']);
    expect(got.spec!.volumes!.map((v) => v.name)).toEqual(['store-shm', 'store-cluster-secret']);
  });

  it("with the pod's fsGroup the secret is group-readable only", () => {
    const pod: V1Pod = { metadata: { name: 'p' }, spec: { securityContext: { fsGroup: 2000 }, containers: [{ name: 'c', image: 'i' }] } };
    const got = injectSidecar(pod, injectionSettings(cluster));
    expect(got.spec!.volumes!.find((v) => v.name === 'store-cluster-secret')!.secret!.defaultMode).toBe(0o440);
  });

  it('with spec.tls mounts the TLS Secret, passes --tls_* to the sidecar and STORE_TLS_* to every container, and probes over HTTPS', () => {
    const tlsCluster = defaultStoreCluster({ ...cluster, spec: { ...cluster.spec, tls: { secretName: 'kv-tls' } } });
    const pod: V1Pod = { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i' }] } };
    const got = injectSidecar(pod, injectionSettings(tlsCluster));
    const sidecar = got.spec!.initContainers![0];
    expect(sidecar.args).toEqual(expect.arrayContaining(['--tls_cert=/var/run/store/tls/tls.crt', '--tls_key=/var/run/store/tls/tls.key']));
    expect(sidecar.args!.some((a) => a.startsWith('--tls_ca'))).toBe(false);
    expect(sidecar.startupProbe!.httpGet).toEqual({ path: '/health', port: 'store-http', scheme: 'HTTPS' });
    expect(got.spec!.volumes).toContainEqual({ name: 'store-tls', secret: { secretName: 'kv-tls', defaultMode: 0o444 } });
    for (const c of [sidecar, got.spec!.containers[0]]) {
      expect(c.env).toContainEqual({ name: 'STORE_TLS_CA_FILE', value: '/var/run/store/tls/ca.crt' });
      expect(c.volumeMounts).toContainEqual({ name: 'store-tls', mountPath: '/var/run/store/tls', readOnly: true });
    }
    // mTLS: the CA to the server, the certificate to the clients, TCP probes (the kubelet has no client certificate)
    const mtls = injectSidecar(pod, injectionSettings(defaultStoreCluster({ ...cluster, spec: { ...cluster.spec, tls: { secretName: 'kv-tls', clientCertificates: true } } })));
    const m = mtls.spec!.initContainers![0];
    expect(m.args).toContain('--tls_ca=/var/run/store/tls/ca.crt');
    expect(m.env).toContainEqual({ name: 'STORE_TLS_CERT_FILE', value: '/var/run/store/tls/tls.crt' });
    expect(m.readinessProbe).toEqual({ tcpSocket: { port: 'store-http' }, periodSeconds: 5 });
  });

  it('is idempotent: an injected pod gets no patch', () => {
    const pod = vllmPod();
    const once = injectSidecar(pod, injectionSettings(cluster));
    expect(admit(once)).toEqual({ uid: 'u-1', allowed: true });
    expect(injectSidecar(once, injectionSettings(cluster))).toEqual(once);
  });

  it('leaves pods without the annotation, or with inject "false", alone', () => {
    expect(admit(vllmPod({}))).toEqual({ uid: 'u-1', allowed: true });
    expect(admit(vllmPod({ 'store.kvcache.io/inject': 'false' }))).toEqual({ uid: 'u-1', allowed: true });
  });

  it('applies annotation overrides of sizes, protocol and cluster', () => {
    const pod = vllmPod({
      'store.kvcache.io/inject': 'true',
      'store.kvcache.io/cluster': 'ml/kvcache',
      'store.kvcache.io/global-segment-size': '16Gi',
      'store.kvcache.io/local-buffer-size': '2Gi',
      'store.kvcache.io/protocol': 'rdma',
    });
    const got = applyPatch(pod, mutatePod(pod, 'other', lookup).patch);
    const sidecar = got.spec!.initContainers![1];
    expect(sidecar.args).toContain(`--global_segment_size=${16 * 2 ** 30}`);
    expect(sidecar.args).toContain('--protocol=rdma');
    expect(got.spec!.volumes![1].emptyDir).toEqual({ medium: 'Memory', sizeLimit: '2Gi' });
  });

  it('denies nonsense annotations with every reason in one readable message', () => {
    const res = admit(
      vllmPod({
        'store.kvcache.io/inject': 'true',
        'store.kvcache.io/global-segment-size': 'huge',
        'store.kvcache.io/local-buffer-size': '10',
        'store.kvcache.io/protocol': 'udp',
        'store.kvcache.io/cluster': 'a/b/c',
      }),
    );
    expect(res.allowed).toBe(false);
    expect(res.status?.code).toBe(400);
    expect(res.status?.message).toBe(
      'store sidecar injection into ml/llm- refused: ' +
        [
          'store.kvcache.io/cluster: "a/b/c" must be a StoreCluster name or namespace/name',
          'store.kvcache.io/global-segment-size: invalid byte quantity "huge": expected e.g. 4Gi, 512Mi, 64G or 4GB',
          'store.kvcache.io/local-buffer-size: "10" must be at least 1Mi',
          'store.kvcache.io/protocol: "udp" must be tcp or rdma',
        ].join('; '),
    );
  });

  it('denies an inject value that is neither true nor false, and an unknown cluster', () => {
    expect(admit(vllmPod({ 'store.kvcache.io/inject': 'yes' })).status?.message).toMatch(/store.kvcache.io\/inject: "yes" must be "true" or "false"/);
    expect(admit(vllmPod({ 'store.kvcache.io/inject': 'true', 'store.kvcache.io/cluster': 'nope' })).status?.message).toMatch(/StoreCluster ml\/nope not found/);
  });

  it('denies pods whose ports or paths collide with the sidecar', () => {
    const pod = vllmPod();
    pod.spec!.containers[0].ports = [{ containerPort: 8080 }];
    pod.spec!.containers[1].volumeMounts = [{ name: 'x', mountPath: '/store-shm' }];
    expect(() => injectSidecar(pod, injectionSettings(cluster))).toThrow(InjectionError);
    const msg = admit(pod).status?.message;
    expect(msg).toMatch(/HTTP port 8080 is already a containerPort/);
    expect(msg).toMatch(/container "metrics": already mounts something at \/store-shm/);
  });

  it('ignores other kinds and operations, and rejects a review without a uid', () => {
    const base = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' };
    expect(review({ ...base, request: { uid: 'x', kind: { group: 'apps', version: 'v1', kind: 'Deployment' }, object: {} } }, lookup).response).toEqual({
      uid: 'x',
      allowed: true,
    });
    expect(review({ ...base, request: { uid: 'x', operation: 'UPDATE', object: vllmPod() } }, lookup).response).toEqual({ uid: 'x', allowed: true });
    expect(review({ ...base, request: { uid: '' } }, lookup).response?.allowed).toBe(false);
  });

  it('parses annotations into a request', () => {
    expect(parseInjectAnnotations({ 'store.kvcache.io/inject': 'true', 'store.kvcache.io/cluster': 'kv' })).toEqual({
      request: { inject: true, cluster: { name: 'kv' }, globalSegmentSize: undefined, localBufferSize: undefined },
      errors: [],
    });
  });
});
