// Re-replication (docs/integrity.md): an object that lost replicas when a segment went away gets
// them back. The master does not move bytes; it places a new replica and asks a client that can
// copy (it said so in its Ping) to read a complete replica and write it to the new placement,
// then to report with ReplicaCopied. Only then does the new replica join the object.
//
// A copy is judged when it is reported, not trusted: if the object was removed, rewritten (an
// upsert) or lost the replica being read meanwhile, the copy is stale and its space is freed (the
// bytes read may have been overwritten by another object's write). A copy that fails or is never
// reported may still have bytes on the way to its target, so its space is quarantined until the
// target's owner fences the copy's write generation, like any write given up (write-fence.ts).
//
// The same copies serve other parts (copy and move tasks, task-path.ts): a *directed* copy puts
// the new replica on a named segment and reports its outcome once, with a code, to `settled`:
// OK once the replica joined, else why not (the asker decides whether to try again).
//
// The disk tier (disk-tier.ts) places its targets itself (an SSD segment to offload to, memory to
// promote to) and starts such a copy with `directPlaced`; the outcome is judged by the same rules
// and told back to it (`placedEnded`).
import { ErrorCode } from '../../common/error-code.js';
import type { ReplicaCopy__Output } from '../../proto/gen/store/ReplicaCopy.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { HANDLE_FIELDS, ObjectMeta } from './object-meta.js';
import type { ObjectTable } from './object-table.js';
import { freeHandles, memoryReplicaCount, quarantineHandles } from './replica-placement.js';
import type { ReplicaPlacer } from './replica-placer.js';
import { replicaList } from './replica-capture.js';
import type { SegmentRegistry } from './segment-registry.js';

/** A copy not reported within this long is given up (its space quarantined, the object queued again). */
export const COPY_TIMEOUT_MS = 30_000;
/** Copies assigned and not yet reported, across all clients. */
export const COPIES_IN_FLIGHT_MAX = 512;
/** Copies handed to one client per Ping. */
export const COPIES_PER_PING = 16;
/** Failed copies of one object before it is left with the replicas it has. */
export const COPY_ATTEMPTS = 5;
/** Objects looked at per Ping (the rest wait for the next): a Ping stays O(1). */
const SCAN_PER_PING = 256;

/** Why a copy is made: a lost replica restored or a task's (this file), or one the disk tier places (disk-tier.ts). */
export type CopyPurpose = 'restore' | 'offload' | 'promote';

/** A disk-tier copy ended: `meta` is the object the new replica joined, undefined when it did not join. */
export type DirectedCopyEnd = (purpose: CopyPurpose, key: string, meta: ObjectMeta | undefined) => void;

interface Want {
  /** Memory replicas the object had before it lost some (a DISK replica lost is the disk tier's to make again). */
  replicas: number;
  failures: number;
}

interface Copy {
  id: number;
  key: string;
  /** The object when the copy was assigned (compared by identity when it is reported). */
  meta: ObjectMeta;
  /** The new replica's handles (HANDLE_FIELDS per slice), allocated and in no object yet. */
  target: number[];
  gen: number;
  clientId: string;
  deadline: number;
  /** The object changed since: the copy is not kept whatever its outcome. */
  stale: boolean;
  /** A directed copy's tag (0: re-replication's own). */
  tag: number;
  /** 'restore' for re-replication's and tasks' copies; the disk tier's otherwise. */
  purpose: CopyPurpose;
}

/** A copy asked for by another part: a replica of `key` on segment `segmentId` (see `direct`). */
interface Directed {
  key: string;
  segmentId: number;
}

export interface ReReplicationStats {
  /** Objects with fewer replicas than they had (copies in flight included). */
  underReplicated: number;
  /** Copies assigned and not yet reported, directed ones (tasks) included. */
  copiesInFlight: number;
  /** Re-replication's own copies that joined, and that failed (a task counts its directed copies). */
  copied: number;
  failed: number;
  /** Objects left short after COPY_ATTEMPTS failures. */
  abandoned: number;
}

export class ReReplicator {
  private readonly wants = new Map<string, Want>();
  private readonly copies = new Map<number, Copy>();
  private readonly byKey = new Map<string, Copy>();
  /** Directed copies not assigned yet, by tag, in the order asked. */
  private readonly directed = new Map<number, Directed>();
  private nextId: number;
  private copied = 0;
  private failed = 0;
  private abandoned = 0;
  /** The record `describe` fills for each replica it describes. */
  private readonly scratch = ObjectMeta.create([], 1, 0, 0, 0);

