// The NetworkPolicies of a StoreCluster and of each StoreSegment: who may open connections to the
// masters and the store pods. Members are the pods carrying the cluster label (masters, store
// pods, pods with the injected sidecar: the webhook adds the label) and the operator's own pods
// (it reads the masters' segment figures and the stores' health). Everyone else is refused.
// Injected application pods are not selected: a policy that selects a pod closes every port it
// does not name, and their own ports are the application's business. Policies add up, so a
// Prometheus outside the cluster needs a policy of its own that opens the metrics port.
import type { V1NetworkPolicy, V1NetworkPolicyIngressRule, V1NetworkPolicyPeer, V1NetworkPolicySpec } from '@kubernetes/client-node';
import type { DefaultedStoreCluster, DefaultedStoreSegment } from '../api/defaults.js';
import { MEMBER_LABEL, OPERATOR_POD_LABELS, TRANSFER_PORT, clusterLabels } from '../api/constants.js';
import { objectMeta } from './meta.js';
import { masterSelector } from './master-statefulset.js';
import { masterName, segmentName } from './names.js';
import { segmentSelector } from './segment-statefulset.js';

/** Pods of the cluster (same namespace) and the operator's pods (any namespace). */
function membersAndOperator(cluster: string): V1NetworkPolicyPeer[] {
  return [{ podSelector: { matchLabels: { [MEMBER_LABEL]: cluster } } }, { namespaceSelector: {}, podSelector: { matchLabels: { ...OPERATOR_POD_LABELS } } }];
}

const tcp = (port: number | string) => ({ port, protocol: 'TCP' });

/**
 * The policy as the API server reads it: @kubernetes/client-node names an ingress rule's `from`
 * `_from` (its generator avoids the keyword) and renames it only when it serializes through its
 * own models, while the operator writes plain JSON and `render` prints plain YAML.
 */
type IngressRule = Omit<V1NetworkPolicyIngressRule, '_from'> & { from: V1NetworkPolicyPeer[] };
export type NetworkPolicy = Omit<V1NetworkPolicy, 'spec'> & { spec: Omit<V1NetworkPolicySpec, 'ingress'> & { ingress: IngressRule[] } };

export function renderMasterNetworkPolicy(sc: DefaultedStoreCluster): NetworkPolicy {
  const name = sc.metadata.name;
  const { master: m, metadataServer: md } = sc.spec;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: objectMeta({ kind: 'StoreCluster', metadata: sc.metadata }, masterName(name), clusterLabels(name, 'master')),
    spec: {
      podSelector: { matchLabels: masterSelector(name) },
      policyTypes: ['Ingress'],
      ingress: [{ from: membersAndOperator(name), ports: [tcp(m.rpcPort), tcp(m.metricsPort), ...(md.type === 'http' ? [tcp(md.port)] : [])] }],
    },
  };
}

export function renderSegmentNetworkPolicy(ss: DefaultedStoreSegment): NetworkPolicy {
  const cluster = ss.spec.cluster;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: objectMeta({ kind: 'StoreSegment', metadata: ss.metadata }, segmentName(ss.metadata.name), clusterLabels(cluster, 'store')),
    spec: {
      podSelector: { matchLabels: segmentSelector(ss.metadata.name) },
      policyTypes: ['Ingress'],
      ingress: [{ from: membersAndOperator(cluster), ports: [tcp(ss.spec.httpPort), tcp(TRANSFER_PORT)] }],
    },
  };
}
