// The client's data path: Put/Upsert (start -> stage -> one transfer batch of WRITEs to every
// replica -> end, revoke on failure) and Get (replica list -> own segment by memcpy first, else a
// transfer READ -> lease check), single and batched. A large Get's result is a range of the result
// arena that the engine reads into directly; smaller ones are read through a staging lease and
// copied out. Batches are one master round trip per phase and one transfer batch. Bulk bytes never
// pass through JS loops: Buffer copies are memcpy, remote bytes move in the native engine.
import type { BufHandle__Output } from '../proto/gen/store/BufHandle.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import type { ReplicateConfig } from '../proto/gen/store/ReplicateConfig.js';
import type { PutStartRequest } from '../proto/gen/store/PutStartRequest.js';
import type { BatchKeysResponse__Output } from '../proto/gen/store/BatchKeysResponse.js';
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import type { MasterClient } from './master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { keyProblem } from '../common/key-rules.js';
import type { BufferLease, BufferPool } from './buffer-pool.js';
import {
  InvalidParamsError,
  LeaseExpiredError,
  ObjectNotFoundError,
  StoreError,
  TransferError,
  UnavailableError,
} from './errors.js';
import type { MappedRegion, ResultArenaPort, TransferEnginePort } from './native-port.js';
import { ReplicaCache } from './replica-cache.js';
import type { TransferMeter } from './client-metrics.js';
import { RESULT_SLAB_BYTES, RESULT_SLAB_MAX_ITEM, ResultSlab } from './result-slab.js';
import {
  leaseDeadline,
  orderReplicas,
  replicaPieces,
  replicaSize,
  withinLease,
  type Piece,
  type TransferOp,
} from './transfer-plan.js';

/** A value: one buffer, or a list of slices stored as one object (one handle per slice). */
export type Value = Uint8Array | readonly Uint8Array[];

/** Replication settings of a Put (the spec's ReplicateConfig). */
export interface PutConfig {
  replica_num?: number;
  with_soft_pin?: boolean;
  with_hard_pin?: boolean;
  preferred_segment?: string;
}

/** Per-key outcome of a batch write. */
export interface BatchWriteResult {
  key: string;
  error?: StoreError;
}

/** Per-key outcome of a batch read into caller targets. */
export interface BatchGetIntoResult {
  key: string;
  size?: number;
  error?: StoreError;
}

/** Per-key outcome of a batch read. */
export interface BatchGetResult {
  key: string;
  value?: Buffer;
  error?: StoreError;
}

/** A segment this client mounted: its memory is readable and writable here by memcpy. */
export interface OwnSegment {
  name: string;
  id: string;
  region: MappedRegion;
  /** Its current registration with the engine (docs/integrity.md): handles of another are stale. */
  incarnation: number;
}

export type MasterApi = Pick<
  MasterClient,
  | 'putStart' | 'batchPutStart' | 'putEnd' | 'batchPutEnd' | 'putRevoke' | 'batchPutRevoke'
  | 'upsertStart' | 'batchUpsertStart' | 'upsertEnd' | 'batchUpsertEnd' | 'upsertRevoke' | 'batchUpsertRevoke'
  | 'getReplicaList' | 'batchGetReplicaList'
>;

export interface DataPathDeps {
  master: MasterApi;
  engine: TransferEnginePort;
  /** Staging memory; undefined for a pure server (Get/Put refused). */
  pool: BufferPool | undefined;
  segments: ReadonlyMap<string, OwnSegment>;
  addressOf: (view: ArrayBufferView) => number;
  /**
   * Where large Get results live, registered with the engine by the owner (absent: every result
   * is a fresh Buffer read through staging).
   */
  resultArena?: ResultArenaPort;
  /**
   * Other memory registered with the engine whose bytes may be read from or written into directly
   * (dummy clients' shared regions): a live list the owner keeps up to date.
   */
  attachedRegions?: readonly { readonly address: number; readonly size: number }[];
  /** Replica lists kept for reuse under their read lease (replica-cache.ts); 0 disables. */
  replicaCacheEntries?: number;
  /** Own-segment pieces by memcpy (else through the engine's loopback). */
  localMemcpy: boolean;
  /** Monotonic clock, ms. */
  now: () => number;
  /** Endpoint of a segment whose handles carry none (metadata lookup); null when unknown. */
  lookupEndpoint: (segmentName: string) => Promise<string | null>;
  /** Wraps a master call, turning transport failures into typed errors. */
  rpc: <T>(what: string, call: () => Promise<T>) => Promise<T>;
  /**
   * rpc(what, call).then(then) in one promise: `then` runs on the reply, transport failures are
   * typed as by rpc (errors thrown by `then` pass through as they are). Optional.
   */
  rpcThen?: <T, R>(what: string, call: () => Promise<T>, then: (v: T) => R | PromiseLike<R>) => Promise<R>;
  /** Told how each piece's bytes moved once it has (client metrics); optional. */
  meter?: TransferMeter;
}

