// Who is in the cluster, as the core sees it: clients' liveness (Ping, with the write fences and
// re-replication copies it carries back), their segments (MountSegment, UnmountSegment and the
// drain that removes a segment's replicas), and the sweep: silent clients dropped, grace periods
// ended, eviction debt paid.
import { ErrorCode } from '../../common/error-code.js';
import { MAX_SEGMENT_NAME_BYTES, segmentNameProblem } from '../../common/key-rules.js';
import type { MountSegmentRequest__Output } from '../../proto/gen/store/MountSegmentRequest.js';
import type { MountSegmentResponse__Output } from '../../proto/gen/store/MountSegmentResponse.js';
import type { PingRequest__Output } from '../../proto/gen/store/PingRequest.js';
import type { PingResponse__Output } from '../../proto/gen/store/PingResponse.js';
import type { BatchReplicaCopiedRequest__Output } from '../../proto/gen/store/BatchReplicaCopiedRequest.js';
import type { BatchReplicaCopiedResponse__Output } from '../../proto/gen/store/BatchReplicaCopiedResponse.js';
import type { CopyOutcome__Output } from '../../proto/gen/store/CopyOutcome.js';
import type { ReplicaCopiedRequest__Output } from '../../proto/gen/store/ReplicaCopiedRequest.js';
import type { ReplicaCopiedResponse__Output } from '../../proto/gen/store/ReplicaCopiedResponse.js';
import type { ReplicaCopy__Output } from '../../proto/gen/store/ReplicaCopy.js';
import type { SegmentFence__Output } from '../../proto/gen/store/SegmentFence.js';
import type { UnmountSegmentRequest__Output } from '../../proto/gen/store/UnmountSegmentRequest.js';
import type { UnmountSegmentResponse__Output } from '../../proto/gen/store/UnmountSegmentResponse.js';
import { PreviousPlacement, type CoreShared } from './core-shared.js';
import { SWEEP_EVICTION_BATCH } from './eviction.js';
import type { EvictionResult } from './eviction-round.js';
import type { SweepReport } from './master-core-config.js';
import { handlesOn, writeGeneration, type ObjectMeta } from './object-meta.js';
import type { ObjectLifecycle } from './object-lifecycle.js';
import { dropReplicasOn, memoryReplicaCount } from './replica-placement.js';
import { isUuid, randomUuid } from './rng.js';
import type { Segment } from './segment-registry.js';
import { segmentRecordOf } from './state-records.js';
import type { WritePlacement } from './write-placement.js';

/** Longest strings a MountSegment may carry (characters; the segment name in UTF-8 bytes, see common/key-rules.ts). */
export const MOUNT_LIMITS = { segment_name: MAX_SEGMENT_NAME_BYTES, client_id: 256, te_endpoint: 512, protocol: 32 } as const;

/** A Ping as the core reads it: `copy_push` is the shell's (the connection that takes notices). */
export type PingArgs = Omit<PingRequest__Output, 'copy_push'> & { copy_push?: boolean };

/** Fences of a ping reply with nothing to fence (shared: replies are read-only). */
const NO_FENCES = Object.freeze([]) as unknown as SegmentFence__Output[];
const NO_COPIES = Object.freeze([]) as unknown as ReplicaCopy__Output[];

export class Membership {
  constructor(
    private readonly s: CoreShared,
    private readonly life: ObjectLifecycle,
    private readonly placement: WritePlacement,
  ) {}

