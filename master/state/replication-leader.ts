// The leader's side of standbys following it (docs/ha.md "Standbys"): a standby connects to the
// leader's RPC port with the magic "KVR1" (rpc-listener.ts hands the socket here) and gets
// LeaderMessages (proto/master_state.proto) in file frames (common/state-proto.ts): a reset, the
// segments and objects of the leader's core walked in bounded steps, `synced`, then every change
// as the core makes it. Changes made during the walk are sent in order with it, and records are
// whole, so the standby's image equals the leader's state once synced (the same argument as a
// snapshot followed by its change log). The standby acknowledges each message with the leader's
// change count (FollowerMessage); as a Durability (commit-barrier.ts) this class holds a commit
// until --ha_commit_acks synced standbys (or all connected, when fewer) acknowledged it, and a
// placement until every synced standby has every removal before it.
// With `publishInSync` (HA), the streams placements wait for are recorded in the election backend
// (master/ha/standby-ranking.ts): a term records none before it serves (beginTerm); a standby
// counts as synced only once its session is recorded, and a dropped one keeps holding placements
// back (it is "leaving") until the record without it is written. So a standby that stopped
// following can never be elected with an image that misses a removal whose space was reused.
import type { Socket } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import protobuf from 'protobufjs';
import type { Logger } from '../../common/logger.js';
import type { FollowerMessage__Output } from '../../proto/gen/store/FollowerMessage.js';
import { decodeWith, encodeWith, fileFrame, stateCodec } from '../../common/state-proto.js';
import type { ChangeConsumer } from './change-fanout.js';
import { NotDurableError, type Durability } from './commit-barrier.js';
import type { InSyncRecord } from '../ha/standby-ranking.js';
import { FrameReader } from './frame-reader.js';
import type { SnapshotSource } from './snapshot-writer.js';

export const REPLICATION_MAGIC = Buffer.from('KVR1', 'latin1');
/** A synced standby that leaves a change unacknowledged this long is disconnected (a hung standby must not stop the leader). */
export const ACK_TIMEOUT_MS = 2000;

const changeCodec = stateCodec('ChangeRecord');
const followerCodec = stateCodec('FollowerMessage');

/** LeaderMessage field numbers (proto/master_state.proto): built by hand around encoded changes. */
function leaderMessage(seq: number, changes: readonly Uint8Array[], extra: { reset?: boolean; synced?: boolean; viewVersion?: number; session?: string } = {}): Buffer {
  const w = protobuf.Writer.create();
  w.uint32((1 << 3) | 0).uint64(seq);
  if (extra.reset) w.uint32((2 << 3) | 0).bool(true);
  if (extra.synced) w.uint32((3 << 3) | 0).bool(true);
  for (const c of changes) w.uint32((4 << 3) | 2).bytes(c);
  if (extra.viewVersion !== undefined) w.uint32((5 << 3) | 0).uint64(extra.viewVersion);
  if (extra.session !== undefined) w.uint32((6 << 3) | 2).string(extra.session);
  return fileFrame(w.finish());
}

interface Follower {
  socket: Socket;
  synced: boolean;
  acked: number;
  /** Changes handed over since the last flush. */
  pending: Uint8Array[];
  pendingSeq: number;
  /** This stream's name in the in-sync record. */
  session: string;
  /** Its session is (being) recorded as in sync. */
  member: boolean;
}

interface Waiter {
  seq: number;
  /** Acks needed from synced followers (all of them: Infinity). */
  acks: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

export interface ReplicationLeaderOptions {
  /** The serving core, or undefined while this master does not lead. */
  source: () => SnapshotSource | undefined;
  /** The leader's change count (the fanout's). */
  seq: () => number;
  viewVersion: () => number;
  /** --ha_commit_acks: synced standbys a commit waits for (0: none). */
  commitAcks: number;
  clock: () => number;
  log: Logger;
  /** Writes the in-sync record to the election backend (HA); absent: nothing is recorded. */
  publishInSync?: (r: InSyncRecord) => Promise<void>;
}

/** A failed in-sync record write is tried again this often while this master leads. */
const RECORD_RETRY_MS = 200;

export class ReplicationLeader implements ChangeConsumer, Durability {
  private readonly followers = new Set<Follower>();
  private waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Dropped standbys still recorded as in sync: placements wait for them until the record without them is written. */
  private readonly leaving = new Set<Follower>();
  private readonly members = new Set<string>();
  private epoch = 0;
  private sessions = 0;
  private writes: Promise<void> = Promise.resolve();