interface WriteRpcs {
  verb: 'put' | 'upsert';
  start(req: PutStartRequest): Promise<{ status_code: number; replica_list: ReplicaInfo__Output[] }>;
  end(key: string): Promise<{ status_code: number }>;
  /** `failed`: segments the writer could not reach (the master avoids them for a while). */
  revoke(key: string, failed: string[]): Promise<{ status_code: number }>;
  batchStart(reqs: PutStartRequest[]): Promise<{ status_code: number; results: { status_code: number; replica_list: ReplicaInfo__Output[] }[] }>;
  batchEnd(keys: string[]): Promise<BatchKeysResponse__Output>;
  batchRevoke(keys: string[], failed: string[]): Promise<BatchKeysResponse__Output>;
}

function slicesOf(value: Value, what: string): Uint8Array[] {
  const list = value instanceof Uint8Array ? [value] : Array.isArray(value) ? [...value] : null;
  if (!list || list.some((s) => !(s instanceof Uint8Array))) {
    throw new InvalidParamsError(`${what}: the value must be a Buffer/Uint8Array or an array of them`);
  }
  if (list.length === 0 || list.every((s) => s.byteLength === 0)) throw new InvalidParamsError(`${what}: the value is empty`);
  if (list.some((s) => s.byteLength === 0)) throw new InvalidParamsError(`${what}: a slice is empty`);
  return list;
}

/** Throws InvalidParamsError (INVALID_KEY) unless `key` is a valid key (common/key-rules.ts): refused before anything is sent. */
export function checkKey(key: unknown, what: string): string {
  const problem = keyProblem(key);
  if (problem !== undefined) throw new InvalidParamsError(`${what}: the key ${problem}`, { code: ErrorCode.INVALID_KEY });
  return key as string;
}

function wireConfig(c: PutConfig | undefined, what: string): ReplicateConfig {
  const n = c?.replica_num ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new InvalidParamsError(`${what}: replica_num must be an integer >= 1, got ${c?.replica_num}`);
  return { replica_num: n, with_soft_pin: !!c?.with_soft_pin, with_hard_pin: !!c?.with_hard_pin, preferred_segment: c?.preferred_segment ?? '' };
}

function asBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

/** Turns an engine rejection into a TransferError carrying the right ErrorCode. */
export function transferFailure(e: unknown, what: string): TransferError {
  const code = (e as { code?: string })?.code === 'ADDRESS_OUT_OF_RANGE' ? ErrorCode.ADDRESS_OUT_OF_RANGE : ErrorCode.TRANSFER_FAILED;
  return new TransferError(`${what}: ${(e as Error)?.message ?? String(e)}`, { cause: e, code });
}

/** A write that failed for an unreachable segment is tried this many times in all. */
export const WRITE_ATTEMPTS = 2;

/**
 * The segments of `replicas` whose engines a failed transfer could not reach: the peers the
 * engine names in its rejection (native/transfer-engine.ts), mapped to their segment names.
 */
export function unreachableSegments(e: unknown, replicas: readonly ReplicaInfo__Output[]): string[] {
  let err = e as { endpoints?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; err && depth < 4 && !Array.isArray(err.endpoints); depth++) err = err.cause as typeof err;
  const endpoints = err && Array.isArray(err.endpoints) ? new Set(err.endpoints as string[]) : undefined;
  if (!endpoints || endpoints.size === 0) return [];
  const names = new Set<string>();
  for (const r of replicas) for (const h of r.handles) if (endpoints.has(h.te_endpoint)) names.add(h.segment_name);
  return [...names];
}

/** Puts of caller buffers from this size up register them in place instead of staging a copy. */
export const LARGE_VALUE_BYTES = 2 * 1024 * 1024;

/**
 * Get results from this size up come from the result arena (read into directly, no staging copy);
 * below it the copy costs less than the arena's range bookkeeping and 4 KiB rounding.
 */
export const ARENA_RESULT_BYTES = 32 * 1024;

/** A Get's output buffer and, when it lies in registered memory, its address (read into directly). */
interface ResultBuffer {
  out: Buffer;
  address: number | undefined;
}

/** Replica lists the cache keeps by default (a few hundred bytes each). */
export const DEFAULT_REPLICA_CACHE_ENTRIES = 65_536;

/** Largest Get the engine may read inline (native kInlineMemcpyMax). */
export const INLINE_READ_MAX = 64 * 1024;

/** A Get's name in errors; built only when one is raised. */
function getWhat(key: unknown): string {
  return `get ${JSON.stringify(key)}`;
}

function check(status: number, what: string): void {
  if (status !== ErrorCode.OK) throw StoreError.fromCode(status, what);
}

export class DataPath {
  private readonly endpoints = new Map<string, string>();
  /** Large caller buffers registered while writes from them are in flight: address -> size, users. */
  private readonly borrowed = new Map<number, { size: number; users: number }>();
  private readonly results: ResultSlab;
  private readonly replicaCache: ReplicaCache;

