// The cluster bench:sidecar and bench:large run against: a store_master and two store services on
// 127.0.0.1, A (the dummy clients' real client) and B (another memory holder), 1.5 GB segments.
import { LocalCluster } from '../sidecar/local-cluster.js';

/** Starts it; `leaseTtlMs` is the master's read lease (short, so objects become removable soon). */
export function sidecarCluster(leaseTtlMs: number): Promise<LocalCluster> {
  return LocalCluster.start({
    storeServices: 2,
    segmentSize: '1536MB',
    masterArgs: [`--default_kv_lease_ttl=${leaseTtlMs}ms`],
    serviceArgs: ['--local_buffer_size=128MB'],
  });
}
