// The masters' ConfigMap: one JSON config file (`--config_path`) whose keys are the master's
// flag names, built from the StoreCluster's typed fields plus its extraFlags.
import { createHash } from 'node:crypto';
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { clusterLabels } from '../api/constants.js';
import { objectMeta } from './meta.js';
import { masterConfigMap, masterLease } from './names.js';

export const MASTER_CONFIG_KEY = 'master.json';

/** Flag name -> value, the content of master.json. */
export function masterFlags(sc: DefaultedStoreCluster): Record<string, string | number | boolean> {
  const { master: m, metadataServer: md } = sc.spec;
  const flags: Record<string, string | number | boolean> = {
    rpc_port: m.rpcPort,
    metrics_port: m.metricsPort,
    cluster_id: sc.spec.clusterId,
    allocation_strategy: m.allocationStrategy,
    enable_http_metadata_server: md.type === 'http',
  };
  if (md.type === 'http') flags.http_metadata_server_port = md.port;
  if (m.defaultKvLeaseTtl !== undefined) flags.default_kv_lease_ttl = m.defaultKvLeaseTtl;
  if (m.clientTtl !== undefined) flags.client_ttl = m.clientTtl;
  if (m.evictionRatio !== undefined) flags.eviction_ratio = m.evictionRatio;
  if (m.evictionHighWatermarkRatio !== undefined) flags.eviction_high_watermark_ratio = m.evictionHighWatermarkRatio;
  if (m.replicas > 1 && m.haBackend) {
    flags.enable_ha = true;
    flags.ha_backend_type = m.haBackend.type ?? 'k8s';
    // k8s: "<namespace>/<lease name>"; the master reads its pod from POD_NAME/POD_NAMESPACE.
    if (m.haBackend.type === 'k8s' || m.haBackend.type === undefined) flags.ha_backend_connstring = `${sc.metadata.namespace}/${masterLease(sc.metadata.name)}`;
    else if (m.haBackend.type === 'etcd') flags.etcd_endpoints = m.haBackend.connstring ?? '';
    else flags.ha_backend_connstring = m.haBackend.connstring ?? '';
  }
  for (const [k, v] of Object.entries(m.extraFlags ?? {})) flags[k] = v;
  return flags;
}

export function renderMasterConfigMap(sc: DefaultedStoreCluster): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: objectMeta({ kind: 'StoreCluster', metadata: sc.metadata }, masterConfigMap(sc.metadata.name), clusterLabels(sc.metadata.name, 'master')),
    data: { [MASTER_CONFIG_KEY]: JSON.stringify(masterFlags(sc), null, 2) + '\n' },
  };
}

/** Short content hash of the config, put on the pod template so a config change rolls the masters. */
export function configHash(cm: V1ConfigMap): string {
  return createHash('sha256')
    .update(JSON.stringify(cm.data ?? {}))
    .digest('hex')
    .slice(0, 16);
}