  constructor(private readonly d: DataPathDeps) {
    this.replicaCache = new ReplicaCache(d.replicaCacheEntries ?? DEFAULT_REPLICA_CACHE_ENTRIES);
    const arena = d.resultArena;
    this.results = new ResultSlab(RESULT_SLAB_BYTES, RESULT_SLAB_MAX_ITEM, arena && { take: (n) => arena.take(n), addressOf: (b) => d.addressOf(b) });
  }

  private readonly putRpcs: WriteRpcs = {
    verb: 'put',
    start: (req) => this.d.rpc('PutStart', () => this.d.master.putStart(req)),
    end: (key) => this.d.rpc('PutEnd', () => this.d.master.putEnd({ key })),
    revoke: (key, failed) => this.d.rpc('PutRevoke', () => this.d.master.putRevoke({ key, failed_segments: failed })),
    batchStart: (requests) => this.d.rpc('BatchPutStart', () => this.d.master.batchPutStart({ requests })),
    batchEnd: (keys) => this.d.rpc('BatchPutEnd', () => this.d.master.batchPutEnd({ keys })),
    batchRevoke: (keys, failed) => this.d.rpc('BatchPutRevoke', () => this.d.master.batchPutRevoke({ keys, failed_segments: failed })),
  };

  private readonly upsertRpcs: WriteRpcs = {
    verb: 'upsert',
    start: (req) => this.d.rpc('UpsertStart', () => this.d.master.upsertStart(req)),
    end: (key) => this.d.rpc('UpsertEnd', () => this.d.master.upsertEnd({ key })),
    revoke: (key, failed) => this.d.rpc('UpsertRevoke', () => this.d.master.upsertRevoke({ key, failed_segments: failed })),
    batchStart: (requests) => this.d.rpc('BatchUpsertStart', () => this.d.master.batchUpsertStart({ requests })),
    batchEnd: (keys) => this.d.rpc('BatchUpsertEnd', () => this.d.master.batchUpsertEnd({ keys })),
    batchRevoke: (keys, failed) => this.d.rpc('BatchUpsertRevoke', () => this.d.master.batchUpsertRevoke({ keys, failed_segments: failed })),
  };

  private pool(what: string): BufferPool {
    if (!this.d.pool) {
      throw new UnavailableError(`${what}: this client is a pure server (local_buffer_size = 0); Get and Put are not permitted from it`);
    }
    return this.d.pool;
  }

  /**
   * A Buffer for a Get's result: a range of the result arena when large, else a slice of a shared
   * slab (small; slabs are arena ranges too while the arena has room) or Node's allocator. Results
   * in the arena are registered (the engine reads into them directly); others are read through
   * staging (or inline). A full arena falls back to Node's allocator.
   */
  private allocOut(size: number): ResultBuffer {
    const arena = this.d.resultArena;
    if (arena && size >= ARENA_RESULT_BYTES) {
      const out = arena.take(size);
      if (out) return { out, address: this.d.addressOf(out) };
    }
    return this.results.take(size);
  }

  private isOwn = (segmentName: string): boolean => this.d.localMemcpy && this.d.segments.has(segmentName);

  /** Address of `view` when it lies inside memory registered with the engine (zero-copy), else undefined. */
  registeredAddress(view: Uint8Array): number | undefined {
    const pool = this.d.pool;
    const arena = this.d.resultArena;
    const attached = this.d.attachedRegions;
    if (!pool && !arena && this.d.segments.size === 0 && !attached?.length) return undefined;
    const a = this.d.addressOf(view);
    const end = a + view.byteLength;
    if (attached) {
      for (const r of attached) if (a >= r.address && end <= r.address + r.size) return a;
    }
    if (pool && a >= pool.primary.address && end <= pool.primary.address + pool.primary.size) return a;
    // A Get result the caller passes back (to put it elsewhere, or as a getInto target).
    if (arena && a >= arena.address && end <= arena.address + arena.size) return a;
    for (const s of this.d.segments.values()) {
      if (a >= s.region.address && end <= s.region.address + s.region.size) return a;
    }
    return undefined;
  }

  /** A view of own-segment memory for a handle, refusing anything outside the segment. */
  private segmentView(h: BufHandle__Output, length: number): Buffer {
    const s = this.d.segments.get(h.segment_name);
    // Unmounted (and unmapped) since the replica list was read: an error, never a stale view.
    if (!s) throw new TransferError(`own segment ${h.segment_name} was unmounted during the operation`);
    const inc = Number(h.incarnation) || 0;
    if (inc !== 0 && inc !== s.incarnation) {
      throw new TransferError(`handle of own segment ${h.segment_name} names registration ${inc}, the segment is now ${s.incarnation}: planned before a remount`, {
        code: ErrorCode.ADDRESS_OUT_OF_RANGE,
      });
    }
    const off = Number(h.buffer) - s.region.address;
    if (off < 0 || off + length > s.region.size) {
      throw new TransferError(`handle 0x${Number(h.buffer).toString(16)}+${length} lies outside own segment ${h.segment_name}`, {
        code: ErrorCode.ADDRESS_OUT_OF_RANGE,
      });
    }
    return s.region.view(off, length);
  }