  constructor(private readonly o: ReplicationLeaderOptions) {}

  /** Standbys connected (synced or catching up). */
  get connected(): number {
    return this.followers.size;
  }

  get syncedCount(): number {
    let n = 0;
    for (const f of this.followers) if (f.synced) n++;
    return n;
  }

  /** A standby's connection, after its magic; `rest` is what came after the magic. */
  accept(socket: Socket, rest: Buffer): void {
    const source = this.o.source();
    if (source === undefined) {
      socket.destroy(); // not the leader (any more): the standby looks for the leader again
      return;
    }
    const f: Follower = { socket, synced: false, acked: 0, pending: [], pendingSeq: 0, session: `${this.o.viewVersion()}.${++this.sessions}`, member: false };
    this.followers.add(f);
    const reader = new FrameReader((body) => this.onAck(f, decodeWith<FollowerMessage__Output>(followerCodec, body)));
    socket.on('data', (d: Buffer) => {
      if (!reader.push(d)) socket.destroy();
    });
    socket.on('error', () => {});
    socket.once('close', () => this.drop(f, 'disconnected'));
    if (rest.length > 0 && !reader.push(rest)) socket.destroy();
    socket.resume();
    this.o.log.info(`HA: standby ${socket.remoteAddress}:${socket.remotePort} connected; sending the state`);
    void this.catchUp(f, source);
  }

  /** A term begins (before it serves): the in-sync record names it, with no stream yet. */
  beginTerm(epoch: number): Promise<void> {
    this.epoch = epoch;
    this.members.clear();
    return this.record();
  }

  /** Drops every standby (this master stops leading); replies still waiting for them are not acknowledged. */
  closeAll(): void {
    const waiting = this.waiters;
    this.waiters = []; // first: dropping the standbys would settle them as acknowledged
    for (const w of waiting) w.reject(new NotDurableError('leadership ended before the standbys acknowledged this change'));
    for (const f of [...this.followers]) {
      f.member = false; // no record is written any more: the next term writes its own
      f.socket.destroy();
      this.drop(f, 'leadership ended');
    }
    this.members.clear();
    this.leaving.clear();
  }

  /** Writes the in-sync record as it is when the write starts (writes run one at a time, in order). */
  private record(): Promise<void> {
    const publish = this.o.publishInSync;
    if (publish === undefined) return Promise.resolve();
    const epoch = this.epoch;
    // A write queued in an earlier term (or after leadership ended) is not made at all.
    const p = this.writes.then(() => {
      if (this.epoch !== epoch || this.o.source() === undefined) throw new NotDurableError('leadership ended: in-sync record not written');
      return publish({ epoch, members: [...this.members] });
    });
    this.writes = p.catch(() => undefined);
    return p;
  }

  /** Records that a dropped standby left; placements stop waiting for it once that is written. */
  private async recordLeaving(f: Follower): Promise<void> {
    for (;;) {
      try {
        await this.record();
        break;
      } catch (e) {
        if (!this.leaving.has(f)) return; // leadership ended
        this.o.log.warn(`HA: recording that standby ${f.session} left failed (${(e as Error).message}); placements wait; trying again`);
        await new Promise((r) => setTimeout(r, RECORD_RETRY_MS).unref());
        if (!this.leaving.has(f)) return;
      }
    }
    this.leaving.delete(f);
    this.settleWaiters();
  }

  active(): boolean {
    return this.followers.size > 0;
  }

  change(bytes: Buffer, seq: number): void {
    for (const f of this.followers) {
      f.pending.push(bytes);
      f.pendingSeq = seq;
    }
  }

  flush(): void {
    for (const f of this.followers) {
      if (f.pending.length === 0) continue;
      f.socket.write(leaderMessage(f.pendingSeq, f.pending));
      f.pending = [];
    }
  }

  committed(seq: number): Promise<void> | undefined {
    const synced = this.syncedCount;
    if (this.o.commitAcks === 0 || synced === 0) return undefined;
    return this.wait(seq, Math.min(this.o.commitAcks, synced));
  }

  spaceSafe(seq: number): Promise<void> | undefined {
    if (this.syncedCount === 0 && this.leaving.size === 0) return undefined;
    return this.wait(seq, Infinity);
  }

  private wait(seq: number, acks: number): Promise<void> | undefined {
    if (this.enoughAcks(seq, acks)) return undefined;
    const p = new Promise<void>((resolve, reject) => this.waiters.push({ seq, acks, resolve, reject }));
    this.armTimeout();
    return p;
  }

