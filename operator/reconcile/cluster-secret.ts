// Creates a StoreCluster's cluster secret when it is absent, and never touches an existing one
// (members hold it in memory; a changed value would lock them out of each other until each
// restarts). Randomness comes from node:crypto in this shell; the Secret is rendered purely by
// render/cluster-secret.ts. Also reads spec.tls's Secret for the operator's own scrapes.
import { randomBytes } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { clusterSecretName, clusterSecretProblem, renderClusterSecret } from '../render/cluster-secret.js';
import type { TlsMaterial } from '../../common/tls-material.js';
import { KubeApiError, type KubeApi } from './kube-client.js';
import type { EventRecorder } from './events.js';

/** Ensures `<cluster>-cluster-secret` exists; returns a problem with an existing one (not fixed: never overwritten). */
export async function ensureClusterSecret(
  api: KubeApi,
  sc: DefaultedStoreCluster,
  events: EventRecorder,
  random: () => Buffer = () => randomBytes(32),
): Promise<string | undefined> {
  const ref = { kind: 'Secret', namespace: sc.metadata.namespace, name: clusterSecretName(sc.metadata.name) };
  const existing = await api.get<V1Secret>(ref);
  if (existing) return clusterSecretProblem(existing);
  try {
    await api.create(renderClusterSecret(sc, random().toString('hex')));
    events.normal(sc, 'ClusterSecretCreated', `created Secret ${ref.name} (the cluster secret of every member)`);
  } catch (e) {
    // Another pass (or a person) created it meanwhile: theirs stays.
    if (!(e instanceof KubeApiError && e.conflict)) throw e;
  }
  return undefined;
}

/** The CA (and with client certificates, the Secret's certificate) the operator uses to scrape the masters. */
export async function scrapeTls(api: KubeApi, sc: DefaultedStoreCluster): Promise<TlsMaterial | undefined> {
  const tls = sc.spec.tls;
  if (!tls) return undefined;
  const s = await api.get<V1Secret>({ kind: 'Secret', namespace: sc.metadata.namespace, name: tls.secretName });
  const field = (k: string) => (s?.data?.[k] ? Buffer.from(s.data[k], 'base64') : undefined);
  const ca = field('ca.crt');
  if (!ca) throw new Error(`spec.tls.secretName: Secret ${sc.metadata.namespace}/${tls.secretName} ${s ? 'has no ca.crt' : 'not found'}`);
  return tls.clientCertificates ? { ca, cert: field('tls.crt'), key: field('tls.key') } : { ca };
}
