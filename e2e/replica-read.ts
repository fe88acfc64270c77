// Reads one replica straight from its segment with a test's own transfer engine, not through a
// client's choice of replica: how the e2e tests check that each replica holds the bytes put.
import type { MappedRegion } from '../client/native-port.js';
import type { TransferEngine } from '../native/index.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';

/** Reads every slice of `r` into `local` from offset 0, in slice order; the bytes read. */
export async function readReplicaInto(engine: TransferEngine, local: MappedRegion, r: ReplicaInfo__Output): Promise<Buffer> {
  let at = 0;
  await engine.transfer(
    r.handles.map((h) => {
      const op = {
        op: 'read' as const,
        endpoint: h.te_endpoint,
        remoteAddress: Number(h.buffer),
        localAddress: local.address + at,
        length: Number(h.size),
        incarnation: Number(h.incarnation),
      };
      at += Number(h.size);
      return op;
    }),
  );
  return Buffer.from(local.view(0, at));
}
