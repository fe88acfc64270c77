// Rendering of StoreClusters and StoreSegments, object by object, without a cluster.
import type { V1ConfigMap, V1PodDisruptionBudget, V1Role, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { defaultStoreCluster, defaultStoreSegment } from '../api/defaults.js';
import type { StoreCluster, StoreSegment } from '../gen/index.js';
import { renderCluster, renderSegment } from './render.js';
import { masterFlags } from './master-config.js';

const cluster = (spec: StoreCluster['spec'], uid?: string) =>
  defaultStoreCluster(
    { apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'kv', namespace: 'ml', ...(uid ? { uid } : {}) }, spec },
    { image: 'store:2', namespace: 'default' },
  );
const segment = (spec: Partial<StoreSegment['spec']>) =>
  defaultStoreSegment({
    apiVersion: 'store.kvcache.io/v1alpha1',
    kind: 'StoreSegment',
    metadata: { name: 'pool', namespace: 'ml', uid: 'seg-uid' },
    spec: { cluster: 'kv', size: '8Gi', ...spec },
  });
const ha = cluster({ master: { replicas: 3, haBackend: { type: 'k8s' } }, metadataServer: { type: 'p2p' } }, 'uid-1');
const single = cluster({});

function find<T>(objs: { kind?: string; metadata?: { name?: string } }[], kind: string, name: string): T {
  const o = objs.find((x) => x.kind === kind && x.metadata?.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in ${objs.map((x) => `${x.kind}/${x.metadata?.name}`).join(', ')}`);
  return o as T;
}

describe('renderCluster', () => {
  it('renders the HA set: SA, Role, RoleBinding, ConfigMap, 3 Services, PDB, StatefulSet, NetworkPolicy; nothing absent but the metadata Service', () => {
    const r = renderCluster(ha);
    expect(r.desired.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'ServiceAccount/kv-master',
      'Role/kv-master',
      'RoleBinding/kv-master',
      'ConfigMap/kv-master-config',
      'Service/kv-master',
      'Service/kv-master-headless',
      'Service/kv-master-metrics',
      'PodDisruptionBudget/kv-master',
      'StatefulSet/kv-master',
      'NetworkPolicy/kv-master',
    ]);
    expect(r.absent).toEqual([{ apiVersion: 'v1', kind: 'Service', namespace: 'ml', name: 'kv-master-metadata' }]);
  });

  it('owns every object through a controller reference when the CR exists', () => {
    for (const o of renderCluster(ha).desired) {
      expect(o.metadata?.namespace).toBe('ml');
      expect(o.metadata?.ownerReferences).toEqual([
        { apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', name: 'kv', uid: 'uid-1', controller: true, blockOwnerDeletion: true },
      ]);
    }
    expect(renderCluster(single).desired[0].metadata?.ownerReferences).toBeUndefined();
  });

  it('turns on k8s HA when replicas > 1, with the Lease named in the config', () => {
    expect(masterFlags(ha)).toMatchObject({
      enable_ha: true,
      ha_backend_type: 'k8s',
      ha_backend_connstring: 'ml/kv-master-leader',
      enable_http_metadata_server: false,
      rpc_port: 50051,
      metrics_port: 9003,
      cluster_id: 'kv',
    });
    const cm = find<V1ConfigMap>(renderCluster(ha).desired, 'ConfigMap', 'kv-master-config');
    expect(JSON.parse(cm.data!['master.json'])).toEqual(masterFlags(ha));
    expect(masterFlags(single).enable_ha).toBeUndefined();
    expect(masterFlags(single)).toMatchObject({ enable_http_metadata_server: true, http_metadata_server_port: 8080 });
  });

  it('passes etcd and redis HA backends their connection strings and extra flags verbatim', () => {
    expect(masterFlags(cluster({ master: { replicas: 2, haBackend: { type: 'etcd', connstring: 'e1:2379;e2:2379' } }, metadataServer: { type: 'p2p' } }))).toMatchObject({
      ha_backend_type: 'etcd',
      etcd_endpoints: 'e1:2379;e2:2379',
    });
    expect(
      masterFlags(
        cluster({ master: { replicas: 2, haBackend: { type: 'redis', connstring: 'redis://r:6379' }, extraFlags: { enable_snapshot: 'true' } }, metadataServer: { type: 'p2p' } }),
      ),
    ).toMatchObject({ ha_backend_type: 'redis', ha_backend_connstring: 'redis://r:6379', enable_snapshot: 'true' });
  });

  it('routes RPC and metrics to the leader label only when masters elect one', () => {
    const rpc = find<V1Service>(renderCluster(ha).desired, 'Service', 'kv-master');
    expect(rpc.spec?.selector).toEqual({ 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master', 'store.kvcache.io/leader': 'true' });
    expect(rpc.spec?.ports).toEqual([{ name: 'rpc', port: 50051, targetPort: 'rpc', protocol: 'TCP' }]);
    expect(find<V1Service>(renderCluster(ha).desired, 'Service', 'kv-master-metrics').spec?.selector?.['store.kvcache.io/leader']).toBe('true');
    const headless = find<V1Service>(renderCluster(ha).desired, 'Service', 'kv-master-headless');
    expect(headless.spec).toMatchObject({ clusterIP: 'None', publishNotReadyAddresses: true });
    expect(headless.spec?.selector?.['store.kvcache.io/leader']).toBeUndefined();
    expect(find<V1Service>(renderCluster(single).desired, 'Service', 'kv-master').spec?.selector?.['store.kvcache.io/leader']).toBeUndefined();
  });

  it('grants the masters exactly the Lease and their own pods', () => {
    const role = find<V1Role>(renderCluster(ha).desired, 'Role', 'kv-master');
    expect(role.rules).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kv-master-leader', 'kv-master-leader-records'], verbs: ['get', 'update'] },
      { apiGroups: [''], resources: ['pods'], resourceNames: ['kv-master-0', 'kv-master-1', 'kv-master-2'], verbs: ['get', 'patch'] },
    ]);
  });

  it('gives a single master no Role, no PDB, an HTTP metadata Service and a /health readiness probe', () => {
    const r = renderCluster(single);
    expect(r.desired.map((o) => o.kind)).not.toContain('Role');
    expect(r.desired.map((o) => o.kind)).not.toContain('PodDisruptionBudget');
    expect(r.absent.map((a) => a.kind).sort()).toEqual(['PodDisruptionBudget', 'Role', 'RoleBinding']);
    expect(find<V1Service>(r.desired, 'Service', 'kv-master-metadata').spec?.ports).toEqual([{ name: 'metadata', port: 8080, targetPort: 'metadata', protocol: 'TCP' }]);
    const sts = find<V1StatefulSet>(r.desired, 'StatefulSet', 'kv-master');
    expect(sts.spec?.template.spec?.containers[0].readinessProbe?.httpGet).toEqual({ path: '/health', port: 'metrics' });
    expect(sts.spec?.template.spec?.automountServiceAccountToken).toBe(false);
  });

  it('keeps at most one HA master down in voluntary disruptions', () => {
    const pdb = find<V1PodDisruptionBudget>(renderCluster(ha).desired, 'PodDisruptionBudget', 'kv-master');
    expect(pdb.spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: { 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' } } });
  });

  it('runs store_master from the config file, with the pod identity for the leader label', () => {
    const sts = find<V1StatefulSet>(renderCluster(ha).desired, 'StatefulSet', 'kv-master');
    const c = sts.spec!.template.spec!.containers[0];
    expect(sts.spec).toMatchObject({ replicas: 3, serviceName: 'kv-master-headless', podManagementPolicy: 'Parallel' });
    expect(c.image).toBe('store:2');
    expect(c.command).toEqual(['store_master']);
    expect(c.args).toEqual(['--config_path=/etc/store/master.json', '--rpc_address=$(POD_IP)']);
    expect(c.env?.map((e) => e.name)).toEqual(['STORE_CLUSTER_SECRET_FILE', 'POD_NAME', 'POD_NAMESPACE', 'POD_IP']);
    expect(c.ports?.map((p) => p.containerPort)).toEqual([50051, 9003]);
    expect(sts.spec!.template.spec!.serviceAccountName).toBe('kv-master');
    expect(sts.spec!.template.spec!.automountServiceAccountToken).toBe(true);
    expect(sts.spec!.template.metadata?.annotations?.['store.kvcache.io/config-hash']).toMatch(/^[0-9a-f]{16}$/);
  });

  it('rolls the masters when the config changes, not otherwise', () => {
    const hash = (sc: typeof ha) =>
      find<V1StatefulSet>(renderCluster(sc).desired, 'StatefulSet', 'kv-master').spec!.template.metadata!.annotations!['store.kvcache.io/config-hash'];
    expect(hash(ha)).toBe(hash(cluster({ master: { replicas: 3, haBackend: { type: 'k8s' } }, metadataServer: { type: 'p2p' } }, 'uid-1')));
    expect(hash(ha)).not.toBe(hash(cluster({ master: { replicas: 3, haBackend: { type: 'k8s' }, clientTtl: '20s' }, metadataServer: { type: 'p2p' } }, 'uid-1')));
  });

  it('is pure: the same input renders the same objects', () => {
    expect(renderCluster(ha)).toEqual(renderCluster(ha));
  });
});

describe('cluster secret and TLS', () => {
  const volumesOf = (sts: V1StatefulSet) => sts.spec!.template.spec!.volumes!;
  it('mounts the cluster secret read-only into masters and store pods with STORE_CLUSTER_SECRET_FILE', () => {
    const master = find<V1StatefulSet>(renderCluster(ha).desired, 'StatefulSet', 'kv-master');
    const store = find<V1StatefulSet>(renderSegment(segment({}), ha).desired, 'StatefulSet', 'pool-store');
    for (const sts of [master, store]) {
      const c = sts.spec!.template.spec!.containers[0];
      expect(volumesOf(sts)).toContainEqual({
        name: 'store-cluster-secret',
        secret: { secretName: 'kv-cluster-secret', defaultMode: 0o440, items: [{ key: 'secret', path: 'secret' }] },
      });
      expect(sts.spec!.template.spec!.securityContext?.fsGroup).toBe(1000);
      expect(c.volumeMounts).toContainEqual({ name: 'store-cluster-secret', mountPath: '/var/run/store/cluster-secret', readOnly: true });
      expect(c.env).toContainEqual({ name: 'STORE_CLUSTER_SECRET_FILE', value: '/var/run/store/cluster-secret/secret' });
    }
    // a dax pod has no fsGroup: the file must be readable through the other bits
    const dax = find<V1StatefulSet>(renderSegment(segment({ memory: { kind: 'dax' } }), ha).desired, 'StatefulSet', 'pool-store');
    expect(volumesOf(dax).find((v) => v.name === 'store-cluster-secret')!.secret!.defaultMode).toBe(0o444);
  });

  it('with spec.tls passes --tls_* from the mounted Secret, gives clients the CA and probes over HTTPS', () => {
    const tls = cluster({ tls: { secretName: 'kv-tls' } }, 'uid-1');
    const master = find<V1StatefulSet>(renderCluster(tls).desired, 'StatefulSet', 'kv-master');
    const mc = master.spec!.template.spec!.containers[0];
    expect(mc.args).toEqual(['--config_path=/etc/store/master.json', '--rpc_address=$(POD_IP)', '--tls_cert=/var/run/store/tls/tls.crt', '--tls_key=/var/run/store/tls/tls.key']);
    expect(mc.readinessProbe).toEqual({ httpGet: { path: '/health', port: 'metrics', scheme: 'HTTPS' }, periodSeconds: 5 });
    expect(volumesOf(master)).toContainEqual({ name: 'store-tls', secret: { secretName: 'kv-tls', defaultMode: 0o440 } });
    const store = find<V1StatefulSet>(renderSegment(segment({}), tls).desired, 'StatefulSet', 'pool-store');
    const sc = store.spec!.template.spec!.containers[0];
    expect(sc.args).toContain('--tls_cert=/var/run/store/tls/tls.crt');
    expect(sc.env).toContainEqual({ name: 'STORE_TLS_CA_FILE', value: '/var/run/store/tls/ca.crt' });
    expect(sc.startupProbe!.httpGet!.scheme).toBe('HTTPS');
    expect(sc.volumeMounts).toContainEqual({ name: 'store-tls', mountPath: '/var/run/store/tls', readOnly: true });
  });

  it('with client certificates required adds --tls_ca and checks the ports by TCP', () => {
    const mtls = cluster({ tls: { secretName: 'kv-tls', clientCertificates: true } }, 'uid-1');
    const mc = find<V1StatefulSet>(renderCluster(mtls).desired, 'StatefulSet', 'kv-master').spec!.template.spec!.containers[0];
    expect(mc.args).toContain('--tls_ca=/var/run/store/tls/ca.crt');
    expect(mc.readinessProbe).toEqual({ tcpSocket: { port: 'metrics' }, periodSeconds: 5 });
    const sc = find<V1StatefulSet>(renderSegment(segment({}), mtls).desired, 'StatefulSet', 'pool-store').spec!.template.spec!.containers[0];
    expect(sc.env).toEqual(
      expect.arrayContaining([
        { name: 'STORE_TLS_CERT_FILE', value: '/var/run/store/tls/tls.crt' },
        { name: 'STORE_TLS_KEY_FILE', value: '/var/run/store/tls/tls.key' },
      ]),
    );
    expect(sc.livenessProbe).toEqual({ tcpSocket: { port: 'http' }, periodSeconds: 10, failureThreshold: 6 });
  });
});

describe('NetworkPolicies', () => {
  const members = [
    { podSelector: { matchLabels: { 'store.kvcache.io/cluster': 'kv' } } },
    { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'store-operator' } } },
  ];
  it("admit only the cluster's members and the operator: to the masters' ports, and to a store pod's HTTP and transfer ports", () => {
    const master = find<any>(renderCluster(single).desired, 'NetworkPolicy', 'kv-master');
    expect(master.spec).toEqual({
      podSelector: { matchLabels: { 'store.kvcache.io/cluster': 'kv', 'store.kvcache.io/role': 'master' } },
      policyTypes: ['Ingress'],
      ingress: [
        {
          from: members,
          ports: [
            { port: 50051, protocol: 'TCP' },
            { port: 9003, protocol: 'TCP' },
            { port: 8080, protocol: 'TCP' },
          ],
        },
      ],
    });
    const store = find<any>(renderSegment(segment({}), single).desired, 'NetworkPolicy', 'pool-store');
    expect(store.spec.podSelector).toEqual({ matchLabels: { 'store.kvcache.io/segment': 'pool', 'store.kvcache.io/role': 'store' } });
    expect(store.spec.ingress).toEqual([
      {
        from: members,
        ports: [
          { port: 8080, protocol: 'TCP' },
          { port: 12300, protocol: 'TCP' },
        ],
      },
    ]);
  });
});

describe('renderSegment', () => {
  const sts = (s: ReturnType<typeof segment>, c = single) => find<V1StatefulSet>(renderSegment(s, c).desired, 'StatefulSet', 'pool-store');

  it('configures server-role store services pointing at the cluster', () => {
    const cm = find<V1ConfigMap>(renderSegment(segment({}), single).desired, 'ConfigMap', 'pool-store-config');
    expect(JSON.parse(cm.data!['store.json'])).toEqual({
      metadata_server: 'http://kv-master-metadata.ml.svc:8080/metadata',
      master_server_address: 'kv-master.ml.svc:50051',
      global_segment_size: 8 * 2 ** 30,
      local_buffer_size: 0,
      protocol: 'tcp',
      device_name: '',
    });
    const c = sts(segment({ replicas: 4 })).spec!.template.spec!.containers[0];
    expect(c.args).toEqual(['--config=/etc/store/store.json', '--host=0.0.0.0', '--port=8080', '--local_hostname=$(POD_IP):12300']);
    // the transfer engine on one declared port, so NetworkPolicies can name it
    expect(c.ports).toContainEqual({ name: 'transfer', containerPort: 12300, protocol: 'TCP' });
    expect(sts(segment({ replicas: 4 })).spec?.replicas).toBe(4);
    expect(c.readinessProbe?.httpGet?.path).toBe('/health');
  });

  it('gives a store pod a startupProbe that grows with its segment (pre-faulting takes seconds per GiB)', () => {
    const budget = (size: string) => {
      const p = sts(segment({ size })).spec!.template.spec!.containers[0].startupProbe!;
      expect(p.httpGet).toEqual({ path: '/health', port: 'http' });
      return p.periodSeconds! * p.failureThreshold!;
    };
    expect(budget('8Gi')).toBe(46);
    expect(budget('64Gi')).toBe(158);
  });

  it('shm: a memory emptyDir at /dev/shm and a memory request covering it', () => {
    const spec = sts(segment({})).spec!.template.spec!;
    expect(spec.volumes).toContainEqual({ name: 'segment', emptyDir: { medium: 'Memory', sizeLimit: '8Gi' } });
    expect(spec.containers[0].volumeMounts).toContainEqual({ name: 'segment', mountPath: '/dev/shm' });
    expect(spec.containers[0].resources).toEqual({ requests: { memory: '8704Mi' }, limits: { memory: '8704Mi' } });
  });

  it('hugepage: hugepages-* resources (requests = limits), a HugePages emptyDir and the env that enables them', () => {
    const spec = sts(segment({ size: '4Gi', memory: { kind: 'hugepage', hugePageSize: '1Gi' }, nodeSelector: { big: 'yes' }, tolerations: [{ key: 'big', operator: 'Exists' }] }))
      .spec!.template.spec!;
    const c = spec.containers[0];
    expect(c.resources).toEqual({ requests: { 'hugepages-1Gi': '4Gi', memory: '512Mi' }, limits: { 'hugepages-1Gi': '4Gi', memory: '512Mi' } });
    expect(spec.volumes).toContainEqual({ name: 'segment', emptyDir: { medium: 'HugePages-1Gi' } });
    expect(c.env).toEqual(
      expect.arrayContaining([
        { name: 'MC_STORE_USE_HUGEPAGE', value: '1' },
        { name: 'MC_STORE_HUGEPAGE_SIZE', value: '1GB' },
      ]),
    );
    expect(spec.nodeSelector).toEqual({ big: 'yes' });
    expect(spec.tolerations).toEqual([{ key: 'big', operator: 'Exists' }]);
  });

  it('dax: the host device by hostPath, privileged, its size in the env, and no process memory as a segment', () => {
    const dax = segment({ memory: { kind: 'dax', devicePath: '/dev/dax1.0' } });
    const cm = find<V1ConfigMap>(renderSegment(dax, single).desired, 'ConfigMap', 'pool-store-config');
    // the store service mounts the device (MC_CXL_DEV_PATH); a DRAM segment of the same size would not fit the pod's memory
    expect(JSON.parse(cm.data!['store.json'])).toMatchObject({ global_segment_size: 0, local_buffer_size: 0 });
    const spec = sts(dax).spec!.template.spec!;
    expect(spec.volumes).toContainEqual({ name: 'segment', hostPath: { path: '/dev/dax1.0', type: 'CharDevice' } });
    expect(spec.containers[0].securityContext).toEqual({ privileged: true });
    expect(spec.containers[0].env).toEqual(
      expect.arrayContaining([
        { name: 'MC_CXL_DEV_PATH', value: '/dev/dax1.0' },
        { name: 'MC_CXL_DEV_SIZE', value: String(8 * 2 ** 30) },
      ]),
    );
  });

  it('adds user resources (cpu) without overriding the memory the segment needs', () => {
    const c = sts(segment({ resources: { requests: { cpu: '2', memory: '1Mi' } } })).spec!.template.spec!.containers[0];
    expect(c.resources?.requests).toEqual({ cpu: '2', memory: '8704Mi' });
  });

  it('uses P2PHANDSHAKE and the leader Service of an HA cluster', () => {
    const cm = find<V1ConfigMap>(renderSegment(segment({}), ha).desired, 'ConfigMap', 'pool-store-config');
    expect(JSON.parse(cm.data!['store.json'])).toMatchObject({ metadata_server: 'P2PHANDSHAKE', master_server_address: 'kv-master.ml.svc:50051' });
  });
});