  /**
   * `idBase`: copy ids start there. A process passes its view version scaled up, so a late report
   * of a copy assigned by an earlier master names no copy of this one.
   */
  constructor(
    private readonly objects: ObjectTable,
    private readonly segments: SegmentRegistry,
    private readonly placer: ReplicaPlacer,
    idBase = 1,
    /** A replica joined the object (the core reports the change, change-sink.ts). */
    private readonly added: (meta: ObjectMeta) => void = () => {},
    /** A directed copy's outcome: OK (the replica joined) or the code of why not. */
    private readonly settled: (tag: number, code: number, now: number) => void = () => {},
    /** A copy started by `directPlaced` ended (joined or not). */
    private readonly placedEnded: DirectedCopyEnd = () => {},
    /** Copies wait for any copier (a lost replica, a directed copy): the core tells the copiers (copier-roster.ts). */
    private readonly queued: () => void = () => {},
  ) {
    this.nextId = idBase;
  }

  /** The object lost memory replicas: it had `replicas` of them and should have them again. */
  lost(key: string, replicas: number): void {
    const w = this.wants.get(key);
    if (w === undefined) this.wants.set(key, { replicas, failures: 0 });
    else w.replicas = Math.max(w.replicas, replicas);
    this.queued();
  }

  /** The object's replicas changed: a copy of it in flight is stale. */
  invalidate(key: string): void {
    const c = this.byKey.get(key);
    if (c !== undefined) c.stale = true;
  }

  /** The object was removed or rewritten: a copy in flight is stale, and it is not re-replicated. */
  forget(key: string): void {
    this.invalidate(key);
    this.wants.delete(key);
  }

  /**
   * Asks for a replica of `key` on segment `segmentId`, made by the next client that can copy;
   * `settled(tag, ...)` is called once with the outcome. Tags are the caller's (non-zero, unique).
   */
  direct(tag: number, key: string, segmentId: number): void {
    this.directed.set(tag, { key, segmentId });
    this.queued();
  }

  /** Withdraws a directed copy: not assigned any more, or (in flight) not kept and not reported. */
  cancel(tag: number): void {
    this.directed.delete(tag);
    for (const c of this.copies.values()) {
      if (c.tag !== tag) continue;
      c.stale = true;
      c.tag = -1; // reported to nobody
    }
  }

  /** The oldest generation of a copy in flight with space on the segment (write fences must not refuse it). */
  oldestGeneration(segmentId: number): number | undefined {
    let oldest: number | undefined;
    for (const c of this.copies.values()) {
      if (oldest !== undefined && c.gen >= oldest) continue;
      for (let i = 0; i < c.target.length; i += HANDLE_FIELDS) if (c.target[i] === segmentId) oldest = c.gen;
    }
    return oldest;
  }

  /**
   * Copies for a client that can make them: up to COPIES_PER_PING, within COPIES_IN_FLIGHT_MAX.
   * `gen` is the write generation their targets get.
   */
  assign(clientId: string, now: number, gen: number): ReplicaCopy__Output[] {
    let out: ReplicaCopy__Output[] | undefined = this.assignDirected(clientId, now, gen);
    let scanned = 0;
    const later: [string, Want][] = [];
    for (const [key, want] of this.wants) {
      if (this.copies.size >= COPIES_IN_FLIGHT_MAX || (out?.length ?? 0) >= COPIES_PER_PING || scanned++ >= SCAN_PER_PING) break;
      if (this.byKey.has(key)) continue;
      const meta = this.objects.get(key);
      if (meta === undefined || memoryReplicaCount(this.segments, meta) >= want.replicas) {
        this.wants.delete(key);
        continue;
      }
      const copy = meta.complete ? this.start(key, meta, clientId, now, gen) : undefined;
      if (copy === undefined) {
        // Not now (a write in flight, no readable replica, no room): to the back of the queue.
        this.wants.delete(key);
        later.push([key, want]);
        continue;
      }
      (out ??= []).push(copy);
    }
    for (const [key, want] of later) this.wants.set(key, want);
    return out ?? [];
  }

  /** Places the new replica of `meta` and describes the copy, or undefined when it cannot be made now. */
  private start(key: string, meta: ObjectMeta, clientId: string, now: number, gen: number): ReplicaCopy__Output | undefined {
    const h = meta.h;
    const slices = meta.slices;
    const source = this.readableReplica(h, slices, now);
    if (source < 0) return undefined;
    // A slice's replicas are on distinct segments; different slices may share one.
    const excluded: Set<number>[] = [];
    for (let j = 0; j < slices; j++) excluded.push(new Set());
    for (let k = 0; k < h.length / HANDLE_FIELDS; k++) excluded[k % slices].add(h[k * HANDLE_FIELDS]);
    if (this.placer.place(meta.sliceLengths(), 1, [], excluded) !== ErrorCode.OK) return undefined;
    return this.launch(key, meta, source, this.placer.handles(), clientId, now, gen, 0);
  }

