// Pure sidecar injection: from a pod annotated `store.kvcache.io/inject: "true"` and the settings
// of its StoreCluster, the pod with the store service as a native sidecar (an init container with
// restartPolicy Always, so it serves before the engine starts), an in-memory volume shared with
// the engine for the dummy client's region, and the env the dummy client reads. The cluster
// secret (and spec.tls's Secret) is mounted read-only into the sidecar and every application
// container, with STORE_CLUSTER_SECRET_FILE (and STORE_TLS_*) set in both. Idempotent.
import type { V1Container, V1EnvVar, V1Pod } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { Annotations, CLUSTER_SECRET_VOLUME, MEMBER_LABEL, SHM_MOUNT_PATH, SHM_VOLUME, SIDECAR_CONTAINER, TLS_VOLUME, TRANSFER_PORT } from '../api/constants.js';
import { clusterSecretEnv, clusterSecretMount, clusterSecretVolume, SECRET_MODE_GROUP, SECRET_MODE_POD } from '../render/cluster-secret.js';
import { tlsClientEnv, tlsMount, tlsProbe, tlsServerArgs, tlsVolume, type ClusterTls } from '../render/tls.js';
import { formatQuantity, parseQuantity } from '../api/quantity.js';
import { containerResources } from '../render/meta.js';
import { masterAddress, metadataServer } from '../render/names.js';
import { segmentStartupProbe } from '../render/startup-probe.js';
import { restrictedContainer } from '../render/security-context.js';

/** Everything injection needs from the cluster, resolved (the cluster's sidecar defaults). */
export interface InjectionSettings {
  cluster: string;
  clusterId: string;
  image: string;
  imagePullPolicy: string;
  masterAddress: string;
  metadataServer: string;
  globalSegmentSize: number;
  localBufferSize: number;
  protocol: 'tcp' | 'rdma';
  httpPort: number;
  rpcPort: number;
  resources?: V1Container['resources'];
  /** spec.tls of the cluster, when set. */
  tls?: ClusterTls;
}

/** Memory the sidecar process needs beside its global segment. */
const SIDECAR_OVERHEAD = 256 * 2 ** 20;

export function injectionSettings(sc: DefaultedStoreCluster): InjectionSettings {
  const s = sc.spec.sidecar;
  return {
    cluster: sc.metadata.name,
    clusterId: sc.spec.clusterId,
    image: s.image,
    imagePullPolicy: sc.spec.imagePullPolicy,
    masterAddress: masterAddress(sc),
    metadataServer: metadataServer(sc),
    globalSegmentSize: parseQuantity(s.globalSegmentSize),
    localBufferSize: parseQuantity(s.localBufferSize),
    protocol: s.protocol,
    httpPort: s.httpPort,
    rpcPort: s.rpcPort,
    resources: containerResources(s.resources),
    ...(sc.spec.tls ? { tls: sc.spec.tls } : {}),
  };
}

export interface InjectRequest {
  inject: boolean;
  /** `name` or `namespace/name` of the StoreCluster, when the pod names one. */
  cluster?: { namespace?: string; name: string };
  globalSegmentSize?: number;
  localBufferSize?: number;
  protocol?: 'tcp' | 'rdma';
}

const DNS1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Reads the pod's store annotations; returns every problem found, each naming its annotation. */
export function parseInjectAnnotations(annotations: Record<string, string> | undefined): { request: InjectRequest; errors: string[] } {
  const a = annotations ?? {};
  const errors: string[] = [];
  const request: InjectRequest = { inject: false };
  const inject = a[Annotations.inject];
  if (inject !== undefined) {
    if (inject === 'true') request.inject = true;
    else if (inject !== 'false') errors.push(`${Annotations.inject}: "${inject}" must be "true" or "false"`);
  }
  const cluster = a[Annotations.cluster];
  if (cluster !== undefined) {
    const parts = cluster.split('/');
    if (parts.length > 2 || parts.some((p) => !DNS1123.test(p) || p.length > 63)) errors.push(`${Annotations.cluster}: "${cluster}" must be a StoreCluster name or namespace/name`);
    else request.cluster = parts.length === 2 ? { namespace: parts[0], name: parts[1] } : { name: parts[0] };
  }
  const size = (key: string, min: number): number | undefined => {
    const v = a[key];
    if (v === undefined) return undefined;
    try {
      const bytes = parseQuantity(v);
      if (bytes < min) errors.push(`${key}: "${v}" must be at least ${formatQuantity(min)}`);
      return bytes;
    } catch (e) {
      errors.push(`${key}: ${(e as Error).message}`);
      return undefined;
    }
  };
  request.globalSegmentSize = size(Annotations.globalSegmentSize, 0);
  request.localBufferSize = size(Annotations.localBufferSize, 2 ** 20);
  const protocol = a[Annotations.protocol];
  if (protocol !== undefined) {
    if (protocol === 'tcp' || protocol === 'rdma') request.protocol = protocol;
    else errors.push(`${Annotations.protocol}: "${protocol}" must be tcp or rdma`);
  }
  return { request, errors };
}