  ping(req: PingArgs, now: number): PingResponse__Output {
    const s = this.s;
    const view_version = s.config.viewVersion;
    if (typeof req.client_id !== 'string' || req.client_id.length === 0) {
      return { status_code: ErrorCode.INVALID_PARAMS, view_version, need_remount: false, fences: [], copies: [], file_tier_root: '', copy_push: false, more_copies: false };
    }
    // Clients learn the file tier's directory from every reply (docs/tiers.md "File tier"); '' when off.
    const file_tier_root = s.files.root;
    // Whether copy notices are sent (docs/master-channel.md "Notices"): a client that hears none polls.
    const copy_push = s.copiers.pushing;
    if (!s.clients.has(req.client_id) || this.ownsRestored(req.client_id))
      return { status_code: ErrorCode.OK, view_version, need_remount: true, fences: [], copies: [], file_tier_root, copy_push, more_copies: false };
    s.clients.touch(req.client_id, now);
    for (const ack of req.fence_acks ?? []) {
      const seg = s.segments.byName(ack.segment_name);
      if (seg === undefined || seg.clientId !== req.client_id) continue;
      for (const block of seg.fence.ack(Number(ack.version))) seg.allocator.freeBlock(block);
    }
    const fences = this.fencesOf(req.client_id, now);
    let copies = NO_COPIES;
    if (req.can_copy === true && !s.heap.full) {
      s.copiers.offer(req.client_id, now); // takes what waits now: may be told again (copier-roster.ts)
      copies = s.rereplicator.assign(req.client_id, now, now + 1);
      const directed: ReplicaCopy__Output[] = [];
      s.disk.assign(req.client_id, now, now + 1, directed); // offloads and promotions (disk-tier.ts)
      if (directed.length > 0) copies = copies.concat(directed);
    }
    // A copier that heard of these copies by a notice need not ask again when done unless more wait.
    const more_copies = s.rereplicator.waiting || s.disk.waiting;
    return { status_code: ErrorCode.OK, view_version, need_remount: false, fences, copies, file_tier_root, copy_push, more_copies };
  }

  /**
   * A copier reports a copy it was given in a Ping (re-replication.ts). Not ok: the segments it
   * names as unreachable get no new placement for a while, like a writer's (PutRevoke).
   */
  replicaCopied(req: ReplicaCopiedRequest__Output, now: number): ReplicaCopiedResponse__Output {
    if (typeof req.client_id !== 'string' || req.client_id.length === 0) return { status_code: ErrorCode.INVALID_PARAMS };
    return { status_code: this.copied(req.client_id, req, now) };
  }

  /** Many copies reported at once (a copier's batch): each judged as by replicaCopied, in order. */
  batchReplicaCopied(req: BatchReplicaCopiedRequest__Output, now: number): BatchReplicaCopiedResponse__Output {
    if (typeof req.client_id !== 'string' || req.client_id.length === 0) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const results: number[] = [];
    for (const o of req.outcomes ?? []) results.push(this.copied(req.client_id, o, now));
    return { status_code: ErrorCode.OK, results };
  }

  private copied(clientId: string, o: CopyOutcome__Output, now: number): number {
    if (!o.ok) this.placement.suspect(o.failed_segments, now);
    return this.s.rereplicator.done(clientId, Number(o.copy_id), o.ok === true, now);
  }

  mountSegment(req: MountSegmentRequest__Output, now: number): MountSegmentResponse__Output {
    const s = this.s;
    const fail = (status_code: number): MountSegmentResponse__Output => ({ status_code, segment_id: '' });
    const { segment_name: name, client_id: clientId, buffer, size } = req;
    // the key alphabet (common/key-rules.ts): a newline would split /get_all_segments' lines
    if (segmentNameProblem(name) !== undefined) return fail(ErrorCode.INVALID_PARAMS);
    if (typeof clientId !== 'string' || clientId.length === 0 || clientId.length > MOUNT_LIMITS.client_id) return fail(ErrorCode.INVALID_PARAMS);
    // Every replica in every reply repeats the segment's name and endpoint: bounded, so a reply is too.
    if ((req.te_endpoint ?? '').length > MOUNT_LIMITS.te_endpoint || (req.protocol ?? '').length > MOUNT_LIMITS.protocol) return fail(ErrorCode.INVALID_PARAMS);
    // repeated in replies: a string that is not Unicode text (bytes that were not UTF-8) cannot be encoded again
    if (!clientId.isWellFormed() || !(req.te_endpoint ?? '').isWellFormed() || !(req.protocol ?? '').isWellFormed()) return fail(ErrorCode.INVALID_PARAMS);
    if (!Number.isSafeInteger(size) || size <= 0) return fail(ErrorCode.INVALID_PARAMS);
    if (!Number.isSafeInteger(buffer) || buffer < 0 || !Number.isSafeInteger(buffer + size)) return fail(ErrorCode.INVALID_PARAMS);
    if (req.segment_id && !isUuid(req.segment_id)) return fail(ErrorCode.INVALID_PARAMS);
    const incarnation = Number(req.incarnation ?? 0);
    if (!Number.isSafeInteger(incarnation) || incarnation < 0) return fail(ErrorCode.INVALID_PARAMS);
    const te = req.te_endpoint || name; // without a transfer-engine endpoint the segment name is the endpoint (P2P handshake naming)
    const protocol = req.protocol || 'tcp';
    const restored = s.segments.byName(name);
    if (restored !== undefined && restored.status === 'RESTORED') {
      // Its owner is back (docs/ha.md): the same memory under a new registration serves its objects again.
      if (restored.clientId === clientId && restored.baseAddress === buffer && restored.size === size && (!req.segment_id || req.segment_id.toLowerCase() === restored.segmentId)) {
        const seg = s.segments.revive(restored, te, protocol, incarnation);
        s.clients.touch(clientId, now);
        s.sink?.mounted(segmentRecordOf(seg));
        return { status_code: ErrorCode.OK, segment_id: seg.segmentId };
      }
      this.finishUnmount(restored); // another client or other memory under the name: the old objects go first
    }
    if (s.segments.byName(name) !== undefined) return fail(ErrorCode.SEGMENT_ALREADY_EXISTS);
    if (req.segment_id && s.segments.hasSegmentId(req.segment_id.toLowerCase())) return fail(ErrorCode.SEGMENT_ALREADY_EXISTS);
    let segmentId = req.segment_id ? req.segment_id.toLowerCase() : randomUuid(s.rng);
    while (s.segments.hasSegmentId(segmentId)) segmentId = randomUuid(s.rng);
    const seg = s.segments.add(name, segmentId, clientId, buffer, size, te, protocol, incarnation);
    s.clients.touch(clientId, now);
    s.sink?.mounted(segmentRecordOf(seg));
    return { status_code: ErrorCode.OK, segment_id: segmentId };
  }