  /** Directed copies for this client, before re-replication's own (a task waits on them); the rest wait for the next Ping. */
  private assignDirected(clientId: string, now: number, gen: number): ReplicaCopy__Output[] | undefined {
    let out: ReplicaCopy__Output[] | undefined;
    let scanned = 0;
    const later: number[] = [];
    for (const [tag, d] of this.directed) {
      if (this.copies.size >= COPIES_IN_FLIGHT_MAX || (out?.length ?? 0) >= COPIES_PER_PING || scanned++ >= SCAN_PER_PING) break;
      const meta = this.objects.get(d.key);
      const seg = this.segments.byId(d.segmentId);
      let code: number | undefined;
      if (meta === undefined) code = ErrorCode.OBJECT_NOT_FOUND;
      else if (seg === undefined || seg.status !== 'MOUNTED') code = ErrorCode.SEGMENT_NOT_FOUND;
      else if (meta.hasHandleOn(d.segmentId)) code = ErrorCode.OK; // there already (a copy of re-replication, an earlier attempt)
      if (code !== undefined) {
        this.directed.delete(tag);
        this.settled(tag, code, now);
        continue;
      }
      const source = this.byKey.has(d.key) || !meta!.complete || seg!.suspectUntil > now ? -1 : this.readableReplica(meta!.h, meta!.slices, now);
      if (source < 0) {
        // Not now (a copy of the object or a write on it in flight, an unreachable target, no readable replica): to the back.
        later.push(tag);
        continue;
      }
      this.directed.delete(tag);
      const target = this.allocateOn(d.segmentId, meta!.sliceLengths());
      if (target === undefined) {
        this.settled(tag, ErrorCode.NO_AVAILABLE_HANDLE, now);
        continue;
      }
      (out ??= []).push(this.launch(d.key, meta!, source, target, clientId, now, gen, tag));
    }
    // (A `settled` above may have withdrawn some of them meanwhile: those are gone from the map.)
    for (const tag of later) {
      const d = this.directed.get(tag);
      if (d === undefined) continue;
      this.directed.delete(tag);
      this.directed.set(tag, d);
    }
    return out;
  }

  /** One replica's handles with every slice on segment `segmentId`, or undefined (nothing left allocated) when it lacks room. */
  private allocateOn(segmentId: number, lengths: readonly number[]): number[] | undefined {
    const allocator = this.segments.byId(segmentId)!.allocator;
    const h: number[] = [];
    for (const length of lengths) {
      const got = allocator.allocate(length);
      if (got === null) {
        for (let i = 1; i < h.length; i += HANDLE_FIELDS) allocator.freeBlock(h[i]);
        return undefined;
      }
      h.push(segmentId, got.block, length);
    }
    return h;
  }

  /**
   * A copy the disk tier directs: the first readable replica of `meta` to `target` (allocated by
   * the caller, in no object yet; the copy owns it from here). Undefined, nothing taken, when it
   * cannot start now (a copy of the key in flight, too many copies, no readable replica).
   */
  directPlaced(purpose: CopyPurpose, key: string, meta: ObjectMeta, target: number[], clientId: string, now: number, gen: number): ReplicaCopy__Output | undefined {
    if (this.byKey.has(key) || this.copies.size >= COPIES_IN_FLIGHT_MAX || !meta.complete) return undefined;
    const source = this.readableReplica(meta.h, meta.slices, now);
    if (source < 0) return undefined;
    return this.launch(key, meta, source, target, clientId, now, gen, 0, purpose);
  }

  /** Records a copy of replica `source` of `meta` to `target` and describes it for the copier. */
  private launch(
    key: string,
    meta: ObjectMeta,
    source: number,
    target: number[],
    clientId: string,
    now: number,
    gen: number,
    tag: number,
    purpose: CopyPurpose = 'restore',
  ): ReplicaCopy__Output {
    const h = meta.h;
    const slices = meta.slices;
    const copy: Copy = { id: this.nextId++, key, meta, target, gen, clientId, deadline: now + COPY_TIMEOUT_MS, stale: false, tag, purpose };
    this.copies.set(copy.id, copy);
    this.byKey.set(key, copy);
    const stride = slices * HANDLE_FIELDS;
    return {
      copy_id: copy.id,
      key,
      source: this.describe(h.slice(source * stride, (source + 1) * stride), slices, meta.flags, ReplicaStatus.COMPLETE, 0),
      target: this.describe(target, slices, meta.flags, ReplicaStatus.INITIALIZED, gen),
      slice_checksums: meta.checksums,
    };
  }