export function isInjected(pod: V1Pod): boolean {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].some((c) => c.name === SIDECAR_CONTAINER);
}

/** The env the engine's dummy client reads to find its sidecar and shared region. */
export function dummyClientEnv(s: InjectionSettings): V1EnvVar[] {
  return [
    { name: 'STORE_SIDECAR_ADDRESS', value: `127.0.0.1:${s.rpcPort}` },
    { name: 'STORE_SHM_DIR', value: SHM_MOUNT_PATH },
    { name: 'STORE_LOCAL_BUFFER_SIZE', value: String(s.localBufferSize) },
    { name: 'STORE_CLUSTER', value: s.cluster },
    { name: 'STORE_MASTER_ADDRESS', value: s.masterAddress },
    { name: 'STORE_METADATA_SERVER', value: s.metadataServer },
    // the sidecar's REST mount API, where the `store` CLI's mount/unmount look for it
    { name: 'STORE_SERVICE_HTTP_ADDRESS', value: `http://127.0.0.1:${s.httpPort}` },
    { name: 'MC_STORE_CLUSTER_ID', value: s.clusterId },
    clusterSecretEnv(),
    ...(s.tls ? tlsClientEnv(s.tls) : []),
  ];
}

/** The Secret mounts every injected container gets. */
function secretMounts(s: InjectionSettings) {
  return [clusterSecretMount(), ...(s.tls ? [tlsMount()] : [])];
}

function sidecarContainer(s: InjectionSettings): V1Container {
  const mem = formatQuantity(s.globalSegmentSize + SIDECAR_OVERHEAD);
  const probe = { httpGet: { path: '/health', port: 'store-http' } };
  return {
    name: SIDECAR_CONTAINER,
    image: s.image,
    imagePullPolicy: s.imagePullPolicy,
    // Native sidecar: started before the app containers, kept running, stopped after them.
    restartPolicy: 'Always',
    command: ['store_service'],
    args: [
      '--host=0.0.0.0',
      `--port=${s.httpPort}`,
      `--rpc_port=${s.rpcPort}`,
      `--local_hostname=$(POD_IP):${TRANSFER_PORT}`,
      `--metadata_server=${s.metadataServer}`,
      `--master_server=${s.masterAddress}`,
      `--global_segment_size=${s.globalSegmentSize}`,
      `--protocol=${s.protocol}`,
      ...(s.tls ? tlsServerArgs(s.tls) : []),
    ],
    env: [
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'MC_STORE_CLUSTER_ID', value: s.clusterId },
      { name: 'STORE_SHM_DIR', value: SHM_MOUNT_PATH },
      clusterSecretEnv(),
      ...(s.tls ? tlsClientEnv(s.tls) : []),
    ],
    ports: [
      { name: 'store-http', containerPort: s.httpPort, protocol: 'TCP' },
      { name: 'store-transfer', containerPort: TRANSFER_PORT, protocol: 'TCP' },
    ],
    // The app containers start only once this succeeds (native sidecar semantics).
    startupProbe: tlsProbe(segmentStartupProbe(s.globalSegmentSize, probe.httpGet.path, probe.httpGet.port), s.tls),
    readinessProbe: tlsProbe({ ...probe, periodSeconds: 5 }, s.tls),
    resources: s.resources ?? { requests: { cpu: '500m', memory: mem }, limits: { memory: mem } },
    volumeMounts: [{ name: SHM_VOLUME, mountPath: SHM_MOUNT_PATH }, ...secretMounts(s)],
    securityContext: restrictedContainer(),
  };
}

