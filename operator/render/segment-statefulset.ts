// A StoreSegment's store-service pods: a StatefulSet of store_service processes in the server role
// (local_buffer_size 0) contributing `size` bytes each from shared memory, huge pages or a DAX
// device. A StatefulSet (not a Deployment) because pods get stable names (segment owners are
// recognisable in the master's detail and in status) and roll one at a time, ordered, so the
// pool loses at most one segment at once during an update.
import type { V1ConfigMap, V1Container, V1EnvVar, V1ResourceRequirements, V1Service, V1StatefulSet, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import type { DefaultedStoreCluster, DefaultedStoreSegment } from '../api/defaults.js';
import { Annotations, Labels, TRANSFER_PORT, clusterLabels } from '../api/constants.js';
import { formatQuantity, parseQuantity } from '../api/quantity.js';
import { containerResources, objectMeta } from './meta.js';
import { masterAddress, metadataServer, segmentConfigMap, segmentName } from './names.js';
import { createHash } from 'node:crypto';
import { segmentStartupProbe } from './startup-probe.js';
import { daxContainer, restrictedContainer, restrictedPod } from './security-context.js';
import { clusterSecretEnv, clusterSecretMount, clusterSecretVolume, SECRET_MODE_GROUP, SECRET_MODE_POD } from './cluster-secret.js';
import { tlsClientEnv, tlsMount, tlsProbe, tlsServerArgs, tlsVolume } from './tls.js';

/** Memory the process needs beside its segment (heap, transfer buffers). */
const PROCESS_OVERHEAD = 512 * 2 ** 20;
const STORE_CONFIG_PATH = '/etc/store/store.json';

export function segmentSelector(segment: string): Record<string, string> {
  return { [Labels.segment]: segment, [Labels.role]: 'store' };
}

function labels(ss: DefaultedStoreSegment): Record<string, string> {
  return { ...clusterLabels(ss.spec.cluster, 'store'), ...segmentSelector(ss.metadata.name) };
}

/** The store service JSON config (spec: "Standalone store service configuration"). */
export function renderSegmentConfigMap(ss: DefaultedStoreSegment, sc: DefaultedStoreCluster): V1ConfigMap {
  const config = {
    metadata_server: metadataServer(sc),
    master_server_address: masterAddress(sc),
    // a dax segment's memory is the device (MC_CXL_DEV_PATH/SIZE in its env), not process memory
    global_segment_size: ss.spec.memory.kind === 'dax' ? 0 : parseQuantity(ss.spec.size),
    local_buffer_size: 0, // server role: provides memory, issues no Get/Put
    protocol: ss.spec.protocol,
    device_name: '',
  };
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: objectMeta({ kind: 'StoreSegment', metadata: ss.metadata }, segmentConfigMap(ss.metadata.name), labels(ss)),
    data: { 'store.json': JSON.stringify(config, null, 2) + '\n' },
  };
}

interface MemoryLayout {
  volumes: V1Volume[];
  mounts: V1VolumeMount[];
  env: V1EnvVar[];
  resources: V1ResourceRequirements;
  privileged: boolean;
}

function memoryLayout(ss: DefaultedStoreSegment): MemoryLayout {
  const bytes = parseQuantity(ss.spec.size);
  const m = ss.spec.memory;
  switch (m.kind) {
    case 'shm': {
      // Memory-backed emptyDir pages count against the container's memory: request what it holds.
      const mem = formatQuantity(bytes + PROCESS_OVERHEAD);
      return {
        volumes: [{ name: 'segment', emptyDir: { medium: 'Memory', sizeLimit: formatQuantity(bytes) } }],
        mounts: [{ name: 'segment', mountPath: '/dev/shm' }],
        env: [],
        resources: { requests: { memory: mem }, limits: { memory: mem } },
        privileged: false,
      };
    }
    case 'hugepage': {
      const page = m.hugePageSize ?? '2Mi';
      const mem = formatQuantity(PROCESS_OVERHEAD);
      return {
        volumes: [{ name: 'segment', emptyDir: { medium: `HugePages-${page}` } }],
        mounts: [{ name: 'segment', mountPath: '/dev/hugepages' }],
        env: [
          { name: 'MC_STORE_USE_HUGEPAGE', value: '1' },
          { name: 'MC_STORE_HUGEPAGE_SIZE', value: page === '1Gi' ? '1GB' : '2MB' },
        ],
        // Huge pages must have requests == limits, and need a memory or cpu request beside them.
        resources: { requests: { [`hugepages-${page}`]: formatQuantity(bytes), memory: mem }, limits: { [`hugepages-${page}`]: formatQuantity(bytes), memory: mem } },
        privileged: false,
      };
    }
    case 'dax': {
      const mem = formatQuantity(PROCESS_OVERHEAD);
      const path = m.devicePath ?? '/dev/dax0.0';
      return {
        volumes: [{ name: 'segment', hostPath: { path, type: 'CharDevice' } }],
        mounts: [{ name: 'segment', mountPath: path }],
        env: [
          { name: 'MC_CXL_DEV_PATH', value: path },
          { name: 'MC_CXL_DEV_SIZE', value: String(bytes) },
        ],
        resources: { requests: { memory: mem }, limits: { memory: mem } },
        // A character device from the host is only usable with device cgroup access.
        privileged: true,
      };
    }
  }
}

