// The read path: Get, getInto and their batch forms. GetReplicaList (or a replica list cached
// under its lease, replica-cache.ts) -> the replica on an own segment first (memcpy), else an
// engine READ straight into the result when it is registered memory, else through staging -> the
// lease checked (a read that outlived it returns no data). A failed replica gives way to the next.
// A value only a DISK replica holds goes through the local hot cache when it is on (hot-cache.ts).
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import { ErrorCode } from '../common/error-code.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import { keyProblem } from '../common/key-rules.js';
import type { BufferLease } from './buffer-pool.js';
import { InvalidParamsError, LeaseExpiredError, ObjectNotFoundError, StoreError, TransferError } from './errors.js';
import { ReplicaCache } from './replica-cache.js';
import { hotCacheId, type HotCache } from './hot-cache.js';
import { leaseDeadline, orderReplicas, replicaPieces, replicaSize, withinLease, type Piece, type TransferOp } from './transfer-plan.js';
import {
  asBuffer,
  check,
  checkKey,
  getWhat,
  INLINE_READ_MAX,
  transferFailure,
  type BatchGetIntoResult,
  type BatchGetResult,
  type PathCore,
  type ResultBuffer,
} from './path-core.js';

/** The file of a reply whose object is held only by the file tier (docs/tiers.md), else undefined. */
export function fileReplicaOf(res: GetReplicaListResponse__Output): { path: string; size: number } | undefined {
  const list = res.replica_list;
  if (res.status_code !== ErrorCode.OK || list.length !== 1) return undefined;
  const r = list[0];
  return r.replica_type === ReplicaType.DISK && r.file ? { path: r.file.path, size: Number(r.file.size) } : undefined;
}

/** Replica lists the cache keeps by default (a few hundred bytes each). */
export const DEFAULT_REPLICA_CACHE_ENTRIES = 65_536;

/**
 * The replica a read came from, as a same-host dummy client needs it to read the object again
 * itself while the lease holds (client/local-replica.ts).
 */
export interface ReadSource {
  readonly replica: ReplicaInfo__Output;
  /** The slices' CRC-32C as the writer recorded them (the master's reply; empty: none). */
  readonly sums: readonly number[];
  /** Milliseconds of the read lease left when the read finished. */
  readonly leaseLeftMs: number;
}

/** Told the source of a read that succeeded. */
export type ReadObserver = (source: ReadSource) => void;

/** One object a read batch moves: its pieces, where they go, and the CRC-32C each must have. */
interface ReadTarget {
  pieces: Piece[];
  out: Buffer;
  result?: ResultBuffer;
  sums?: readonly number[];
  key?: string;
}

export class ReadPath {
  private readonly replicaCache: ReplicaCache;

  constructor(private readonly core: PathCore) {
    this.replicaCache = new ReplicaCache(core.d.replicaCacheEntries ?? DEFAULT_REPLICA_CACHE_ENTRIES);
  }

  /**
   * The object's bytes in a new Buffer. Not an async function: at 1 in flight every promise hop is
   * latency, so the common case (one replica, a small value the engine reads inline) settles in
   * the master reply's own continuation.
   */
  get(key: string): Promise<Buffer> {
    const refused = this.refusal(key);
    if (refused) return refused;
    return this.withReplicas(key, (res, start) => {
      const file = fileReplicaOf(res);
      if (file) {
        const out = this.core.allocOut(file.size).out;
        return this.readFile(file.path, key, out, res).then(() => out);
      }
      const replicas = this.readable(res, key);
      const hot = this.hotFor(key, res, replicas[0]);
      const hit = hot?.cache.get(key, hot.id);
      if (hit !== undefined) return hit;
      const result = this.core.allocOut(replicaSize(replicas[0]));
      const sums = this.expected(res, replicas[0]);
      if (this.readInline(replicas[0], result.out, sums, key)) {
        const out = this.leaseChecked(result.out, start, res, key);
        hot?.cache.admit(key, hot.id, out);
        return out;
      }
      return this.readFrom(replicas, result.out, leaseDeadline(start, Number(res.lease_ttl_ms)), getWhat(key), result, sums, key).then(() => {
        // admitted only once read within its lease and checked against its recorded CRC-32C
        hot?.cache.admit(key, hot.id, result.out);
        return result.out;
      });
    });
  }