  /** Disconnects synced standbys still behind the oldest wait after ACK_TIMEOUT_MS. */
  private armTimeout(): void {
    if (this.timer !== undefined) return;
    const oldest = this.waiters[0]?.seq;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const first = this.waiters[0];
      if (first === undefined) return;
      if (oldest !== undefined && first.seq <= oldest) {
        for (const f of [...this.followers]) {
          if (!f.synced || f.acked >= first.seq) continue;
          this.drop(f, `did not acknowledge change ${first.seq} within ${ACK_TIMEOUT_MS} ms: disconnected`);
          // Placements stop waiting for it, so its image goes stale: a last reset (read when it
          // wakes up, before the end of the stream) makes it drop the image rather than bring it
          // to an election. A standby that never reads it again is never elected with it either.
          f.socket.end(leaderMessage(this.o.seq(), [], { reset: true }));
          setTimeout(() => f.socket.destroy(), ACK_TIMEOUT_MS).unref();
        }
      }
      if (this.waiters.length > 0) this.armTimeout();
    }, ACK_TIMEOUT_MS);
    this.timer.unref();
  }

  private enoughAcks(seq: number, acks: number): boolean {
    // A placement also waits for dropped standbys until the record no longer names them.
    if (acks === Infinity) for (const f of this.leaving) if (f.acked < seq) return false;
    let have = 0;
    let synced = 0;
    for (const f of this.followers) {
      if (!f.synced) continue;
      synced++;
      if (f.acked >= seq) have++;
    }
    return have >= Math.min(acks, synced);
  }

  private settleWaiters(): void {
    if (this.waiters.length === 0) return;
    const left: Waiter[] = [];
    for (const w of this.waiters) {
      if (this.enoughAcks(w.seq, w.acks)) w.resolve();
      else left.push(w);
    }
    this.waiters = left;
  }

  private onAck(f: Follower, m: FollowerMessage__Output): void {
    f.acked = Math.max(f.acked, Number(m.acked_seq));
    this.settleWaiters();
  }

  private drop(f: Follower, why: string): void {
    if (!this.followers.delete(f)) return;
    this.o.log.warn(`HA: standby ${f.socket.remoteAddress}:${f.socket.remotePort} ${why}${f.synced ? '' : ' before it was synced'}`);
    if (f.member) {
      f.member = false;
      this.members.delete(f.session);
      this.leaving.add(f);
      void this.recordLeaving(f);
    }
    this.settleWaiters(); // a wait for it ends: the others decide (none left: nothing to wait for)
  }

  /** Sends the state in bounded steps; changes made meanwhile go out in order with it. */
  private async catchUp(f: Follower, source: SnapshotSource): Promise<void> {
    const { o } = this;
    const encode = (change: object): Uint8Array => encodeWith(changeCodec, change);
    f.socket.write(
      leaderMessage(
        o.seq(),
        source.exportSegments().map((s) => encode({ mounted: s })),
        { reset: true, viewVersion: o.viewVersion(), session: f.session },
      ),
    );
    const steps = source.exportObjectSteps(o.clock());
    for (let r = steps.next(o.clock()); !r.done;) {
      if (!this.followers.has(f)) {
        steps.return(undefined);
        return;
      }
      this.flush(); // changes made before this batch go first
      f.socket.write(
        leaderMessage(
          o.seq(),
          r.value.map((rec) => encode({ object: rec })),
        ),
      );
      await nextTurn();
      if (o.source() !== source) {
        steps.return(undefined);
        f.socket.destroy();
        return;
      }
      r = steps.next(o.clock());
    }
    if (!this.followers.has(f)) return;
    this.flush();
    f.socket.write(leaderMessage(o.seq(), [], { synced: true }));
    f.acked = 0;
    if (o.publishInSync !== undefined) {
      // Recorded before it counts: an acknowledgement it gives must be one an election can use.
      f.member = true;
      this.members.add(f.session);
      try {
        await this.record();
      } catch (e) {
        o.log.warn(`HA: recording standby ${f.session} as in sync failed (${(e as Error).message}): disconnected (it follows again)`);
        f.socket.destroy();
        return;
      }
      if (!this.followers.has(f)) return;
    }
    f.synced = true;
    o.log.info(`HA: standby ${f.socket.remoteAddress}:${f.socket.remotePort} synced (change ${o.seq()})`);
  }
}
