// PodDisruptionBudget for HA masters: voluntary disruptions (drains) take at most one master at a
// time, so a leader is always electable. A single master gets none (it would block every drain).
import type { V1PodDisruptionBudget } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { clusterLabels } from '../api/constants.js';
import { objectMeta } from './meta.js';
import { masterSelector } from './master-statefulset.js';
import { masterName } from './names.js';

export function renderMasterPdb(sc: DefaultedStoreCluster): V1PodDisruptionBudget | undefined {
  if (sc.spec.master.replicas <= 1) return undefined;
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: objectMeta({ kind: 'StoreCluster', metadata: sc.metadata }, masterName(sc.metadata.name), clusterLabels(sc.metadata.name, 'master')),
    spec: { maxUnavailable: 1, selector: { matchLabels: masterSelector(sc.metadata.name) } },
  };
}