  unmountSegment(req: UnmountSegmentRequest__Output, now: number): UnmountSegmentResponse__Output {
    const s = this.s;
    if (typeof req.segment_name !== 'string' || req.segment_name.length === 0) return { status_code: ErrorCode.INVALID_PARAMS };
    const seg = s.segments.byName(req.segment_name);
    if (seg === undefined) return { status_code: segmentNameProblem(req.segment_name) === undefined ? ErrorCode.SEGMENT_NOT_FOUND : ErrorCode.INVALID_PARAMS };
    // Only the owner unmounts (an empty client id included: it used to skip this check). Without
    // authentication this is an ownership check, not a credential: client ids are listed by
    // /get_segments_detail (docs/threat-model.md).
    if (req.client_id !== seg.clientId) return { status_code: ErrorCode.INVALID_PARAMS };
    const grace = req.grace_period_seconds;
    if (!Number.isFinite(grace) || grace < 0) return { status_code: ErrorCode.INVALID_PARAMS };
    if (grace === 0 || seg.status === 'RESTORED') {
      // a RESTORED segment's objects are not served: no grace period to give readers
      this.finishUnmount(seg);
    } else {
      const at = now + grace * 1000;
      s.segments.beginUnmount(seg, seg.status === 'UNMOUNTING' ? Math.min(seg.unmountAt, at) : at);
    }
    if (s.clients.has(seg.clientId)) s.clients.touch(seg.clientId, now);
    return { status_code: ErrorCode.OK };
  }

  /**
   * Housekeeping, bounded per call: drops silent clients (unmounting their segments), finishes
   * unmounts whose grace period ended, and evicts at most SWEEP_EVICTION_BATCH objects: the debt of
   * an eviction round already begun, or a new round when usage reached the high watermark.
   */
  sweep(now: number): SweepReport {
    const s = this.s;
    const report: SweepReport = { droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: 0 };
    for (const client of s.clients.silent(now, s.config.clientTtlMs)) {
      for (const seg of [...s.segments.all()]) {
        if (seg.clientId !== client) continue;
        this.finishUnmount(seg);
        report.unmountedSegments.push(seg.name);
      }
      s.clients.delete(client);
      s.copiers.forget(client);
      report.droppedClients.push(client);
    }
    for (const seg of [...s.segments.all()]) {
      // UNMOUNTING: its grace period ended. RESTORED: its owner did not mount it again within client_ttl.
      if ((seg.status === 'UNMOUNTING' || seg.status === 'RESTORED') && seg.unmountAt <= now) {
        this.finishUnmount(seg);
        report.unmountedSegments.push(seg.name);
      }
    }
    s.segments.clearSuspects(now);
    s.rereplicator.expire(now);
    s.disk.sweep(now);
    s.leases.active(now); // lets expired lease entries go
    if (s.eviction.debt > 0 || this.usageRatio() >= s.config.evictionHighWatermarkRatio) {
      const e = this.evict(now, SWEEP_EVICTION_BATCH);
      report.evictedObjects = e.evicted;
      report.releasedZombies = e.released;
    }
    report.underReplicated = s.rereplicator.stats().underReplicated;
    return report;
  }

