// The shm control socket hands a segment's fd (read-write, the whole mapping) only to same-host
// peers of an allowed uid (SO_PEERCRED): by default this process's effective uid and root, plus
// shmPeerUids / MC_STORE_SHM_PEER_UIDS. Another uid is answered "not shareable", so its transfers
// go over TCP, and is counted and logged. Real processes of real, different uids: the serving peer
// runs as this test's uid (root), the reading stranger under setpriv as a uid of its own. Whether
// a transfer used the shared mapping is told by freezing the serving peer: only shared memory
// answers then, TCP times out.
import { mapMemory, shmPeerUidsDefault, TransferEngine } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';
import { asStranger, cannotSwitchUid, strangerUid } from './test-fixtures/other-uid.js';

const MiB = 1024 * 1024;
const ports = { minPort: 20000, maxPort: 32000 };
const peers: RegionPeer[] = [];

beforeAll(() => ensureAddon());

afterAll(async () => {
  for (const p of peers) {
    if (p.proc.exitCode === null) process.kill(p.pid, 'SIGCONT');
    await p.stop();
  }
});

async function peer(engineOptions: object, wrap?: string[]): Promise<RegionPeer> {
  const p = await startRegionPeer(4 * MiB, 20 + peers.length, { shmTransport: true, timeoutMs: 500, ...engineOptions }, { wrap, captureStderr: true });
  peers.push(p);
  return p;
}

/** `reader` reads 1 MiB of `server`, then once more with `server` frozen: 'ok' or the error code. */
async function readTwice(reader: RegionPeer, server: RegionPeer): Promise<string> {
  const read = (offset: number) => reader.transfer({ op: 'read', endpoint: server.endpoint, remoteAddress: server.address + offset, offset: 0, length: MiB });
  expect(await read(0)).toEqual({ ok: true });
  expect(await reader.sha256(0, MiB)).toBe(await server.sha256(0, MiB));
  process.kill(server.pid, 'SIGSTOP');
  try {
    const r = await read(MiB);
    return r.ok ? 'ok' : (r.error ?? 'no answer');
  } finally {
    process.kill(server.pid, 'SIGCONT');
  }
}

(cannotSwitchUid ? describe.skip : describe)(`shm peers by uid${cannotSwitchUid ? ` (skipped: needs ${cannotSwitchUid})` : ''}`, () => {
  test('a peer of another uid gets no fd: served over TCP, counted and logged', async () => {
    const server = await peer({});
    const stranger = await peer({}, asStranger);
    expect(await readTwice(stranger, server)).toBe('TIMEOUT'); // TCP: a frozen peer does not answer
    expect((await server.stats()).shmPeersRefused).toBe(1);
    const line = await server.waitForStderr(/kvstore engine \S+: same-host peer pid \d+ uid \d+ refused memory fds[^\n]*/);
    expect(line).toContain(`uid ${strangerUid} refused memory fds (allowed uids: 0, MC_STORE_SHM_PEER_UIDS adds more); its transfers use TCP`);
  });

  test('a uid listed in shmPeerUids gets the fd, as the same uid does', async () => {
    const server = await peer({ shmPeerUids: [0, strangerUid] });
    const listed = await peer({}, asStranger);
    expect(await readTwice(listed, server)).toBe('ok'); // served from the shared mapping
    const same = await peer({});
    expect(await readTwice(same, server)).toBe('ok');
    expect((await server.stats()).shmPeersRefused).toBe(0);
  });
});

test("the TS engine's default is this process's uid, root and MC_STORE_SHM_PEER_UIDS", () => {
  const own = process.geteuid!();
  expect(shmPeerUidsDefault({})).toEqual([...new Set([own, 0])]);
  expect(shmPeerUidsDefault({ MC_STORE_SHM_PEER_UIDS: '1000, 1001' })).toEqual([...new Set([own, 0, 1000, 1001])]);
});

test('shmPeerUids is checked: an array of uids, at least one', () => {
  for (const bad of [[], [-1], [2 ** 32], 'root']) {
    expect(() => new TransferEngine({ ...ports, env: {}, shmPeerUids: bad as number[] })).toThrow(/shmPeerUids/);
  }
  expect(() => new TransferEngine({ ...ports, env: { MC_STORE_SHM_PEER_UIDS: 'nobody' } })).toThrow(/MC_STORE_SHM_PEER_UIDS: "nobody" is not a uid/);
  new TransferEngine({ ...ports, env: { MC_STORE_SHM_PEER_UIDS: '1000, 1001' } }).close();
  mapMemory({ size: 4096 }).release(); // the addon is usable after the refusals
});