function mergeResources(base: V1ResourceRequirements, extra?: V1ResourceRequirements): V1ResourceRequirements {
  return {
    requests: { ...(extra?.requests ?? {}), ...base.requests },
    limits: { ...(extra?.limits ?? {}), ...base.limits },
  };
}

export function renderSegmentService(ss: DefaultedStoreSegment): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: objectMeta({ kind: 'StoreSegment', metadata: ss.metadata }, segmentName(ss.metadata.name), labels(ss)),
    spec: {
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector: segmentSelector(ss.metadata.name),
      ports: [{ name: 'http', port: ss.spec.httpPort, targetPort: 'http', protocol: 'TCP' }],
    },
  };
}

export function renderSegmentStatefulSet(ss: DefaultedStoreSegment, sc: DefaultedStoreCluster): V1StatefulSet {
  const name = ss.metadata.name;
  const layout = memoryLayout(ss);
  const cm = renderSegmentConfigMap(ss, sc);
  const tls = sc.spec.tls;
  // A dax pod has no fsGroup (privileged, not restricted): its Secret files are readable by the pod's uid only through the other bits.
  const mode = layout.privileged ? SECRET_MODE_POD : SECRET_MODE_GROUP;
  const container: V1Container = {
    name: 'store-service',
    image: ss.spec.image ?? sc.spec.image,
    imagePullPolicy: sc.spec.imagePullPolicy,
    command: ['store_service'],
    args: [`--config=${STORE_CONFIG_PATH}`, '--host=0.0.0.0', `--port=${ss.spec.httpPort}`, `--local_hostname=$(POD_IP):${TRANSFER_PORT}`, ...(tls ? tlsServerArgs(tls) : [])],
    env: [
      clusterSecretEnv(),
      ...(tls ? tlsClientEnv(tls) : []),
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'MC_STORE_CLUSTER_ID', value: sc.spec.clusterId },
      ...layout.env,
    ],
    ports: [
      { name: 'http', containerPort: ss.spec.httpPort, protocol: 'TCP' },
      { name: 'transfer', containerPort: TRANSFER_PORT, protocol: 'TCP' },
    ],
    // pre-faulting a large segment takes seconds per GiB: liveness starts once this succeeds
    startupProbe: tlsProbe(segmentStartupProbe(parseQuantity(ss.spec.size), '/health', 'http'), tls),
    readinessProbe: tlsProbe({ httpGet: { path: '/health', port: 'http' }, periodSeconds: 5 }, tls),
    livenessProbe: tlsProbe({ httpGet: { path: '/health', port: 'http' }, periodSeconds: 10, failureThreshold: 6 }, tls),
    resources: mergeResources(layout.resources, containerResources(ss.spec.resources)),
    volumeMounts: [{ name: 'config', mountPath: '/etc/store', readOnly: true }, clusterSecretMount(), ...(tls ? [tlsMount()] : []), ...layout.mounts],
    securityContext: layout.privileged ? daxContainer() : restrictedContainer(),
  };
  const hash = createHash('sha256').update(JSON.stringify(cm.data)).digest('hex').slice(0, 16);
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: objectMeta({ kind: 'StoreSegment', metadata: ss.metadata }, segmentName(name), labels(ss)),
    spec: {
      replicas: ss.spec.replicas,
      serviceName: segmentName(name),
      podManagementPolicy: 'OrderedReady',
      selector: { matchLabels: segmentSelector(name) },
      template: {
        metadata: { labels: labels(ss), annotations: { [Annotations.configHash]: hash } },
        spec: {
          automountServiceAccountToken: false,
          ...(layout.privileged ? {} : { securityContext: restrictedPod() }),
          // The store unmounts its segments on SIGTERM; give it time to do so.
          terminationGracePeriodSeconds: 60,
          containers: [container],
          volumes: [
            { name: 'config', configMap: { name: segmentConfigMap(name) } },
            clusterSecretVolume(sc.metadata.name, mode),
            ...(tls ? [tlsVolume(tls, mode)] : []),
            ...layout.volumes,
          ],
          ...(ss.spec.nodeSelector ? { nodeSelector: ss.spec.nodeSelector } : {}),
          ...(ss.spec.tolerations ? { tolerations: ss.spec.tolerations } : {}),
        },
      },
    },
  };
}
