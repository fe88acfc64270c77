// Standbys following the leader (docs/ha.md "Standbys") over real TCP sockets, with a real
// MasterCore as the leader's: a standby that connects while the leader is busy ends with exactly
// the leader's state (the walk and the changes made during it), a commit waits for its
// acknowledgement, a placement after a removal waits until every synced standby has the removal,
// and a standby that stops acknowledging is disconnected instead of stopping the leader. With an
// in-sync record (HA): a standby counts only once its stream is recorded, and a dropped one holds
// placements back until the record without it is written.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { Logger } from '../../common/logger.js';
import type { MasterCore } from '../core/master-core.js';
import { makeCore, mountReq, putObject } from '../core/master-core-fixture.js';
import type { CoreState } from '../core/state-records.js';
import { ChangeFanout } from './change-fanout.js';
import { CommitBarrier } from './commit-barrier.js';
import { REPLICATION_MAGIC, ReplicationLeader } from './replication-leader.js';
import { ReplicationFollower } from './replication-follower.js';
import { FrameReader } from './frame-reader.js';
import { decodeWith, stateCodec } from '../../common/state-proto.js';
import type { LeaderMessage__Output } from '../../proto/gen/store/LeaderMessage.js';
import type { InSyncRecord } from '../ha/standby-ranking.js';

const MiB = 1 << 20;
let now = 1000;
const clock = (): number => now;
const log = new Logger({ program: 't', stderr: () => {} });

function canonical(s: CoreState): { segments: unknown[]; objects: unknown[] } {
  return {
    segments: [...s.segments].sort((a, b) => a.name.localeCompare(b.name)),
    objects: [...s.objects].map((o) => ({ ...o, age_ms: 0 })).sort((a, b) => (a.key < b.key ? -1 : 1)),
  };
}

