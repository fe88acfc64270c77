// The names the operator, the webhook and the chart agree on: API group, labels, annotations,
// container and volume names, and the default image.

export const GROUP = 'store.kvcache.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export const Labels = {
  name: 'app.kubernetes.io/name',
  instance: 'app.kubernetes.io/instance',
  component: 'app.kubernetes.io/component',
  managedBy: 'app.kubernetes.io/managed-by',
  partOf: 'app.kubernetes.io/part-of',
  cluster: `${GROUP}/cluster`,
  segment: `${GROUP}/segment`,
  role: `${GROUP}/role`,
  /** Set to "true" by the master that holds the HA Lease, on its own pod; the RPC Service selects it. */
  leader: `${GROUP}/leader`,
} as const;

export const Annotations = {
  inject: `${GROUP}/inject`,
  cluster: `${GROUP}/cluster`,
  globalSegmentSize: `${GROUP}/global-segment-size`,
  localBufferSize: `${GROUP}/local-buffer-size`,
  protocol: `${GROUP}/protocol`,
  /** Written by the webhook on the pods it mutated: the sidecar image it injected. */
  injected: `${GROUP}/injected`,
  /** Hash of the rendered master config, so a config change rolls the masters. */
  configHash: `${GROUP}/config-hash`,
} as const;

export const MANAGER = 'store-operator';
export const DEFAULT_IMAGE = 'ghcr.io/kvcache-store/store:2.0.0';

export const SIDECAR_CONTAINER = 'store-sidecar';
export const SHM_VOLUME = 'store-shm';
export const SHM_MOUNT_PATH = '/store-shm';
export const MASTER_CONFIG_PATH = '/etc/store/master.json';
/**
 * The transfer engine's port in the pods the operator renders and injects: one fixed port (the
 * first of the engine range) declared on the pod, so NetworkPolicies can name it.
 */
export const TRANSFER_PORT = 12300;
/** The label that makes a pod a member of a StoreCluster (masters, store pods, injected pods). */
export const MEMBER_LABEL = `${GROUP}/cluster`;
/** Labels of the operator's own pods (the chart's selector labels). */
export const OPERATOR_POD_LABELS = { 'app.kubernetes.io/name': 'store-operator' } as const;

/** Common labels of every object rendered for one StoreCluster. */
export function clusterLabels(cluster: string, component: string): Record<string, string> {
  return {
    [Labels.name]: 'kvcache-store',
    [Labels.instance]: cluster,
    [Labels.component]: component,
    [Labels.managedBy]: MANAGER,
    [Labels.cluster]: cluster,
  };
}

/** Where the cluster secret (the Secret `<cluster>-cluster-secret`, key `secret`) is mounted, and the env naming the file. */
export const CLUSTER_SECRET_VOLUME = 'store-cluster-secret';
export const CLUSTER_SECRET_KEY = 'secret';
export const CLUSTER_SECRET_DIR = '/var/run/store/cluster-secret';
export const CLUSTER_SECRET_FILE = `${CLUSTER_SECRET_DIR}/${CLUSTER_SECRET_KEY}`;
export const CLUSTER_SECRET_ENV = 'STORE_CLUSTER_SECRET_FILE';
/** Where spec.tls.secretName (tls.crt, tls.key, ca.crt) is mounted. */
export const TLS_VOLUME = 'store-tls';
export const TLS_DIR = '/var/run/store/tls';
