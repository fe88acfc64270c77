// The k8s election backend's `--ha_backend_connstring`: `<namespace>/<lease-name>`, and the Lease
// annotation that publishes the leader's address (read by clients, client/k8s-leader-reader.ts).

/** The leader's `host:port` on the leader Lease, written by the elected master. */
export const LEADER_ADDRESS_ANNOTATION = 'store.kvcache.io/leader-address';

/** `<namespace>/<lease-name>` -> parts, with a clear error otherwise. */
export function parseLeaseRef(connstring: string): { namespace: string; leaseName: string } {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(connstring);
  if (!m) throw new Error(`--ha_backend_connstring=${connstring}: expected <namespace>/<lease-name> for --ha_backend_type=k8s (lowercase DNS names)`);
  return { namespace: m[1], leaseName: m[3] };
}