  /**
   * Registers a large caller buffer with the engine for the writes from it, so a Put reads it in
   * place instead of copying it into staging first; undefined when that is refused (staged then).
   * Concurrent Puts of one buffer share the registration; the last one drops it.
   */
  private borrow(src: Uint8Array): number | undefined {
    const a = this.d.addressOf(src);
    const b = this.borrowed.get(a);
    if (b) {
      if (b.size !== src.byteLength) return undefined;
      b.users++;
      return a;
    }
    try {
      this.d.engine.registerRegion(a, src.byteLength, { serve: false }); // the local side of our writes only
    } catch {
      return undefined;
    }
    this.borrowed.set(a, { size: src.byteLength, users: 1 });
    return a;
  }

  /** Ends one use of a borrowed buffer; the last unregisters it (resolving once no chunk is on it). */
  private async giveBack(address: number): Promise<void> {
    const b = this.borrowed.get(address);
    if (!b || --b.users > 0) return;
    this.borrowed.delete(address);
    await this.d.engine.unregisterRegion(address);
  }

  /** Whether some remote piece's handle carries no endpoint we know (a metadata lookup is due). */
  private needsLookup(pieces: readonly Piece[]): boolean {
    for (const p of pieces) if (!p.local && !p.handle.te_endpoint && !this.endpoints.has(p.handle.segment_name)) return true;
    return false;
  }

  /** Fills in endpoints for handles that carry none, from the metadata service. */
  private async resolveEndpoints(pieces: readonly Piece[]): Promise<void> {
    for (const p of pieces) {
      if (p.local || p.handle.te_endpoint || this.endpoints.has(p.handle.segment_name)) continue;
      const ep = await this.d.lookupEndpoint(p.handle.segment_name);
      if (!ep) throw new TransferError(`no transfer endpoint known for segment ${p.handle.segment_name}`);
      this.endpoints.set(p.handle.segment_name, ep);
    }
  }

  private endpointOf = (h: BufHandle__Output): string => h.te_endpoint || this.endpoints.get(h.segment_name)!;

  // ---------------------------------------------------------------- writes

  put(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writeOne(this.putRpcs, key, value, config);
  }

  upsert(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writeOne(this.upsertRpcs, key, value, config);
  }

  putBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writeBatch(this.putRpcs, items);
  }

  upsertBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writeBatch(this.upsertRpcs, items);
  }

  private startRequest(key: string, slices: Uint8Array[], config: PutConfig | undefined, what: string): PutStartRequest {
    const slice_lengths = slices.map((s) => s.byteLength);
    return { key, value_length: slice_lengths.reduce((a, b) => a + b, 0), slice_lengths, config: wireConfig(config, what) };
  }

  private async writeOne(rpcs: WriteRpcs, key: string, value: Value, config?: PutConfig): Promise<void> {
    const what = `${rpcs.verb} ${JSON.stringify(key)}`;
    this.pool(what);
    checkKey(key, what);
    const slices = slicesOf(value, what);
    const req = this.startRequest(key, slices, config, what);
    for (let attempt = 1; ; attempt++) {
      const res = await rpcs.start(req);
      check(res.status_code, `${what}: start refused`);
      try {
        await this.writeReplicas([{ replicas: res.replica_list, slices }], what);
      } catch (e) {
        // The space returns to the master, told which segments we could not reach; the original error matters.
        const unreachable = unreachableSegments(e, res.replica_list);
        await rpcs.revoke(key, unreachable).catch(() => {});
        // Once more elsewhere: the master now avoids the segments we could not reach.
        if (attempt < WRITE_ATTEMPTS && unreachable.length > 0) continue;
        throw e;
      }
      check((await rpcs.end(key)).status_code, `${what}: end refused`);
      return;
    }
  }

  /**
   * Writes every object's slices to all its replicas: own-segment pieces by memcpy, the rest in
   * one engine batch from registered memory (the caller's, when it is registered, else one lease).
   */
  private async writeReplicas(objects: { replicas: ReplicaInfo__Output[]; slices: Uint8Array[] }[], what: string): Promise<void> {
    const plans: { slices: Uint8Array[]; pieces: { p: Piece; slice: number }[] }[] = [];
    for (const o of objects) {
      if (o.replicas.length === 0) throw new StoreError(ErrorCode.INTERNAL_ERROR, `${what}: the master granted no replica`);
      const lengths = o.slices.map((x) => x.byteLength);
      const pieces: { p: Piece; slice: number }[] = [];
      for (const r of o.replicas) replicaPieces(r, this.isOwn, lengths).forEach((p, i) => pieces.push({ p, slice: i }));
      plans.push({ slices: o.slices, pieces });
    }
    // Stage the slices that remote pieces read from and that are not registered already (large
    // ones are registered in place for this write instead: a multi-MiB staging copy costs more).
    const sources = new Map<Uint8Array, number>();
    const borrowed: number[] = [];
    let stageBytes = 0;
    let lease: BufferLease | undefined;
    try {
      for (const o of plans) {
        for (const { p, slice } of o.pieces) {
          if (p.local || sources.has(o.slices[slice])) continue;
          const src = o.slices[slice];
          let reg = this.registeredAddress(src);
          if (reg === undefined && src.byteLength >= LARGE_VALUE_BYTES) {
            reg = this.borrow(src);
            if (reg !== undefined) borrowed.push(reg);
          }
          sources.set(src, reg ?? -1 - stageBytes);
          if (reg === undefined) stageBytes += src.byteLength;
        }
      }
      if (stageBytes > 0) {
        const pool = this.pool(what);
        lease = pool.tryAcquire(stageBytes) ?? (await pool.acquire(stageBytes));
        const base = lease.address;
        const buf = lease.buffer;
        for (const [src, a] of sources) {
          if (a >= 0) continue;
          const off = -1 - a;
          asBuffer(src).copy(buf, off);
          sources.set(src, base + off);
        }
      }
      const ops: TransferOp[] = [];
      const meter = this.d.meter;
      for (const o of plans) {
        if (this.needsLookup(o.pieces.map((x) => x.p))) await this.resolveEndpoints(o.pieces.map((x) => x.p));
        for (const { p, slice } of o.pieces) {
          if (p.local) {
            asBuffer(o.slices[slice]).copy(this.segmentView(p.handle, p.length));
            meter?.transfer('memcpy', 'write', p.length);
          } else if (p.length > 0) ops.push(this.op('write', p, sources.get(o.slices[slice])!));
        }
      }
      if (ops.length > 0) {
        try {
          await this.d.engine.transfer(ops);
        } catch (e) {
          throw transferFailure(e, `${what}: write`);
        }
        if (meter) for (const op of ops) meter.transfer('engine', 'write', op.length);
      }
    } finally {
      lease?.release();
      // The caller gets its buffer back only when no chunk can still touch it.
      // (giveBack rejects only for a malformed address; it must not mask the write's own error.)
      await Promise.all(borrowed.map((a) => this.giveBack(a).catch(() => {})));
    }
  }

  private async writeBatch(rpcs: WriteRpcs, items: readonly { key: string; value: Value; config?: PutConfig }[], attempt = 1): Promise<BatchWriteResult[]> {
    const what = `batch ${rpcs.verb} of ${items.length} keys`;
    this.pool(what);
    if (items.length === 0) return [];
    const results: BatchWriteResult[] = items.map((it) => ({ key: it.key }));
    const prepared: { i: number; slices: Uint8Array[]; req: PutStartRequest }[] = [];
    const seen = new Set<string>();
    items.forEach((it, i) => {
      try {
        const w = `${rpcs.verb} ${JSON.stringify(it.key)}`;
        checkKey(it.key, w);
        if (seen.has(it.key)) throw new InvalidParamsError(`${w}: the key appears twice in the batch`);
        seen.add(it.key);
        const slices = slicesOf(it.value, w);
        prepared.push({ i, slices, req: this.startRequest(it.key, slices, it.config, w) });
      } catch (e) {
        results[i].error = e as StoreError;
      }
    });
    if (prepared.length === 0) return results;
    const started = await rpcs.batchStart(prepared.map((p) => p.req));
    if (started.status_code !== ErrorCode.OK) {
      const err = StoreError.fromCode(started.status_code, `${what}: start refused`);
      for (const p of prepared) results[p.i].error = err;
      return results;
    }
    const granted = prepared.flatMap((p, k) => {
      const r = started.results[k];
      if (!r || r.status_code !== ErrorCode.OK) {
        results[p.i].error = StoreError.fromCode(r?.status_code ?? ErrorCode.INTERNAL_ERROR, `${rpcs.verb} ${JSON.stringify(p.req.key)}: start refused`);
        return [];
      }
      return [{ ...p, replicas: r.replica_list }];
    });
    if (granted.length === 0) return results;
    const failed = new Set<number>();
    try {
      await this.writeReplicas(granted, what);
    } catch {
      // Find which objects failed: retry each on its own (their space is still reserved).
      for (const g of granted) {
        try {
          await this.writeReplicas([g], `${rpcs.verb} ${JSON.stringify(g.req.key)}`);
        } catch (e) {
          failed.add(g.i);
          results[g.i].error = e instanceof StoreError ? e : transferFailure(e, `${rpcs.verb} ${JSON.stringify(g.req.key)}`);
        }
      }
    }
    const done = granted.filter((g) => !failed.has(g.i));
    const revoke = granted.filter((g) => failed.has(g.i));
    const unreachable = new Set<string>();
    for (const g of revoke) for (const seg of unreachableSegments(results[g.i].error, g.replicas)) unreachable.add(seg);
    if (revoke.length > 0) await rpcs.batchRevoke(revoke.map((g) => g.req.key!), [...unreachable]).catch(() => undefined);
    // Objects that failed for an unreachable segment get one more try elsewhere.
    const again = attempt < WRITE_ATTEMPTS ? revoke.filter((g) => unreachableSegments(results[g.i].error, g.replicas).length > 0) : [];
    if (again.length > 0) {
      const retried = await this.writeBatch(
        rpcs,
        again.map((g) => items[g.i]!),
        attempt + 1,
      );
      again.forEach((g, k) => (results[g.i] = retried[k]!));
    }
    if (done.length > 0) {
      const ended = await rpcs.batchEnd(done.map((g) => g.req.key!));
      const byKey = new Map(ended.results.map((r) => [r.key, r.status_code]));
      for (const g of done) {
        const code = ended.status_code !== ErrorCode.OK ? ended.status_code : (byKey.get(g.req.key!) ?? ErrorCode.OK);
        if (code !== ErrorCode.OK) results[g.i].error = StoreError.fromCode(code, `${rpcs.verb} ${JSON.stringify(g.req.key)}: end refused`);
      }
    }
    return results;
  }

  // ---------------------------------------------------------------- reads

  /**
   * The object's bytes in a new Buffer. Not an async function: at 1 in flight every promise hop is
   * latency, so the common case (one replica, a small value the engine reads inline) settles in
   * the master reply's own continuation.
   */
  get(key: string): Promise<Buffer> {
    const refused = this.refusal(key);
    if (refused) return refused;
    return this.withReplicas(key, (res, start) => {
      const replicas = this.readable(res, key);
      const result = this.allocOut(replicaSize(replicas[0]));
      if (this.readInline(replicas[0], result.out)) return this.leaseChecked(result.out, start, res, key);
      return this.readFrom(replicas, result.out, leaseDeadline(start, Number(res.lease_ttl_ms)), getWhat(key), result).then(() => result.out);
    });
  }

  /**
   * The object's size, and its bytes when it holds at most `maxBytes` (one master round trip
   * either way; a larger object is not read). For callers that pick where a large value goes only
   * once they know its size (dummy clients' get).
   */
  getBounded(key: string, maxBytes: number): Promise<{ size: number; value?: Buffer }> {
    const refused = this.refusal(key);
    if (refused) return refused;
    return this.withReplicas(key, (res, start) => {
      const replicas = this.readable(res, key);
      const size = replicaSize(replicas[0]);
      if (size > maxBytes) return { size };
      const result = this.allocOut(size);
      if (this.readInline(replicas[0], result.out)) return { size, value: this.leaseChecked(result.out, start, res, key) };
      return this.readFrom(replicas, result.out, leaseDeadline(start, Number(res.lease_ttl_ms)), getWhat(key), result).then(() => ({ size, value: result.out }));
    });
  }

  /** Reads the object into `target` (registered memory is written directly); returns its size. */
  getInto(key: string, target: Uint8Array): Promise<number> {
    const refused = this.refusal(key);
    if (refused) return refused;
    if (!(target instanceof Uint8Array)) return Promise.reject(new InvalidParamsError(`${getWhat(key)}: the target must be a Buffer/Uint8Array`));
    return this.withReplicas(key, (res, start) => {
      const replicas = this.readable(res, key);
      const size = replicaSize(replicas[0]);
      if (target.byteLength < size) throw new InvalidParamsError(`${getWhat(key)}: the target holds ${target.byteLength} B, the object is ${size} B`);
      const out = asBuffer(target).subarray(0, size);
      if (this.readInline(replicas[0], out)) return this.leaseChecked(size, start, res, key);
      return this.readFrom(replicas, out, leaseDeadline(start, Number(res.lease_ttl_ms)), getWhat(key), undefined).then(() => size);
    });
  }

  /** The rejection of a Get refused before any I/O (pure server, bad key), else undefined. */
  private refusal(key: unknown): Promise<never> | undefined {
    // the usual case without building the error text pool() and checkKey() take
    if (this.d.pool && keyProblem(key) === undefined) return undefined;
    const what = getWhat(key);
    try {
      this.pool(what);
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
    const cached = this.replicaCache.lookup(key, this.d.now());
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
    const start = this.d.now();
    const call = () => this.d.master.getReplicaList({ key });
    const onReply = (res: GetReplicaListResponse__Output) => {
      if (res.status_code === ErrorCode.OK) this.replicaCache.remember(key, res, start);
      return then(res, start);
    };
    if (this.d.rpcThen) return this.d.rpcThen('GetReplicaList', call, onReply);
    return this.d.rpc('GetReplicaList', call).then(onReply);
  }

  /** Forgets every cached replica list (the master changed: its leases are gone). */
  clearReplicaCache(): void {
    this.replicaCache.clear();
  }

  /** Cached replica lists: reads served without a master call, and entries held. */
  replicaCacheStats(): { hits: number; misses: number; entries: number } {
    return { hits: this.replicaCache.hits, misses: this.replicaCache.misses, entries: this.replicaCache.size };
  }

  /** The replicas of a GetReplicaList reply in reading order; throws the reply's error or not-found. */
  private readable(res: GetReplicaListResponse__Output, key: string): ReplicaInfo__Output[] {
    if (res.status_code !== ErrorCode.OK) throw StoreError.fromCode(res.status_code, getWhat(key));
    const replicas = orderReplicas(res.replica_list, this.isOwn);
    if (replicas.length === 0) throw new ObjectNotFoundError(`${getWhat(key)}: no complete replica`);
    return replicas;
  }

  /** `value` if the read finished inside the lease granted at `start`, else LeaseExpiredError (no data). */
  private leaseChecked<T>(value: T, start: number, res: GetReplicaListResponse__Output, key: string): T {
    if (withinLease(this.d.now(), leaseDeadline(start, Number(res.lease_ttl_ms)))) return value;
    throw new LeaseExpiredError(`${getWhat(key)}: the lease expired before the read finished; no data returned`);
  }

  /**
   * Reads a whole small replica into `out` now, without a promise or staging: own-segment pieces
   * by memcpy, remote ones by the engine's inline read (a same-host peer whose grant is cached,
   * range and liveness checked natively). False when any piece cannot be read that way (unknown
   * endpoint, no cached grant, dead peer, bad handle): the caller then runs
   * the general path, which redoes the whole replica (reads are idempotent) and reports errors.
   */
  private readInline(r: ReplicaInfo__Output, out: Buffer): boolean {
    const engine = this.d.engine;
    if (out.length > INLINE_READ_MAX) return false;
    const handles = r.handles;
    try {
      let offset = 0;
      let copied = 0;
      for (let i = 0; i < handles.length; i++) {
        const h = handles[i];
        const size = Number(h.size);
        if (size === 0) continue;
        const target = handles.length === 1 ? out : out.subarray(offset, offset + size);
        offset += size;
        if (this.isOwn(h.segment_name)) {
          this.segmentView(h, size).copy(target);
          copied += size;
          continue;
        }
        const endpoint = h.te_endpoint || this.endpoints.get(h.segment_name);
        if (!endpoint || !engine.readInline(endpoint, Number(h.buffer), target, Number(h.incarnation) || undefined)) return false;
      }
      if (offset !== out.length) return false;
      const meter = this.d.meter;
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
   * Tries the replicas in order until one reads completely inside the lease. `result`: `out` is a
   * fresh result from allocOut (its registration is known).
   */
  private async readFrom(replicas: ReplicaInfo__Output[], out: Buffer, deadline: number, what: string, result?: ResultBuffer): Promise<void> {
    const errors: unknown[] = [];
    for (const r of replicas) {
      if (replicaSize(r) !== out.length) {
        errors.push(new StoreError(ErrorCode.INTERNAL_ERROR, `${what}: replicas disagree on the size`));
        continue;
      }
      try {
        await this.readReplicas([{ pieces: replicaPieces(r, this.isOwn), out, result }], what);
      } catch (e) {
        errors.push(e);
        continue;
      }
      if (!withinLease(this.d.now(), deadline)) throw new LeaseExpiredError(`${what}: the lease expired before the read finished; no data returned`);
      return;
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
  private async readReplicas(objects: { pieces: Piece[]; out: Buffer; result?: ResultBuffer }[], what: string): Promise<void> {
    const ops: TransferOp[] = [];
    let staged: { out: Buffer; p: Piece; at: number }[] | undefined;
    let stageBytes = 0;
    const targets: (number | undefined)[] = [];
    for (const o of objects) {
      let remote = false;
      for (const p of o.pieces) if (!p.local) remote = true;
      // A fresh result buffer (allocOut) knows whether it is registered: skip the native lookup.
      targets.push(!remote ? undefined : o.result ? o.result.address : this.registeredAddress(o.out));
      if (this.needsLookup(o.pieces)) await this.resolveEndpoints(o.pieces);
    }
    for (let k = 0; k < objects.length; k++) {
      if (targets[k] !== undefined) continue;
      for (const p of objects[k].pieces) {
        if (p.local || p.length === 0) continue;
        (staged ??= []).push({ out: objects[k].out, p, at: stageBytes });
        stageBytes += p.length;
      }
    }
    let lease: BufferLease | undefined;
    try {
      if (stageBytes > 0) {
        const pool = this.pool(what);
        lease = pool.tryAcquire(stageBytes) ?? (await pool.acquire(stageBytes));
        for (const s of staged!) ops.push(this.op('read', s.p, lease.address + s.at));
      }
      for (let k = 0; k < objects.length; k++) {
        const direct = targets[k];
        if (direct === undefined) continue;
        for (const p of objects[k].pieces) if (!p.local && p.length > 0) ops.push(this.op('read', p, direct + p.offset));
      }
      const meter = this.d.meter;
      if (ops.length > 0) {
        try {
          await this.d.engine.transfer(ops);
        } catch (e) {
          throw transferFailure(e, `${what}: read`);
        }
        if (meter) for (const op of ops) meter.transfer('engine', 'read', op.length);
      }
      if (lease) {
        const buf = lease.buffer;
        for (const s of staged!) buf.copy(s.out, s.p.offset, s.at, s.at + s.p.length);
      }
      for (const o of objects) {
        for (const p of o.pieces) {
          if (!p.local) continue;
          this.segmentView(p.handle, p.length).copy(o.out, p.offset);
          meter?.transfer('memcpy', 'read', p.length);
        }
      }
    } finally {
      lease?.release();
    }
  }

  /** The engine op of a piece: it names the registration the handle was planned for, and a write its generation. */
  private op(op: 'read' | 'write', p: Piece, localAddress: number): TransferOp {
    const h = p.handle;
    const t: TransferOp = { op, endpoint: this.endpointOf(h), remoteAddress: Number(h.buffer), localAddress, length: p.length };
    const inc = Number(h.incarnation) || 0;
    if (inc !== 0) t.incarnation = inc;
    if (op === 'write') {
      const gen = Number(h.generation) || 0;
      if (gen !== 0) t.generation = gen;
    }
    return t;
  }

  /** Many objects: one BatchGetReplicaList, one transfer batch; a failed object retries alone. */
  getBatch(keys: readonly string[]): Promise<BatchGetResult[]> {
    return this.readBatch(keys, (_i, size) => this.allocOut(size));
  }

  /**
   * Many objects, each into its own target (registered targets are read into directly): one
   * BatchGetReplicaList, one transfer batch. Per key: `size` read, or `error`.
   */
  async getIntoBatch(items: readonly { key: string; target: Uint8Array }[]): Promise<BatchGetIntoResult[]> {
    for (const it of items) {
      if (!(it.target instanceof Uint8Array)) throw new InvalidParamsError(`${getWhat(it.key)}: the target must be a Buffer/Uint8Array`);
    }
    const results = await this.readBatch(
      items.map((it) => it.key),
      (i, size, what) => {
        const target = items[i].target;
        if (target.byteLength < size) throw new InvalidParamsError(`${what}: the target holds ${target.byteLength} B, the object is ${size} B`);
        const out = asBuffer(target).subarray(0, size);
        return { out, address: this.registeredAddress(out) };
      },
    );
    return results.map((r) => (r.error ? { key: r.key, error: r.error } : { key: r.key, size: r.value!.length }));
  }

  private async readBatch(keys: readonly string[], outFor: (i: number, size: number, what: string) => ResultBuffer): Promise<BatchGetResult[]> {
    const what = `batch get of ${keys.length} keys`;
    this.pool(what);
    if (keys.length === 0) return [];
    keys.forEach((k) => checkKey(k, what));
    const start = this.d.now();
    const res = await this.d.rpc('BatchGetReplicaList', () => this.d.master.batchGetReplicaList({ keys: [...keys] }));
    check(res.status_code, what);
    const results: BatchGetResult[] = keys.map((key) => ({ key }));
    const wanted: { i: number; replicas: ReplicaInfo__Output[]; deadline: number; result: ResultBuffer; what: string }[] = [];
    keys.forEach((key, i) => {
      const w = `get ${JSON.stringify(key)}`;
      const r = res.results[i];
      try {
        if (!r) throw new StoreError(ErrorCode.INTERNAL_ERROR, `${w}: the master returned no result`);
        check(r.status_code, w);
        const replicas = orderReplicas(r.replica_list, this.isOwn);
        if (replicas.length === 0) throw new ObjectNotFoundError(`${w}: no complete replica`);
        wanted.push({ i, replicas, deadline: leaseDeadline(start, Number(r.lease_ttl_ms)), result: outFor(i, replicaSize(replicas[0]), w), what: w });
      } catch (e) {
        results[i].error = e as StoreError;
      }
    });
    let batchOk = true;
    try {
      await this.readReplicas(wanted.map((w) => ({ pieces: replicaPieces(w.replicas[0], this.isOwn), out: w.result.out, result: w.result })), what);
    } catch {
      batchOk = false;
    }
    for (const w of wanted) {
      try {
        if (!batchOk) await this.readFrom(w.replicas, w.result.out, w.deadline, w.what, w.result);
        else if (!withinLease(this.d.now(), w.deadline)) throw new LeaseExpiredError(`${w.what}: the lease expired before the read finished; no data returned`);
        results[w.i].value = w.result.out;
      } catch (e) {
        results[w.i].error = e as StoreError;
      }
    }
    return results;
  }
}
