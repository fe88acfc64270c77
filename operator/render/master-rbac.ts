// The masters' ServiceAccount, and with the k8s HA backend a Role/RoleBinding granting exactly
// what election needs: the Lease (get/update by name, create), and patching their own pods for
// the leader label (pod names are known: <cluster>-master-<ordinal>).
import type { V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { clusterLabels } from '../api/constants.js';
import { objectMeta } from './meta.js';
import { masterLease, masterName } from './names.js';

export function usesK8sLease(sc: DefaultedStoreCluster): boolean {
  return sc.spec.master.replicas > 1 && (sc.spec.master.haBackend?.type ?? 'k8s') === 'k8s';
}

export function renderMasterServiceAccount(sc: DefaultedStoreCluster): V1ServiceAccount {
  return {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: objectMeta({ kind: 'StoreCluster', metadata: sc.metadata }, masterName(sc.metadata.name), clusterLabels(sc.metadata.name, 'master')),
    automountServiceAccountToken: usesK8sLease(sc),
  };
}

/** The Role and RoleBinding, or undefined when the masters need no API access. */
export function renderMasterRbac(sc: DefaultedStoreCluster): [V1Role, V1RoleBinding] | undefined {
  if (!usesK8sLease(sc)) return undefined;
  const name = masterName(sc.metadata.name);
  const owner = { kind: 'StoreCluster' as const, metadata: sc.metadata };
  const labels = clusterLabels(sc.metadata.name, 'master');
  const pods = Array.from({ length: sc.spec.master.replicas }, (_, i) => `${name}-${i}`);
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: objectMeta(owner, name, labels),
      rules: [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        // the leader Lease and the records beside it (docs/ha.md "Which image may be elected")
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          resourceNames: [masterLease(sc.metadata.name), `${masterLease(sc.metadata.name)}-records`],
          verbs: ['get', 'update'],
        },
        { apiGroups: [''], resources: ['pods'], resourceNames: pods, verbs: ['get', 'patch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: objectMeta(owner, name, labels),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: sc.metadata.namespace }],
    },
  ];
}
