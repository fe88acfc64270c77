// The masters' Services: RPC to the serving master (the leader label when HA), headless for the
// StatefulSet's pod DNS, the leader's HTTP management port (metrics, segments), and the
// embedded HTTP metadata server when the cluster uses it.
import type { V1Service } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { Labels, clusterLabels } from '../api/constants.js';
import { objectMeta } from './meta.js';
import { masterSelector } from './master-statefulset.js';
import { masterHeadlessService, masterMetadataService, masterMetricsService, masterRpcService } from './names.js';

/** Pods the serving Services route to: the leader when several masters elect one. */
export function servingSelector(sc: DefaultedStoreCluster): Record<string, string> {
  const sel = masterSelector(sc.metadata.name);
  return sc.spec.master.replicas > 1 ? { ...sel, [Labels.leader]: 'true' } : sel;
}

export function renderMasterServices(sc: DefaultedStoreCluster): V1Service[] {
  const name = sc.metadata.name;
  const { master: m, metadataServer: md } = sc.spec;
  const owner = { kind: 'StoreCluster' as const, metadata: sc.metadata };
  const labels = clusterLabels(name, 'master');
  const svc = (svcName: string, spec: V1Service['spec'], annotations?: Record<string, string>): V1Service => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: objectMeta(owner, svcName, labels, annotations),
    spec,
  });
  const out = [
    svc(masterRpcService(name), { type: 'ClusterIP', selector: servingSelector(sc), ports: [{ name: 'rpc', port: m.rpcPort, targetPort: 'rpc', protocol: 'TCP' }] }),
    svc(masterHeadlessService(name), {
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector: masterSelector(name),
      ports: [
        { name: 'rpc', port: m.rpcPort, targetPort: 'rpc', protocol: 'TCP' },
        { name: 'metrics', port: m.metricsPort, targetPort: 'metrics', protocol: 'TCP' },
      ],
    }),
    svc(
      masterMetricsService(name),
      { type: 'ClusterIP', selector: servingSelector(sc), ports: [{ name: 'metrics', port: m.metricsPort, targetPort: 'metrics', protocol: 'TCP' }] },
      { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(m.metricsPort), 'prometheus.io/path': '/metrics' },
    ),
  ];
  if (md.type === 'http') {
    out.push(
      svc(masterMetadataService(name), { type: 'ClusterIP', selector: servingSelector(sc), ports: [{ name: 'metadata', port: md.port, targetPort: 'metadata', protocol: 'TCP' }] }),
    );
  }
  return out;
}
