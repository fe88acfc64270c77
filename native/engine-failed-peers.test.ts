// Which peers failed: a rejected batch's TransferError names, in `endpoints`, each remote endpoint
// whose chunks failed on the peer's side or on the path to it (dead, unreachable, frozen, or
// refusing with STALE_REGION / FENCED / ADDRESS_OUT_OF_RANGE), and no peer for failures on this
// side (a bad local range, bad arguments, the engine closed). Real peer processes, TCP and shm.
import { randomFillSync } from 'node:crypto';
import { createServer } from 'node:net';
import { TransferEngine, type TransferOp } from './index.js';
import { rejection } from './test-fixtures/rejection.js';
import { engineHarness } from './test-fixtures/engine-harness.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const PEER_SIZE = 72 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };

const h = engineHarness(80 * MiB);
const { engines, peers } = h;

function newEngine(opts: ConstructorParameters<typeof TransferEngine>[0]): TransferEngine {
  const e = new TransferEngine({ ...ports, env: {}, ...opts });
  engines.push(e);
  e.start();
  e.registerRegion(h.local.address, h.local.size);
  return e;
}

async function startPeer(seed: number, opts: object, size = PEER_SIZE): Promise<RegionPeer> {
  const p = await startRegionPeer(size, seed, { ...ports, ...opts });
  peers.push(p); // handed to afterAll at once, so a later failure still stops it
  return p;
}

const op = (p: RegionPeer, kind: 'read' | 'write', offset: number, length: number, localOffset: number, extra: Partial<TransferOp> = {}): TransferOp => ({
  op: kind,
  endpoint: p.endpoint,
  remoteAddress: p.address + offset,
  localAddress: h.local.address + localOffset,
  length,
  ...extra,
});

