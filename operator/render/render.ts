// Entry points of the pure rendering: every object a StoreCluster or StoreSegment should own,
// plus the kinds it may own but currently does not (so the reconciler deletes leftovers).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { DefaultedStoreCluster, DefaultedStoreSegment } from '../api/defaults.js';
import { renderMasterConfigMap } from './master-config.js';
import { renderMasterPdb } from './master-pdb.js';
import { renderMasterRbac, renderMasterServiceAccount } from './master-rbac.js';
import { renderMasterServices } from './master-services.js';
import { renderMasterStatefulSet } from './master-statefulset.js';
import { masterMetadataService, masterName } from './names.js';
import { renderSegmentConfigMap, renderSegmentService, renderSegmentStatefulSet } from './segment-statefulset.js';
import { renderMasterNetworkPolicy, renderSegmentNetworkPolicy } from './network-policies.js';

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

export interface Rendered {
  /** Objects that must exist with (at least) these fields. */
  desired: KubernetesObject[];
  /** Objects of an optional kind that must NOT exist for this spec (e.g. PDB of a single master). */
  absent: ObjectRef[];
}

export function renderCluster(sc: DefaultedStoreCluster): Rendered {
  const ns = sc.metadata.namespace;
  const name = sc.metadata.name;
  const desired: KubernetesObject[] = [renderMasterServiceAccount(sc)];
  const absent: ObjectRef[] = [];
  const rbac = renderMasterRbac(sc);
  if (rbac) desired.push(...rbac);
  else
    absent.push(
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', namespace: ns, name: masterName(name) },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', namespace: ns, name: masterName(name) },
    );
  desired.push(renderMasterConfigMap(sc), ...renderMasterServices(sc));
  if (sc.spec.metadataServer.type !== 'http') absent.push({ apiVersion: 'v1', kind: 'Service', namespace: ns, name: masterMetadataService(name) });
  const pdb = renderMasterPdb(sc);
  if (pdb) desired.push(pdb);
  else absent.push({ apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', namespace: ns, name: masterName(name) });
  desired.push(renderMasterStatefulSet(sc), renderMasterNetworkPolicy(sc));
  return { desired, absent };
}

export function renderSegment(ss: DefaultedStoreSegment, sc: DefaultedStoreCluster): Rendered {
  return { desired: [renderSegmentConfigMap(ss, sc), renderSegmentService(ss), renderSegmentStatefulSet(ss, sc), renderSegmentNetworkPolicy(ss)], absent: [] };
}