  /**
   * The object's size, and its bytes when it holds at most `maxBytes` (one master round trip
   * either way; a larger object is not read). For callers that pick where a large value goes only
   * once they know its size (dummy clients' get).
   */
  getBounded(key: string, maxBytes: number, observe?: ReadObserver): Promise<{ size: number; value?: Buffer }> {
    const refused = this.refusal(key);
    if (refused) return refused;
    return this.withReplicas(key, (res, start) => {
      const file = fileReplicaOf(res);
      if (file) {
        if (file.size > maxBytes) return { size: file.size };
        const out = this.core.allocOut(file.size).out;
        return this.readFile(file.path, key, out, res).then(() => ({ size: file.size, value: out }));
      }
      const replicas = this.readable(res, key);
      const size = replicaSize(replicas[0]);
      if (size > maxBytes) {
        // not read here: the caller reads it with getInto, which tells where it came from
        return { size };
      }
      const hot = this.hotFor(key, res, replicas[0]);
      const hit = hot?.cache.get(key, hot.id);
      if (hit !== undefined) return { size, value: hit };
      const result = this.core.allocOut(size);
      const sums = this.expected(res, replicas[0]);
      if (this.readInline(replicas[0], result.out, sums, key)) {
        const value = this.leaseChecked(result.out, start, res, key);
        hot?.cache.admit(key, hot.id, value);
        if (observe) this.tell(observe, res, replicas[0], start);
        return { size, value };
      }
      return this.readFrom(replicas, result.out, leaseDeadline(start, Number(res.lease_ttl_ms)), getWhat(key), result, sums, key).then((used) => {
        hot?.cache.admit(key, hot.id, result.out);
        if (observe) this.tell(observe, res, used, start);
        return { size, value: result.out };
      });
    });
  }

  /** Reads the object into `target` (registered memory is written directly); returns its size. */
  getInto(key: string, target: Uint8Array, observe?: ReadObserver): Promise<number> {
    const refused = this.refusal(key);
    if (refused) return refused;
    if (!(target instanceof Uint8Array)) return Promise.reject(new InvalidParamsError(`${getWhat(key)}: the target must be a Buffer/Uint8Array`));
    return this.withReplicas(key, (res, start) => {
      const file = fileReplicaOf(res);
      if (file) {
        if (target.byteLength < file.size) throw new InvalidParamsError(`${getWhat(key)}: the target holds ${target.byteLength} B, the object is ${file.size} B`);
        return this.readFile(file.path, key, asBuffer(target).subarray(0, file.size), res).then(() => file.size);
      }
      const replicas = this.readable(res, key);
      const size = replicaSize(replicas[0]);
      if (target.byteLength < size) throw new InvalidParamsError(`${getWhat(key)}: the target holds ${target.byteLength} B, the object is ${size} B`);
      const out = asBuffer(target).subarray(0, size);
      const hot = this.hotFor(key, res, replicas[0]);
      if (hot !== undefined && hot.cache.copyInto(key, hot.id, out) === size) return size;
      const sums = this.expected(res, replicas[0]);
      if (this.readInline(replicas[0], out, sums, key)) {
        const n = this.leaseChecked(size, start, res, key);
        hot?.cache.admit(key, hot.id, out);
        if (observe) this.tell(observe, res, replicas[0], start);
        return n;
      }
      return this.readFrom(replicas, out, leaseDeadline(start, Number(res.lease_ttl_ms)), getWhat(key), undefined, sums, key).then((used) => {
        hot?.cache.admit(key, hot.id, out);
        if (observe) this.tell(observe, res, used, start);
        return size;
      });
    });
  }

  /**
   * Reads an object held only by the file tier straight into `out` (off the event loop, checked
   * against the master's record and the file's CRCs: file-tier.ts). No lease check: the file is
   * not the lease's to protect (a removal unlinks the name; the open file stays readable).
   */
  private readFile(path: string, key: string, out: Buffer, res: GetReplicaListResponse__Output): Promise<void> {
    const files = this.core.d.files;
    if (!files) return Promise.reject(new ObjectNotFoundError(`${getWhat(key)}: held only by the file tier, which this client does not use`));
    return files.readInto(path, key, out, res.slice_checksums ?? []);
  }

  /** The rejection of a Get refused before any I/O (pure server, bad key), else undefined. */
  private refusal(key: unknown): Promise<never> | undefined {
    // the usual case without building the error text pool() and checkKey() take
    if (this.core.d.pool && keyProblem(key) === undefined) return undefined;
    const what = getWhat(key);
    try {
      this.core.pool(what);
      checkKey(key, what);
    } catch (e) {
      return Promise.reject(e);
    }
    return undefined;
  }