describe.each([
  ['TCP', false],
  ['shm', true],
])('over %s', (_name, shmTransport) => {
  test('a batch to two peers, one killed mid-transfer: the rejection names exactly the dead one', async () => {
    const victim = await startPeer(91, { shmTransport });
    const other = await startPeer(92, { shmTransport });
    const e = newEngine({ shmTransport, timeoutMs: 60_000 });
    // Channels (and shm grants) to both first: the dead peer is met on a live connection.
    await e.transfer([op(victim, 'read', 0, 1, 0), op(other, 'read', 0, 1, 0)]);
    randomFillSync(new Uint8Array(h.local.buffer, 0, 64 * MiB));
    // Frozen first, so its 64 MiB (TCP) cannot finish before the kill; over shm the frozen peer's
    // memory is still written, so the kill comes before the batch.
    process.kill(victim.pid, 'SIGSTOP');
    if (shmTransport) await victim.stop();
    const batch = e.transfer([op(victim, 'write', 0, 64 * MiB, 0), op(other, 'write', 0, 8 * MiB, 70 * MiB, { checksum: true })]);
    const failed = rejection(batch); // attached now: the rejection may land while stop() awaits the exit
    await victim.stop(); // SIGKILL
    const err = await failed;
    expect(['TRANSFER_FAILED', 'CONNECTION_FAILED']).toContain(err.code);
    expect(err.endpoints).toEqual([victim.endpoint]);
    // The live peer is still reachable.
    await e.transfer([op(other, 'read', 0, 4096, 0)]);
  });

  test('a STALE_REGION refusal names its peer, not the other peer of the batch', async () => {
    const a = await startPeer(93, { shmTransport }, 8 * MiB);
    const b = await startPeer(94, { shmTransport }, 8 * MiB);
    const e = newEngine({ shmTransport });
    await e.transfer([op(a, 'read', 0, 1, 0), op(b, 'read', 0, 1, 0)]);
    for (const size of [4096, 2 * MiB]) {
      const err = await rejection(e.transfer([op(b, 'read', 0, size, 4 * MiB, { incarnation: b.incarnation }), op(a, 'read', 0, size, 0, { incarnation: a.incarnation + 1 })]));
      expect([size, err.code]).toEqual([size, 'STALE_REGION']);
      expect(err.endpoints).toEqual([a.endpoint]);
    }
  });

  test('a FENCED refusal and an ADDRESS_OUT_OF_RANGE refusal name their peer', async () => {
    const a = await startPeer(95, { shmTransport }, 8 * MiB);
    const b = await startPeer(96, { shmTransport }, 8 * MiB);
    const e = newEngine({ shmTransport });
    await e.transfer([op(a, 'read', 0, 1, 0), op(b, 'read', 0, 1, 0)]);
    await (
      await a.setFence(10)
    ).settled;
    for (const size of [4096, 2 * MiB]) {
      const fenced = await rejection(e.transfer([op(a, 'write', 0, size, 0, { incarnation: a.incarnation, generation: 3 }), op(b, 'write', 0, size, 4 * MiB, { generation: 3 })]));
      expect([size, fenced.code]).toEqual([size, 'FENCED']);
      expect(fenced.endpoints).toEqual([a.endpoint]);
      const outside = await rejection(e.transfer([op(a, 'read', 0, size, 0), op(b, 'read', 8 * MiB - 10, size, 4 * MiB)]));
      expect([size, outside.code]).toEqual([size, 'ADDRESS_OUT_OF_RANGE']);
      expect(outside.endpoints).toEqual([b.endpoint]);
    }
  });

  test('failures on this side name no peer: a bad local range, bad arguments, the engine closed', async () => {
    const a = await startPeer(97, { shmTransport }, 8 * MiB);
    const e = newEngine({ shmTransport, timeoutMs: 60_000 });
    await e.transfer([op(a, 'read', 0, 1, 0)]);
    const badLocal = await rejection(e.transfer([{ ...op(a, 'read', 0, 4096, 0), localAddress: h.local.address + h.local.size - 10 }]));
    expect(badLocal.code).toBe('ADDRESS_OUT_OF_RANGE');
    expect(badLocal.endpoints).toEqual([]);
    const badOp = await rejection(e.transfer([{ ...op(a, 'read', 0, 4096, 0), op: 'move' as 'read' }]));
    expect(badOp.code).toBe('INVALID_ARGUMENT');
    expect(badOp.endpoints).toEqual([]);
    // A batch still waiting for a frozen peer when the engine closes: rejected, the peer not blamed.
    process.kill(a.pid, 'SIGSTOP');
    try {
      if (!shmTransport) {
        const pending = rejection(e.transfer([op(a, 'read', 0, 4 * MiB, 0)]));
        e.close();
        const closed = await pending;
        expect(closed.code).toBe('TRANSFER_FAILED');
        expect(closed.endpoints).toEqual([]);
      } else {
        e.close();
      }
      expect((await rejection(e.transfer([op(a, 'read', 0, 1, 0)]))).endpoints).toEqual([]);
    } finally {
      process.kill(a.pid, 'SIGCONT');
    }
  });
});

test('a peer nobody listens on (CONNECTION_FAILED) and a frozen peer (TIMEOUT) are named', async () => {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const frozen = await startPeer(98, { shmTransport: false }, 8 * MiB);
  const e = newEngine({ shmTransport: false, timeoutMs: 300 });
  await e.transfer([op(frozen, 'read', 0, 1, 0)]);
  const nowhere = `127.0.0.1:${port}`;
  const refused = await rejection(e.transfer([{ op: 'read', endpoint: nowhere, remoteAddress: 4096, localAddress: h.local.address, length: 10 }]));
  expect(refused.code).toBe('CONNECTION_FAILED');
  expect(refused.endpoints).toEqual([nowhere]);
  process.kill(frozen.pid, 'SIGSTOP');
  try {
    // Four chunks time out on four connections: the peer is named once.
    const timedOut = await rejection(e.transfer([op(frozen, 'read', 0, 4 * MiB, 0)]));
    expect(timedOut.code).toBe('TIMEOUT');
    expect(timedOut.endpoints).toEqual([frozen.endpoint]);
  } finally {
    process.kill(frozen.pid, 'SIGCONT');
  }
});
