// What the real client tells a same-host dummy client about an object it just read for it, so the
// dummy can read the same bytes itself while the real client's read lease holds
// (proto/store_client.proto LocalReplica; docs/client.md "Dummy clients"): per slice the serving
// engine's endpoint, the range in its served memory, the region's incarnation and the CRC-32C the
// writer recorded (when it recorded them: checksums on), and the lease time left. Only for MEMORY
// replicas whose every slice lies with an engine on this host (the dummy maps it through that
// engine's same-host control socket, which only a process in this network namespace reaches);
// anything else gets no description and the dummy keeps reading through us. A dummy that looks up
// a first read at the master itself (client/dummy-direct-reads.ts) describes the replica it got
// the same way.
import type { ReadSource } from './read-path.js';
import { splitHostPort } from '../common/host-port.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import type { LocalReplica } from '../proto/gen/store/LocalReplica.js';

/** The description of `source`, or undefined when a dummy could not use it. */
export function localReplica(source: ReadSource, sameHost: (endpoint: string) => boolean): LocalReplica | undefined {
  const { replica, sums, leaseLeftMs } = source;
  const handles = replica.handles;
  const checksums = sums.length > 0;
  if (replica.replica_type !== ReplicaType.MEMORY || handles.length === 0 || (checksums && sums.length !== handles.length) || !(leaseLeftMs > 0)) return undefined;
  const slices = [];
  for (let i = 0; i < handles.length; i++) {
    const h = handles[i];
    const length = Number(h.size);
    if (!h.te_endpoint || length <= 0 || !sameHost(h.te_endpoint)) return undefined;
    slices.push({ te_endpoint: h.te_endpoint, address: Number(h.buffer), length, incarnation: Number(h.incarnation), crc32c: checksums ? sums[i] : 0 });
  }
  return { slices, lease_left_us: Math.floor(leaseLeftMs * 1000), checksums };
}

/** Whether an engine endpoint is on the host of `own` (the real client's engine): same IP address. */
export function sameHostAs(own: string): (endpoint: string) => boolean {
  const host = splitHostPort(own)?.host;
  // endpoints are few (one per segment holder): each is parsed once
  const known = new Map<string, boolean>();
  return (endpoint) => {
    let same = known.get(endpoint);
    if (same === undefined) {
      same = host !== undefined && splitHostPort(endpoint)?.host === host;
      if (known.size < 4096) known.set(endpoint, same);
    }
    return same;
  };
}