interface Leader {
  core: MasterCore;
  fanout: ChangeFanout;
  barrier: CommitBarrier;
  replication: ReplicationLeader;
  server: Server;
  address: string;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function leader(commitAcks = 1, publishInSync?: (r: InSyncRecord) => Promise<void>): Promise<Leader> {
  const core = makeCore({ clientTtlMs: 60_000 });
  const fanout = new ChangeFanout(clock);
  core.setChangeSink(fanout);
  const replication = new ReplicationLeader({ source: () => core, seq: () => fanout.seq, viewVersion: () => 7, commitAcks, clock, log, publishInSync });
  fanout.add(replication);
  const barrier = new CommitBarrier(fanout, ['PutStart', 'PutEnd', 'Remove']);
  barrier.add(replication);
  // The RPC listener's part: the first 4 bytes pick the protocol.
  const server = createServer((socket) => {
    socket.once('data', (head: Buffer) => {
      socket.pause();
      if (head.subarray(0, 4).equals(REPLICATION_MAGIC)) replication.accept(socket, head.subarray(4));
      else socket.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = `127.0.0.1:${(server.address() as { port: number }).port}`;
  cleanups.push(() => {
    replication.closeAll();
    server.close();
  });
  return { core, fanout, barrier, replication, server, address };
}

function follow(address: string): ReplicationFollower {
  const f = new ReplicationFollower({ leader: () => address, self: () => 'me:1', clock, log });
  f.start();
  cleanups.push(() => f.stop());
  return f;
}

function fill(core: MasterCore, n: number, prefix: string): void {
  if (core.exportSegments().length === 0) {
    core.mountSegment(mountReq('a', 64 * MiB, 'ca', 0x1000_0000, 'a:1', 5), now);
    core.mountSegment(mountReq('b', 64 * MiB, 'cb', 0x2000_0000, 'b:1', 6), now);
  }
  for (let i = 0; i < n; i++) putObject(core, `${prefix}${i}`, [500 + i, 9], now++, { replica_num: 1 + (i % 2) });
  for (let i = 0; i < n; i += 5) core.remove({ key: `${prefix}${i}`, force: false }, now);
}

/** Resolves once every change so far is acknowledged by the synced standbys (a commit's wait). */
async function allAcked(l: Leader): Promise<void> {
  const before = l.fanout.seq - 1;
  await l.barrier.settle(1, 'ok', Math.max(0, before));
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
}

describe('standbys following the leader', () => {
  it("a standby that connects while the leader works ends with exactly the leader's state", async () => {
    const l = await leader();
    fill(l.core, 3000, 'old-'); // walked in several steps
    const f = follow(l.address);
    // Changes while the standby catches up: new objects, removals of walked and unwalked ones.
    for (let round = 0; !f.synced; round++) {
      fill(l.core, 20, `r${round}-`);
      l.core.remove({ key: `old-${(round * 37) % 3000}`, force: false }, now);
      await turn();
    }
    fill(l.core, 50, 'after-');
    await allAcked(l);
    const image = f.stop()!;
    expect(image).toBeDefined();
    expect(canonical(image.toState(now))).toEqual(canonical(l.core.exportState(now)));
    // The image goes into a new core as a new leader's state.
    const next = makeCore({ clientTtlMs: 60_000 });
    next.importState(image.toState(now), now);
    expect(canonical(next.exportState(now))).toEqual(canonical(l.core.exportState(now)));
  });

  it('holds a commit until a synced standby has it; answers at once without standbys or with --ha_commit_acks=0', async () => {
    const l = await leader();
    fill(l.core, 5, 'k');
    await turn();
    // No standby: nothing to wait for.
    let before = l.barrier.seq;
    putObject(l.core, 'alone', 10, now);
    expect(l.barrier.settle(1, 'ok', before)).toBe('ok');

    const f = follow(l.address);
    await until(() => f.synced && l.replication.syncedCount === 1);
    before = l.barrier.seq;
    putObject(l.core, 'acked', 10, now);
    const reply = l.barrier.settle(1, 'ok', before);
    expect(reply).toBeInstanceOf(Promise);
    await reply;
    expect(f.stop()!.hasObject('acked')).toBe(true);

    const free = await leader(0);
    fill(free.core, 5, 'k');
    const g = follow(free.address);
    await until(() => g.synced && free.replication.syncedCount === 1);
    before = free.barrier.seq;
    putObject(free.core, 'unacked', 10, now);
    expect(free.barrier.settle(1, 'ok', before)).toBe('ok');
    // ... but a placement after a removal still waits for every synced standby to have the removal.
    free.core.remove({ key: 'k1', force: false }, now);
    const placed = free.barrier.settle(0, 'placed', free.barrier.seq);
    expect(placed).toBeInstanceOf(Promise);
    await placed;
  });

  it('disconnects a standby that stops acknowledging, and the leader goes on', async () => {
    const l = await leader();
    fill(l.core, 5, 'k');
    // A standby that reads the state but never acknowledges anything.
    const [host, port] = l.address.split(':');
    const mute: Socket = connect({ host: host, port: Number(port) });
    cleanups.push(() => mute.destroy());
    await once(mute, 'connect');
    mute.write(REPLICATION_MAGIC);
    mute.pause(); // it never reads (nor acknowledges) until the end
    await until(() => l.replication.syncedCount === 1);
    const before = l.barrier.seq;
    putObject(l.core, 'c', 10, now);
    await expect(l.barrier.settle(1, 'ok', before)).resolves.toBe('ok'); // after ACK_TIMEOUT_MS
    expect(l.replication.connected).toBe(0);
    // Its stream ends with a reset, so a standby waking up drops the image it can no longer trust.
    const frames: LeaderMessage__Output[] = [];
    const reader = new FrameReader((b) => frames.push(decodeWith<LeaderMessage__Output>(stateCodec('LeaderMessage'), b)));
    mute.removeAllListeners('data');
    mute.on('data', (d: Buffer) => reader.push(d));
    const ended = once(mute, 'end');
    mute.resume();
    await ended;
    expect(frames[frames.length - 1]).toMatchObject({ reset: true, synced: false, changes: [] });
  });

  it('records the streams placements wait for: a standby counts once recorded; a dropped one holds placements until the record without it is written', async () => {
    const written: InSyncRecord[] = [];
    const held: (() => void)[] = [];
    let blocking = false;
    const publish = async (r: InSyncRecord): Promise<void> => {
      written.push({ epoch: r.epoch, members: [...r.members] });
      if (blocking) await new Promise<void>((resolve) => held.push(resolve));
    };
    const l = await leader(1, publish);
    await l.replication.beginTerm(7);
    expect(written).toEqual([{ epoch: 7, members: [] }]);
    fill(l.core, 5, 'k');
    blocking = true;
    const f = follow(l.address);
    await until(() => written.length === 2);
    expect(written[1].members).toHaveLength(1);
    await until(() => f.synced);
    expect(l.replication.syncedCount).toBe(0); // not counted before the record names it
    blocking = false;
    held.shift()!();
    await until(() => l.replication.syncedCount === 1);
    expect(f.position()).toMatchObject({ epoch: 7, session: written[1].members[0] });

    // The standby goes away: a placement after a removal waits until the record without it is written.
    blocking = true;
    f.stop();
    await until(() => l.replication.connected === 0 && written.length === 3);
    expect(written[2]).toEqual({ epoch: 7, members: [] });
    l.core.remove({ key: 'k1', force: false }, now);
    const placed = l.barrier.settle(0, 'placed', l.barrier.seq);
    expect(placed).toBeInstanceOf(Promise);
    let done = false;
    void Promise.resolve(placed).then(() => (done = true));
    await turn();
    expect(done).toBe(false);
    held.shift()!();
    await expect(placed).resolves.toBe('placed');
  });

  it('a reply still waiting when leadership ends is not acknowledged', async () => {
    const l = await leader(1);
    fill(l.core, 5, 'k');
    const [host, port] = l.address.split(':');
    const mute: Socket = connect({ host: host, port: Number(port) });
    cleanups.push(() => mute.destroy());
    await once(mute, 'connect');
    mute.write(REPLICATION_MAGIC);
    mute.pause();
    await until(() => l.replication.syncedCount === 1);
    const before = l.barrier.seq;
    putObject(l.core, 'c', 10, now);
    const reply = l.barrier.settle(1, { status_code: 0 }, before);
    l.replication.closeAll();
    await expect(reply).resolves.toEqual({ status_code: -2 });
  });
});