export class InjectionError extends Error {
  constructor(readonly errors: string[]) {
    super(`store sidecar injection refused:\n${errors.map((e) => `  - ${e}`).join('\n')}`);
    this.name = 'InjectionError';
  }
}

/** Applies the pod's annotation overrides to the cluster's settings. */
export function effectiveSettings(base: InjectionSettings, req: InjectRequest): InjectionSettings {
  return {
    ...base,
    globalSegmentSize: req.globalSegmentSize ?? base.globalSegmentSize,
    localBufferSize: req.localBufferSize ?? base.localBufferSize,
    protocol: req.protocol ?? base.protocol,
  };
}

/**
 * The pod with the sidecar injected, or the same pod (deep-equal) if it is already injected.
 * Throws InjectionError listing every conflict with what the pod already has.
 */
export function injectSidecar(pod: V1Pod, s: InjectionSettings): V1Pod {
  if (isInjected(pod)) return pod;
  const out = structuredClone(pod);
  const spec = out.spec ?? { containers: [] };
  out.spec = spec;
  const errors: string[] = [];
  for (const name of [SHM_VOLUME, CLUSTER_SECRET_VOLUME, ...(s.tls ? [TLS_VOLUME] : [])]) {
    if ((spec.volumes ?? []).some((v) => v.name === name)) errors.push(`spec.volumes: the pod already has a volume named "${name}"`);
  }
  const usedPorts = new Set<number>();
  for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
    for (const p of c.ports ?? []) usedPorts.add(p.containerPort);
    if ((c.volumeMounts ?? []).some((m) => m.mountPath === SHM_MOUNT_PATH)) errors.push(`container "${c.name}": already mounts something at ${SHM_MOUNT_PATH}`);
  }
  for (const [what, port] of [
    ['HTTP', s.httpPort],
    ['RPC', s.rpcPort],
  ] as const) {
    if (usedPorts.has(port))
      errors.push(`the sidecar's ${what} port ${port} is already a containerPort of the pod; set spec.sidecar.${what === 'HTTP' ? 'httpPort' : 'rpcPort'} of the StoreCluster`);
  }
  if (usedPorts.has(TRANSFER_PORT)) errors.push(`the sidecar's transfer engine port ${TRANSFER_PORT} is already a containerPort of the pod`);
  if (s.localBufferSize <= 0) errors.push(`${Annotations.localBufferSize}: the dummy client needs a shared region larger than 0`);
  if (errors.length) throw new InjectionError(errors);

  // With the pod's fsGroup the files are group-readable only; without one (the application's uid
  // is unknown) readable by any uid of this pod: the volume is seen by this pod's containers alone.
  const mode = spec.securityContext?.fsGroup !== undefined ? SECRET_MODE_GROUP : SECRET_MODE_POD;
  spec.volumes = [
    ...(spec.volumes ?? []),
    { name: SHM_VOLUME, emptyDir: { medium: 'Memory', sizeLimit: formatQuantity(s.localBufferSize) } },
    clusterSecretVolume(s.cluster, mode),
    ...(s.tls ? [tlsVolume(s.tls, mode)] : []),
  ];
  spec.initContainers = [...(spec.initContainers ?? []), sidecarContainer(s)];
  const env = dummyClientEnv(s);
  spec.containers = spec.containers.map((c) => {
    const own = new Set((c.env ?? []).map((e) => e.name));
    return {
      ...c,
      env: [...(c.env ?? []), ...env.filter((e) => !own.has(e.name))], // the pod's own values win
      volumeMounts: [...(c.volumeMounts ?? []), { name: SHM_VOLUME, mountPath: SHM_MOUNT_PATH }, ...secretMounts(s)],
    };
  });
  // The member label lets the cluster's NetworkPolicies admit this pod to the masters and stores.
  out.metadata = {
    ...out.metadata,
    labels: { ...(out.metadata?.labels ?? {}), [MEMBER_LABEL]: s.cluster },
    annotations: { ...(out.metadata?.annotations ?? {}), [Annotations.injected]: s.image },
  };
  return out;
}