  /**
   * `then` on the key's replica list: a cached one while its lease holds (no master call), else a
   * fresh GetReplicaList, `then` running in the transport's own continuation. A read through a
   * cached list that fails for any reason is redone with a fresh list (reads are idempotent).
   */
  private withReplicas<R>(key: string, then: (res: GetReplicaListResponse__Output, start: number) => R | PromiseLike<R>): Promise<R> {
    const cached = this.replicaCache.lookup(key, this.core.d.now());
    if (cached !== undefined) {
      let r: R | PromiseLike<R>;
      try {
        r = then(cached.res, cached.start);
      } catch {
        this.replicaCache.forget(key);
        return this.fetchReplicas(key, then);
      }
      if (r === null || typeof r !== 'object' || typeof (r as PromiseLike<R>).then !== 'function') return Promise.resolve(r);
      return Promise.resolve(r).catch(() => {
        this.replicaCache.forget(key);
        return this.fetchReplicas(key, then);
      });
    }
    return this.fetchReplicas(key, then);
  }

  private fetchReplicas<R>(key: string, then: (res: GetReplicaListResponse__Output, start: number) => R | PromiseLike<R>): Promise<R> {
    const start = this.core.d.now();
    const call = () => this.core.d.master.getReplicaList({ key });
    const onReply = (res: GetReplicaListResponse__Output) => {
      if (res.status_code === ErrorCode.OK) this.replicaCache.remember(key, res, start);
      return then(res, start);
    };
    if (this.core.d.rpcThen) return this.core.d.rpcThen('GetReplicaList', call, onReply);
    return this.core.d.rpc('GetReplicaList', call).then(onReply);
  }

  /** Forgets every cached replica list (the master changed: its leases are gone). */
  clearReplicaCache(): void {
    this.replicaCache.clear();
  }

  /** Cached replica lists: reads served without a master call, and entries held. */
  replicaCacheStats(): { hits: number; misses: number; entries: number } {
    return { hits: this.replicaCache.hits, misses: this.replicaCache.misses, entries: this.replicaCache.size };
  }

  /**
   * The local hot cache and the identity of the value in `replica` of `res`, when the cache is on
   * and serves this read: no MEMORY replica is complete (the first in reading order is a DISK one,
   * on the SSD tier) and the value can be identified (hot-cache.ts); else undefined.
   */
  private hotFor(key: string, res: GetReplicaListResponse__Output, replica: ReplicaInfo__Output): { cache: HotCache; id: string } | undefined {
    const cache = this.core.d.hotCache;
    if (cache === undefined || replica.replica_type !== ReplicaType.DISK) return undefined;
    const id = hotCacheId(key, replica, res.slice_checksums ?? [], Number(res.version ?? 0));
    return id === undefined ? undefined : { cache, id };
  }

  /** The replicas of a GetReplicaList reply in reading order; throws the reply's error or not-found. */
  private readable(res: GetReplicaListResponse__Output, key: string): ReplicaInfo__Output[] {
    if (res.status_code !== ErrorCode.OK) throw StoreError.fromCode(res.status_code, getWhat(key));
    const replicas = orderReplicas(res.replica_list, this.core.isOwn);
    if (replicas.length === 0) throw new ObjectNotFoundError(`${getWhat(key)}: no complete replica`);
    return replicas;
  }

  /** Tells `observe` that `replica` of `res` (whose lease started at `start`) was just read. */
  private tell(observe: ReadObserver, res: GetReplicaListResponse__Output, replica: ReplicaInfo__Output, start: number): void {
    const leaseLeftMs = leaseDeadline(start, Number(res.lease_ttl_ms)) - this.core.d.now();
    observe({ replica, sums: res.slice_checksums ?? [], leaseLeftMs });
  }

  /** `value` if the read finished inside the lease granted at `start`, else LeaseExpiredError (no data). */
  private leaseChecked<T>(value: T, start: number, res: GetReplicaListResponse__Output, key: string): T {
    if (withinLease(this.core.d.now(), leaseDeadline(start, Number(res.lease_ttl_ms)))) return value;
    throw new LeaseExpiredError(`${getWhat(key)}: the lease expired before the read finished; no data returned`);
  }

