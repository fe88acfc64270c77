// The shm control socket hands a segment's fd (read-write, the whole mapping) only to same-host
// peers of an allowed uid (SO_PEERCRED): this process's effective uid unless shmPeerUids /
// MC_STORE_SHM_PEER_UIDS say more. Another uid is answered "not shareable", so its transfers go
// over TCP, and is counted and logged. Real processes of real, different uids: the serving peer
// runs under setpriv as a uid of its own, this test process (root) is the stranger. Whether a
// transfer used the shared mapping is told by freezing the serving peer: only shared memory
// answers then, TCP times out.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mapMemory, TransferEngine, type MemoryRegion } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const ports = { minPort: 20000, maxPort: 32000 };
const peerUid = 100_000 + Math.floor(Math.random() * 900_000);
const asPeerUid = ['setpriv', `--reuid=${peerUid}`, `--regid=${peerUid}`, '--clear-groups'];
const cannotSwitchUid = (() => {
  if (process.getuid?.() !== 0) return 'the test runs as root (it starts the serving peer as another uid)';
  try {
    execFileSync('setpriv', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'setpriv (util-linux) is installed';
  }
  return '';
})();

let local: MemoryRegion;
const peers: RegionPeer[] = [];
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

beforeAll(() => {
  ensureAddon();
  local = mapMemory({ size: 4 * MiB });
});

afterAll(async () => {
  for (const p of peers) {
    if (p.proc.exitCode === null) process.kill(p.pid, 'SIGCONT');
    await p.stop();
  }
  local?.release();
});

/** Reads 1 MiB of the peer through a fresh engine of this process (root); then, with the peer frozen, once more. */
async function readTwice(p: RegionPeer): Promise<{ frozenRead: 'ok' | string }> {
  const e = new TransferEngine({ ...ports, timeoutMs: 500, shmTransport: true, env: {} });
  try {
    e.start();
    e.registerRegion(local.address, local.size, { serve: false });
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]);
    expect(sha(new Uint8Array(local.buffer, 0, MiB))).toBe(await p.sha256(0, MiB));
    process.kill(p.pid, 'SIGSTOP');
    try {
      await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address + MiB, localAddress: local.address, length: MiB }]);
      return { frozenRead: 'ok' };
    } catch (err) {
      return { frozenRead: (err as { code: string }).code };
    } finally {
      process.kill(p.pid, 'SIGCONT');
    }
  } finally {
    e.close();
  }
}

(cannotSwitchUid ? describe.skip : describe)(`shm peers by uid${cannotSwitchUid ? ` (skipped: needs ${cannotSwitchUid})` : ''}`, () => {
  test('a peer of another uid gets no fd: served over TCP, counted and logged', async () => {
    const p = await startRegionPeer(4 * MiB, 21, { shmTransport: true }, { wrap: asPeerUid, captureStderr: true });
    peers.push(p);
    expect(await readTwice(p)).toEqual({ frozenRead: 'TIMEOUT' }); // TCP: a frozen peer does not answer
    expect((await p.stats()).shmPeersRefused).toBe(1);
    const line = await p.waitForStderr(/kvstore engine \S+: same-host peer pid \d+ uid 0 refused memory fds[^\n]*/);
    expect(line).toContain(`allowed uids: ${peerUid}, MC_STORE_SHM_PEER_UIDS adds more`);
  });

  test('a uid listed in shmPeerUids gets the fd, as the same uid does', async () => {
    const listed = await startRegionPeer(4 * MiB, 22, { shmTransport: true, shmPeerUids: [peerUid, 0] }, { wrap: asPeerUid });
    peers.push(listed);
    expect(await readTwice(listed)).toEqual({ frozenRead: 'ok' }); // served from the shared mapping
    expect((await listed.stats()).shmPeersRefused).toBe(0);
    const same = await startRegionPeer(4 * MiB, 23, { shmTransport: true });
    peers.push(same);
    expect(await readTwice(same)).toEqual({ frozenRead: 'ok' });
    expect((await same.stats()).shmPeersRefused).toBe(0);
  });
});

test('shmPeerUids is checked: an array of uids, at least one', () => {
  for (const bad of [[], [-1], [2 ** 32], 'root']) {
    expect(() => new TransferEngine({ ...ports, env: {}, shmPeerUids: bad as number[] })).toThrow(/shmPeerUids/);
  }
  expect(() => new TransferEngine({ ...ports, env: { MC_STORE_SHM_PEER_UIDS: 'nobody' } })).toThrow(/MC_STORE_SHM_PEER_UIDS: "nobody" is not a uid/);
  new TransferEngine({ ...ports, env: { MC_STORE_SHM_PEER_UIDS: '1000, 1001' } }).close();
});
