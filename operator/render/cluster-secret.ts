// The cluster secret of a StoreCluster (docs/threat-model.md): the Secret `<cluster>-cluster-secret`
// holding 32 random bytes as 64 hex characters under the key `secret`, owned by the StoreCluster
// (it goes when the cluster goes) and never overwritten once it exists (the reconciler creates it
// only when absent: rotating it means deleting it and restarting every member). Here: the pure
// Secret, and the volume, mount and env that hand it to masters, store pods, the injected sidecar
// and the application containers (whose dummy client authenticates with it).
import type { V1EnvVar, V1Secret, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { CLUSTER_SECRET_DIR, CLUSTER_SECRET_ENV, CLUSTER_SECRET_FILE, CLUSTER_SECRET_KEY, CLUSTER_SECRET_VOLUME, clusterLabels } from '../api/constants.js';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { objectMeta } from './meta.js';

export const clusterSecretName = (cluster: string) => `${cluster}-cluster-secret`;

/** Owner read only: the pods' fsGroup (restricted pods) gives the store's uid the group bit. */
export const SECRET_MODE_GROUP = 0o440;
/** For pods without an fsGroup (the application's own pods): readable by the pod's containers only, whatever their uid. */
export const SECRET_MODE_POD = 0o444;

/** The Secret with `hex` (64 hex characters made by the caller from 32 random bytes). */
export function renderClusterSecret(sc: DefaultedStoreCluster, hex: string): V1Secret {
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error('a cluster secret is 32 bytes as 64 lowercase hex characters');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: objectMeta({ kind: 'StoreCluster', metadata: sc.metadata }, clusterSecretName(sc.metadata.name), clusterLabels(sc.metadata.name, 'cluster-secret')),
    type: 'Opaque',
    data: { [CLUSTER_SECRET_KEY]: Buffer.from(hex).toString('base64') },
  };
}

/** Whether a Secret read back holds a usable cluster secret (at least 32 bytes). */
export function clusterSecretProblem(secret: V1Secret): string | undefined {
  const v = secret.data?.[CLUSTER_SECRET_KEY];
  if (v === undefined) return `Secret ${secret.metadata?.name} has no key "${CLUSTER_SECRET_KEY}"`;
  if (Buffer.from(v, 'base64').toString('utf8').trimEnd().length < 32) return `Secret ${secret.metadata?.name}: "${CLUSTER_SECRET_KEY}" is shorter than 32 bytes`;
  return undefined;
}

export function clusterSecretVolume(cluster: string, mode = SECRET_MODE_GROUP): V1Volume {
  return { name: CLUSTER_SECRET_VOLUME, secret: { secretName: clusterSecretName(cluster), defaultMode: mode, items: [{ key: CLUSTER_SECRET_KEY, path: CLUSTER_SECRET_KEY }] } };
}

export function clusterSecretMount(): V1VolumeMount {
  return { name: CLUSTER_SECRET_VOLUME, mountPath: CLUSTER_SECRET_DIR, readOnly: true };
}

export function clusterSecretEnv(): V1EnvVar {
  return { name: CLUSTER_SECRET_ENV, value: CLUSTER_SECRET_FILE };
}
