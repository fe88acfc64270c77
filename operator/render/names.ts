// Names of the objects rendered for a StoreCluster/StoreSegment and the addresses clients use,
// derived in one place so the renderer, the webhook and the status code agree.
import type { DefaultedStoreCluster } from '../api/defaults.js';

export const masterName = (cluster: string) => `${cluster}-master`;
export const masterRpcService = (cluster: string) => `${cluster}-master`;
export const masterHeadlessService = (cluster: string) => `${cluster}-master-headless`;
export const masterMetricsService = (cluster: string) => `${cluster}-master-metrics`;
export const masterMetadataService = (cluster: string) => `${cluster}-master-metadata`;
export const masterConfigMap = (cluster: string) => `${cluster}-master-config`;
export const masterLease = (cluster: string) => `${cluster}-master-leader`;
export const segmentName = (segment: string) => `${segment}-store`;
export const segmentConfigMap = (segment: string) => `${segment}-store-config`;

const svcHost = (name: string, ns: string) => `${name}.${ns}.svc`;

/** `host:port` of the serving master, for `--master_server` / master_server_address. */
export function masterAddress(sc: DefaultedStoreCluster): string {
  return `${svcHost(masterRpcService(sc.metadata.name), sc.metadata.namespace)}:${sc.spec.master.rpcPort}`;
}

/** Base URL of the leader's HTTP management endpoints (/health, /metrics, /get_segments_detail). */
export function masterHttpUrl(sc: DefaultedStoreCluster): string {
  return `http://${svcHost(masterMetricsService(sc.metadata.name), sc.metadata.namespace)}:${sc.spec.master.metricsPort}`;
}

/** The transfer-engine metadata server string clients are given (`metadata_server`). */
export function metadataServer(sc: DefaultedStoreCluster): string {
  const md = sc.spec.metadataServer;
  switch (md.type) {
    case 'http':
      return `http://${svcHost(masterMetadataService(sc.metadata.name), sc.metadata.namespace)}:${md.port}/metadata`;
    case 'p2p':
      return 'P2PHANDSHAKE';
    case 'etcd':
    case 'redis': {
      const addr = md.address ?? '';
      return addr.includes('://') ? addr : `${md.type}://${addr}`;
    }
  }
}