  /**
   * Reads a whole small replica into `out` now, without a promise or staging: own-segment pieces
   * by memcpy, remote ones by the engine's inline read (a same-host peer whose grant is cached,
   * range and liveness checked natively). False when any piece cannot be read that way (unknown
   * endpoint, no cached grant, dead peer, bad handle): the caller then runs
   * the general path, which redoes the whole replica (reads are idempotent) and reports errors.
   */
  private readInline(r: ReplicaInfo__Output, out: Buffer, sums: readonly number[] | undefined, key: string): boolean {
    const engine = this.core.d.engine;
    if (out.length > INLINE_READ_MAX) return false;
    const handles = r.handles;
    const crc = sums && this.core.checksums;
    try {
      let offset = 0;
      let copied = 0;
      for (let i = 0; i < handles.length; i++) {
        const h = handles[i];
        const size = Number(h.size);
        if (size === 0) continue;
        const target = handles.length === 1 ? out : out.subarray(offset, offset + size);
        offset += size;
        if (this.core.isOwn(h.segment_name)) {
          const view = this.core.segmentView(h, size);
          if (crc) {
            if (crc.copy(target, view) !== sums[i]) return this.mismatch(key, h.segment_name);
          } else view.copy(target);
          copied += size;
          continue;
        }
        const endpoint = h.te_endpoint || this.core.endpoints.get(h.segment_name);
        if (!endpoint) return false;
        const incarnation = Number(h.incarnation) || undefined;
        if (crc && engine.readInlineCrc) {
          const got = engine.readInlineCrc(endpoint, Number(h.buffer), target, incarnation);
          if (got === -1) return false;
          if (got !== sums[i]) return this.mismatch(key, h.segment_name);
        } else {
          if (!engine.readInline(endpoint, Number(h.buffer), target, incarnation)) return false;
          if (crc && crc.of(target) !== sums[i]) return this.mismatch(key, h.segment_name);
        }
      }
      if (offset !== out.length) return false;
      const meter = this.core.d.meter;
      if (meter) {
        if (copied > 0) meter.transfer('memcpy', 'read', copied);
        if (offset > copied) meter.transfer('inline', 'read', offset - copied);
      }
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The CRC-32C of each slice of `replica` as its writer recorded them, when checksums are on and
   * the writer recorded them; undefined otherwise (nothing to check).
   */
  private expected(res: GetReplicaListResponse__Output, replica: ReplicaInfo__Output): readonly number[] | undefined {
    const sums = res.slice_checksums;
    if (!this.core.checksums || !sums || sums.length === 0 || sums.length !== replica.handles.length) return undefined;
    return sums;
  }

  /** Counts a replica whose bytes are not what was written; false (the read failed). */
  private mismatch(key: string, segment: string): false {
    this.core.d.onChecksumMismatch?.(key, segment);
    return false;
  }

  /**
   * Tries the replicas in order until one reads completely inside the lease; resolves with that
   * one. `result`: `out` is a fresh result from allocOut (its registration is known).
   */
  private async readFrom(
    replicas: ReplicaInfo__Output[],
    out: Buffer,
    deadline: number,
    what: string,
    result?: ResultBuffer,
    sums?: readonly number[],
    key = '',
  ): Promise<ReplicaInfo__Output> {
    const errors: unknown[] = [];
    for (const r of replicas) {
      if (replicaSize(r) !== out.length) {
        errors.push(new StoreError(ErrorCode.INTERNAL_ERROR, `${what}: replicas disagree on the size`));
        continue;
      }
      try {
        await this.readReplicas([{ pieces: replicaPieces(r, this.core.isOwn), out, result, sums, key }], what);
      } catch (e) {
        errors.push(e);
        continue;
      }
      if (!withinLease(this.core.d.now(), deadline)) throw new LeaseExpiredError(`${what}: the lease expired before the read finished; no data returned`);
      return r;
    }
    const cause = errors.length === 1 ? errors[0] : new AggregateError(errors, `${errors.length} replicas failed`);
    throw new TransferError(`${what}: every replica failed (${replicas.length} tried): ${(errors[errors.length - 1] as Error)?.message}`, { cause });
  }

  /**
   * Reads objects' pieces into their outputs: own pieces by memcpy, the rest in one engine batch,
   * straight into the output when it is registered memory, else through one staging lease. Awaits
   * only what must be waited for (a metadata lookup, a full pool, the engine): at 1 in flight every
   * extra promise hop is latency.
   */
  private async readReplicas(objects: ReadTarget[], what: string): Promise<void> {
    const ops: TransferOp[] = [];
    /** Per op: the object and piece it reads, to check its CRC-32C. */
    const opOf: { k: number; piece: number; at?: number }[] = [];
    const crc = this.core.checksums;
    let staged: { out: Buffer; p: Piece; at: number; k: number; piece: number; sums?: readonly number[] }[] | undefined;
    let stageBytes = 0;
    const targets: (number | undefined)[] = [];
    for (const o of objects) {
      let remote = false;
      for (const p of o.pieces) if (!p.local) remote = true;
      // A fresh result buffer (allocOut) knows whether it is registered: skip the native lookup.
      targets.push(!remote ? undefined : o.result ? o.result.address : this.core.registeredAddress(o.out));
      if (this.core.needsLookup(o.pieces)) await this.core.resolveEndpoints(o.pieces);
    }
    for (let k = 0; k < objects.length; k++) {
      if (targets[k] !== undefined) continue;
      for (const p of objects[k].pieces) {
        if (p.local || p.length === 0) continue;
        (staged ??= []).push({ out: objects[k].out, p, at: stageBytes, k, piece: objects[k].pieces.indexOf(p), sums: objects[k].sums });
        stageBytes += p.length;
      }
    }
    let lease: BufferLease | undefined;
    try {
      if (stageBytes > 0) {
        const pool = this.core.pool(what);
        lease = pool.tryAcquire(stageBytes) ?? (await pool.acquire(stageBytes));
        for (const s of staged!) {
          const op = this.core.op('read', s.p, lease.address + s.at);
          if (s.sums) op.checksum = true;
          opOf.push({ k: s.k, piece: s.piece, at: s.at });
          ops.push(op);
        }
      }
      for (let k = 0; k < objects.length; k++) {
        const direct = targets[k];
        if (direct === undefined) continue;
        const o = objects[k];
        o.pieces.forEach((p, piece) => {
          if (p.local || p.length === 0) return;
          const op = this.core.op('read', p, direct + p.offset);
          if (o.sums) op.checksum = true;
          opOf.push({ k, piece });
          ops.push(op);
        });
      }
      const meter = this.core.d.meter;
      if (ops.length > 0) {
        let got: Uint32Array | undefined | void;
        try {
          got = await this.core.d.engine.transfer(ops);
        } catch (e) {
          throw transferFailure(e, `${what}: read`);
        }
        if (meter) for (const op of ops) meter.transfer('engine', 'read', op.length);
        if (crc) {
          for (let i = 0; i < ops.length; i++) {
            const w = opOf[i];
            const o = objects[w.k];
            if (!o.sums) continue;
            const p = o.pieces[w.piece];
            // The engine's CRC of the bytes it received; an engine without checksums: one pass here.
            const v = got ? got[i] : crc.of(w.at !== undefined ? lease!.buffer.subarray(w.at, w.at + p.length) : o.out.subarray(p.offset, p.offset + p.length));
            if (v !== o.sums[w.piece]) this.mismatched(o, p, what);
          }
        }
      }
      if (lease) {
        const buf = lease.buffer;
        for (const s of staged!) buf.copy(s.out, s.p.offset, s.at, s.at + s.p.length);
      }
      for (const o of objects) {
        o.pieces.forEach((p, piece) => {
          if (!p.local) return;
          const view = this.core.segmentView(p.handle, p.length);
          const dst = o.out.subarray(p.offset, p.offset + p.length);
          if (crc && o.sums) {
            if (crc.copy(dst, view) !== o.sums[piece]) this.mismatched(o, p, what);
          } else view.copy(dst);
          meter?.transfer('memcpy', 'read', p.length);
        });
      }
    } finally {
      lease?.release();
    }
  }

  /** A piece whose bytes do not have their recorded CRC-32C: counted, and the read of this replica fails. */
  private mismatched(o: ReadTarget, p: Piece, what: string): never {
    this.core.d.onChecksumMismatch?.(o.key ?? '', p.handle.segment_name);
    throw new TransferError(`${what}: the bytes read from ${p.handle.segment_name} do not have the CRC-32C their writer recorded`, { code: ErrorCode.CHECKSUM_MISMATCH });
  }

  /** Many objects: one BatchGetReplicaList, one transfer batch; a failed object retries alone. */
  getBatch(keys: readonly string[]): Promise<BatchGetResult[]> {
    return this.readBatch(keys, (_i, size) => this.core.allocOut(size));
  }

  /**
   * Many objects, each into its own target (registered targets are read into directly): one
   * BatchGetReplicaList, one transfer batch. Per key: `size` read, or `error`.
   */
  async getIntoBatch(items: readonly { key: string; target: Uint8Array }[], observe?: (i: number, source: ReadSource) => void): Promise<BatchGetIntoResult[]> {
    for (const it of items) {
      if (!(it.target instanceof Uint8Array)) throw new InvalidParamsError(`${getWhat(it.key)}: the target must be a Buffer/Uint8Array`);
    }
    const results = await this.readBatch(
      items.map((it) => it.key),
      (i, size, what) => {
        const target = items[i].target;
        if (target.byteLength < size) throw new InvalidParamsError(`${what}: the target holds ${target.byteLength} B, the object is ${size} B`);
        const out = asBuffer(target).subarray(0, size);
        return { out, address: this.core.registeredAddress(out) };
      },
      observe,
    );
    return results.map((r) => (r.error ? { key: r.key, error: r.error } : { key: r.key, size: r.value!.length }));
  }

  private async readBatch(
    keys: readonly string[],
    outFor: (i: number, size: number, what: string) => ResultBuffer,
    observe?: (i: number, source: ReadSource) => void,
  ): Promise<BatchGetResult[]> {
    const what = `batch get of ${keys.length} keys`;
    this.core.pool(what);
    if (keys.length === 0) return [];
    keys.forEach((k) => checkKey(k, what));
    const start = this.core.d.now();
    const res = await this.core.d.rpc('BatchGetReplicaList', () => this.core.d.master.batchGetReplicaList({ keys: [...keys] }));
    check(res.status_code, what);
    const results: BatchGetResult[] = keys.map((key) => ({ key }));
    const wanted: {
      i: number;
      replicas: ReplicaInfo__Output[];
      deadline: number;
      result: ResultBuffer;
      what: string;
      sums?: readonly number[];
      recorded: readonly number[];
      hot?: { cache: HotCache; id: string };
    }[] = [];
    const fileReads: Promise<void>[] = [];
    keys.forEach((key, i) => {
      const w = `get ${JSON.stringify(key)}`;
      const r = res.results[i];
      try {
        if (!r) throw new StoreError(ErrorCode.INTERNAL_ERROR, `${w}: the master returned no result`);
        check(r.status_code, w);
        const file = fileReplicaOf(r);
        if (file) {
          // Held only by the file tier: read beside the batch's transfers.
          const out = outFor(i, file.size, w).out;
          fileReads.push(
            this.readFile(file.path, key, out, r).then(
              () => void (results[i].value = out),
              (e: unknown) => void (results[i].error = e as StoreError),
            ),
          );
          return;
        }
        const replicas = orderReplicas(r.replica_list, this.core.isOwn);
        if (replicas.length === 0) throw new ObjectNotFoundError(`${w}: no complete replica`);
        const size = replicaSize(replicas[0]);
        const result = outFor(i, size, w);
        const hot = this.hotFor(key, r, replicas[0]);
        if (hot !== undefined && hot.cache.copyInto(key, hot.id, result.out) === size) {
          results[i].value = result.out; // from the local hot cache: nothing to read
          return;
        }
        wanted.push({
          i,
          replicas,
          deadline: leaseDeadline(start, Number(r.lease_ttl_ms)),
          result,
          what: w,
          sums: this.expected(r, replicas[0]),
          recorded: r.slice_checksums ?? [],
          hot,
        });
      } catch (e) {
        results[i].error = e as StoreError;
      }
    });
    let batchOk = true;
    const filesDone = Promise.all(fileReads);
    try {
      await this.readReplicas(
        wanted.map((w) => ({ pieces: replicaPieces(w.replicas[0], this.core.isOwn), out: w.result.out, result: w.result, sums: w.sums, key: keys[w.i] })),
        what,
      );
    } catch {
      batchOk = false;
    }
    for (const w of wanted) {
      try {
        const used = batchOk ? w.replicas[0] : await this.readFrom(w.replicas, w.result.out, w.deadline, w.what, w.result, w.sums, keys[w.i]);
        const leaseLeftMs = w.deadline - this.core.d.now();
        if (!withinLease(this.core.d.now(), w.deadline)) throw new LeaseExpiredError(`${w.what}: the lease expired before the read finished; no data returned`);
        results[w.i].value = w.result.out;
        w.hot?.cache.admit(keys[w.i], w.hot.id, w.result.out);
        if (observe) observe(w.i, { replica: used, sums: w.recorded, leaseLeftMs });
      } catch (e) {
        results[w.i].error = e as StoreError;
      }
    }
    await filesDone;
    return results;
  }
}
