// The masters' StatefulSet: `replicas` store_master pods reading the ConfigMap; with HA they
// elect a leader on a Lease and the leader labels its own pod (POD_NAME/POD_NAMESPACE given).
// Every master reads the cluster secret (cluster-secret.ts) and, with spec.tls, its certificate.
import type { V1Container, V1StatefulSet } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { Annotations, Labels, MASTER_CONFIG_PATH, clusterLabels } from '../api/constants.js';
import { containerResources, objectMeta } from './meta.js';
import { configHash, renderMasterConfigMap } from './master-config.js';
import { masterConfigMap, masterHeadlessService, masterName } from './names.js';
import { restrictedContainer, restrictedPod } from './security-context.js';
import { clusterSecretEnv, clusterSecretMount, clusterSecretVolume, SECRET_MODE_GROUP } from './cluster-secret.js';
import { tlsMount, tlsProbe, tlsServerArgs, tlsVolume } from './tls.js';

export function masterSelector(cluster: string): Record<string, string> {
  return { [Labels.cluster]: cluster, [Labels.role]: 'master' };
}

export function renderMasterStatefulSet(sc: DefaultedStoreCluster): V1StatefulSet {
  const name = sc.metadata.name;
  const { master: m, metadataServer: md } = sc.spec;
  const ha = m.replicas > 1;
  const tls = sc.spec.tls;
  const labels = { ...clusterLabels(name, 'master'), ...masterSelector(name) };
  const ports = [
    { name: 'rpc', containerPort: m.rpcPort, protocol: 'TCP' },
    { name: 'metrics', containerPort: m.metricsPort, protocol: 'TCP' },
    ...(md.type === 'http' ? [{ name: 'metadata', containerPort: md.port, protocol: 'TCP' }] : []),
  ];
  const container: V1Container = {
    name: 'master',
    image: sc.spec.image,
    imagePullPolicy: sc.spec.imagePullPolicy,
    command: ['store_master'],
    // The pod IP is the address clients reach; in HA mode it must not be 0.0.0.0.
    args: [`--config_path=${MASTER_CONFIG_PATH}`, '--rpc_address=$(POD_IP)', ...(tls ? tlsServerArgs(tls) : [])],
    env: [
      clusterSecretEnv(),
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    ],
    ports,
    // A follower is alive but does not serve: only liveness checks the process; readiness on
    // /health matters for the single master, which always serves.
    livenessProbe: { tcpSocket: { port: 'metrics' }, initialDelaySeconds: 5, periodSeconds: 10, failureThreshold: 6 },
    readinessProbe: ha ? { tcpSocket: { port: 'rpc' }, periodSeconds: 5 } : tlsProbe({ httpGet: { path: '/health', port: 'metrics' }, periodSeconds: 5 }, tls),
    volumeMounts: [{ name: 'config', mountPath: MASTER_CONFIG_PATH.replace(/\/[^/]+$/, ''), readOnly: true }, clusterSecretMount(), ...(tls ? [tlsMount()] : [])],
    ...(m.resources ? { resources: containerResources(m.resources) } : {}),
    securityContext: restrictedContainer(),
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: objectMeta({ kind: 'StoreCluster', metadata: sc.metadata }, masterName(name), labels),
    spec: {
      replicas: m.replicas,
      serviceName: masterHeadlessService(name),
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: masterSelector(name) },
      template: {
        metadata: { labels, annotations: { [Annotations.configHash]: configHash(renderMasterConfigMap(sc)) } },
        spec: {
          serviceAccountName: masterName(name),
          automountServiceAccountToken: ha && (m.haBackend?.type ?? 'k8s') === 'k8s',
          containers: [container],
          volumes: [
            { name: 'config', configMap: { name: masterConfigMap(name) } },
            clusterSecretVolume(name, SECRET_MODE_GROUP),
            ...(tls ? [tlsVolume(tls, SECRET_MODE_GROUP)] : []),
          ],
          ...(m.nodeSelector ? { nodeSelector: m.nodeSelector } : {}),
          ...(m.tolerations ? { tolerations: m.tolerations } : {}),
          ...(ha
            ? {
                affinity: {
                  podAntiAffinity: {
                    preferredDuringSchedulingIgnoredDuringExecution: [
                      { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: masterSelector(name) } } },
                    ],
                  },
                },
              }
            : {}),
          securityContext: restrictedPod(),
        },
      },
    },
  };
}