  /**
   * One bounded eviction step. Without a round in progress, starts one whose target is
   * evictionRatio of the objects. Then releases zombie writes (begun more than
   * putStartReleaseTimeout ago) and evicts candidates in spec order, at most `budget` objects in
   * all; zombies count toward the target. What is left of the target stays `pending`; a round
   * ends early when no candidate is left.
   */
  evict(now: number, budget: number = SWEEP_EVICTION_BATCH): EvictionResult {
    return this.s.eviction.step(now, budget);
  }

  /** Whether the client owns a RESTORED segment (it must mount it again: docs/ha.md). */
  private ownsRestored(clientId: string): boolean {
    const segments = this.s.segments;
    if (segments.restored === 0) return false;
    for (const seg of segments.all()) if (seg.status === 'RESTORED' && seg.clientId === clientId) return true;
    return false;
  }

  /** The write fences the owner of these segments has to install (write-fence.ts). */
  private fencesOf(clientId: string, now: number): SegmentFence__Output[] {
    let out: SegmentFence__Output[] | undefined;
    for (const seg of this.s.segments.all()) {
      if (seg.clientId !== clientId || !seg.fence.pending) continue;
      const f = seg.fence.fence(this.oldestOpenGeneration(seg.id, now));
      (out ??= []).push({ segment_name: seg.name, version: f.version, below: f.below, revoked: f.revoked });
    }
    return out ?? NO_FENCES;
  }

  /** The generation of the oldest unfinished write with space on the segment, else the next one to be handed out. */
  private oldestOpenGeneration(segmentId: number, now: number): number {
    let oldest = now + 1;
    for (let m = this.s.inFlight.head; m !== null; m = m.next) {
      if (m.hasHandleOn(segmentId)) {
        oldest = writeGeneration(m);
        break;
      }
    }
    const copy = this.s.rereplicator.oldestGeneration(segmentId);
    return copy !== undefined && copy < oldest ? copy : oldest;
  }

  private usageRatio(): number {
    let cap = 0;
    let used = 0;
    for (const seg of this.s.segments.allocatable()) {
      cap += seg.allocator.capacity;
      used += seg.allocator.used;
    }
    return cap === 0 ? 0 : used / cap;
  }

  /**
   * Unmounts now: writes in flight with space on the segment are revoked, every replica on it is
   * removed, objects left without a replica are deleted. One pass over all objects (an unmount is
   * rare; keeping a per-segment index instead cost every put a set insertion and stalls of 100+ ms
   * while those sets grew).
   */
  private finishUnmount(seg: Segment): void {
    const s = this.s;
    const life = this.life;
    const id = seg.id;
    const touched: ObjectMeta[] = [];
    for (const [, meta] of s.objects) if (meta.hasHandleOn(id)) touched.push(meta);
    for (const [key, prev] of s.previous) {
      const meta = s.objects.get(key);
      if (meta !== undefined && !meta.hasHandleOn(id) && handlesOn(prev.h, id)) touched.push(meta);
    }
    for (const meta of touched) {
      const key = meta.key;
      if (s.objects.get(key) !== meta) continue;
      if (!meta.complete && meta.hasHandleOn(id)) life.abortWrite(key, meta); // may restore the previous placement
      const prev = s.previous.get(key);
      if (prev !== undefined && handlesOn(prev.h, id)) {
        const kept = dropReplicasOn(s.segments, prev.h, prev.slices, id);
        if (kept.length === 0) s.previous.delete(key);
        else s.previous.set(key, new PreviousPlacement(kept, prev.slices, prev.flags));
      }
      if (meta.complete && meta.hasHandleOn(id)) {
        const memory = memoryReplicaCount(s.segments, meta);
        if (life.dropReplicas(key, meta, id) === 0) continue; // no replica left: gone
        // A lost memory replica is copied back elsewhere (re-replication.ts); a lost DISK replica
        // is offloaded again from the memory replica left, if any (disk-tier.ts).
        if (seg.disk) s.disk.lostDiskReplica(meta);
        else s.rereplicator.lost(key, memory);
      }
    }
    s.segments.delete(seg);
    s.sink?.unmounted(seg.name);
  }
}