  /** The first replica whose segments are all mounted and not suspect, or -1. */
  private readableReplica(h: readonly number[], slices: number, now: number): number {
    const stride = slices * HANDLE_FIELDS;
    for (let r = 0, at = 0; at < h.length; r++, at += stride) {
      let ok = true;
      for (let i = at; i < at + stride && ok; i += HANDLE_FIELDS) {
        const seg = this.segments.byId(h[i]);
        ok = seg !== undefined && seg.status === 'MOUNTED' && !(seg.suspectUntil > now);
      }
      if (ok) return r;
    }
    return -1;
  }

  private describe(handles: number[], slices: number, flags: number, status: number, gen: number): ReplicaInfo__Output {
    // A record reused for every copy: ObjectMeta.create puts its objects straight in the old
    // generation (object-meta.ts says why), so one per replica described was old garbage, two per
    // offloaded object. The capture takes what it needs at once (replica-capture.ts).
    const one = this.scratch;
    one.h = handles;
    one.slices = slices;
    one.flags = (flags & ~0x7) | status;
    return replicaList(this.segments, one, gen)[0];
  }

  /**
   * A copier's report. `ok`: every byte is at the target; the replica joins the object unless the
   * copy went stale. Not ok: the target's space is quarantined and the object queued again (left
   * short after COPY_ATTEMPTS). Returns OBJECT_NOT_FOUND for a copy this master does not know
   * (given up already, or assigned by another master) and INVALID_PARAMS for another client's.
   */
  done(clientId: string, copyId: number, ok: boolean, now = 0): number {
    const c = this.copies.get(copyId);
    if (c === undefined) return ErrorCode.OBJECT_NOT_FOUND;
    if (c.clientId !== clientId) return ErrorCode.INVALID_PARAMS;
    this.end(c);
    if (!ok) {
      this.giveUp(c, now);
      return ErrorCode.OK;
    }
    const meta = this.objects.get(c.key);
    if (c.stale || meta !== c.meta || !meta.complete || !this.targetMounted(c.target)) {
      freeHandles(this.segments, c.target); // every byte landed: nothing can still arrive
      const why = meta === undefined ? ErrorCode.OBJECT_NOT_FOUND : !this.targetMounted(c.target) ? ErrorCode.SEGMENT_NOT_FOUND : ErrorCode.REPLICA_IS_NOT_READY;
      if (c.tag > 0) this.settled(c.tag, why, now);
      if (c.purpose !== 'restore') this.placedEnded(c.purpose, c.key, undefined);
      return ErrorCode.OK;
    }
    meta.h = meta.h.concat(c.target);
    this.added(meta);
    if (c.purpose !== 'restore') {
      this.placedEnded(c.purpose, c.key, meta);
      return ErrorCode.OK;
    }
    if (c.tag === 0)
      this.copied++; // (a task counts its own)
    else if (c.tag > 0) this.settled(c.tag, ErrorCode.OK, now);
    const want = this.wants.get(c.key);
    if (want !== undefined && memoryReplicaCount(this.segments, meta) >= want.replicas) this.wants.delete(c.key);
    return ErrorCode.OK;
  }

  /** Gives up copies not reported in time. */
  expire(now: number): void {
    for (const c of this.copies.values()) {
      if (c.deadline > now) continue;
      this.end(c);
      this.giveUp(c, now);
    }
  }

  /** Whether copies wait to be handed out (lost replicas, directed copies). */
  get waiting(): boolean {
    return this.wants.size > 0 || this.directed.size > 0;
  }

  stats(): ReReplicationStats {
    return { underReplicated: this.wants.size, copiesInFlight: this.copies.size, copied: this.copied, failed: this.failed, abandoned: this.abandoned };
  }

  private end(c: Copy): void {
    this.copies.delete(c.id);
    if (this.byKey.get(c.key) === c) this.byKey.delete(c.key);
  }

  /** A failed or lost copy: its bytes may still be on the way, so its space waits for a fence. */
  private giveUp(c: Copy, now: number): void {
    quarantineHandles(this.segments, c.target, c.gen);
    if (c.purpose !== 'restore') {
      this.failed++;
      this.placedEnded(c.purpose, c.key, undefined);
      return;
    }
    if (c.tag !== 0) {
      if (c.tag > 0) this.settled(c.tag, ErrorCode.TRANSFER_FAILED, now);
      return; // a directed copy: its asker decides on another attempt
    }
    this.failed++;
    const want = this.wants.get(c.key);
    if (want !== undefined && ++want.failures >= COPY_ATTEMPTS) {
      this.wants.delete(c.key);
      this.abandoned++;
    }
  }

  /** Whether every segment of the target is still mounted (one unmounted meanwhile took its space with it). */
  private targetMounted(target: readonly number[]): boolean {
    for (let i = 0; i < target.length; i += HANDLE_FIELDS) if (this.segments.byId(target[i])?.status !== 'MOUNTED') return false;
    return true;
  }
}
