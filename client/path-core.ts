// What the write and read paths share (write-path.ts, read-path.ts; data-path.ts puts them
// together): the types of the data path's API, its dependencies, and PathCore: staging memory,
// which memory is registered, own-segment views, borrowed caller buffers, endpoints of segments and
// the engine op of a piece (with its incarnation and generation).
import type { FileTier } from './file-tier.js';
import type { HotCache } from './hot-cache.js';
import type { BufHandle__Output } from '../proto/gen/store/BufHandle.js';
import type { ReplicateConfig } from '../proto/gen/store/ReplicateConfig.js';
import type { PutStartRequest } from '../proto/gen/store/PutStartRequest.js';
import type { MasterClient } from './master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { keyProblem } from '../common/key-rules.js';
import type { BufferPool } from './buffer-pool.js';
import { InvalidParamsError, StoreError, TransferError, transferErrorCode, UnavailableError } from './errors.js';
import type { MappedRegion, ResultArenaPort, TransferEnginePort } from './native-port.js';
import type { TransferMeter } from './client-metrics.js';
import { RESULT_SLAB_BYTES, RESULT_SLAB_MAX_ITEM, ResultSlab } from './result-slab.js';
import type { FileRange, OffloadFileWriter } from './offload-file-writer.js';
import type { Piece, TransferOp } from './transfer-plan.js';

const EMPTY = new Uint8Array(0);

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
  /** What the master records as its protocol when it is not the client's transport: 'cxl' marks CXL memory (the cxl strategy places there). */
  kind?: 'cxl' | 'ssd';
  /** An SSD segment's file: the mapping's descriptor and the file offset of its first byte (copies write there: offload-file-writer.ts). */
  file?: { fd: number; offset: number };
}

export type MasterApi = Pick<
  MasterClient,
  | 'putStart'
  | 'batchPutStart'
  | 'putEnd'
  | 'batchPutEnd'
  | 'putRevoke'
  | 'batchPutRevoke'
  | 'upsertStart'
  | 'batchUpsertStart'
  | 'upsertEnd'
  | 'batchUpsertEnd'
  | 'upsertRevoke'
  | 'batchUpsertRevoke'
  | 'getReplicaList'
  | 'batchGetReplicaList'
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
  /**
   * CRC-32C of values (native/checksum.ts): writes record each slice's, reads check them
   * (docs/integrity.md). Absent: none recorded, none checked.
   */
  checksums?: Checksummer;
  /** The file tier (file-tier.ts): Puts stage their value for a file; Gets read file replicas. */
  files?: FileTier;
  /** Told of every replica whose bytes did not have their recorded CRC-32C (client metrics). */
  onChecksumMismatch?: (key: string, segment: string) => void;
  /** The local hot cache of values read from DISK replicas (hot-cache.ts; MC_STORE_LOCAL_HOT_CACHE_SIZE), if on. */
  hotCache?: HotCache;
  /** Replica copies into own SSD files go through it (positioned writes; replica-copy.ts). */
  offloadFiles?: OffloadFileWriter;
  /** Whether the write fence of own segment `name` (registration `incarnation`) refuses generation `gen` (fence-keeper.ts). */
  fenced?: (name: string, gen: number, incarnation: number) => boolean;
}

/** CRC-32C where the data path has the bytes in hand anyway. */
export interface Checksummer {
  /** CRC-32C of `data`. */
  of(data: Uint8Array): number;
  /** Copies `src` into `dst` (at least as long) in the same pass; returns the CRC-32C of `src`. */
  copy(dst: Uint8Array, src: Uint8Array): number;
}

export function slicesOf(value: Value, what: string): Uint8Array[] {
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

/** The PutStart/UpsertStart request of `key` stored as `slices`. */
export function putStartRequest(key: string, slices: readonly Uint8Array[], config: PutConfig | undefined, what: string): PutStartRequest {
  const slice_lengths = slices.map((s) => s.byteLength);
  return { key, value_length: slice_lengths.reduce((a, b) => a + b, 0), slice_lengths, config: wireConfig(config, what) };
}

/** The engine op of `length` bytes at handle `h` (at `endpoint`): it names the registration the handle was planned for, and a write its generation. */
export function handleOp(op: 'read' | 'write', h: BufHandle__Output, endpoint: string, localAddress: number, length: number): TransferOp {
  const t: TransferOp = { op, endpoint, remoteAddress: Number(h.buffer), localAddress, length };
  const inc = Number(h.incarnation) || 0;
  if (inc !== 0) t.incarnation = inc;
  if (op === 'write') {
    const gen = Number(h.generation) || 0;
    if (gen !== 0) t.generation = gen;
  }
  return t;
}

export function wireConfig(c: PutConfig | undefined, what: string): ReplicateConfig {
  const n = c?.replica_num ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new InvalidParamsError(`${what}: replica_num must be an integer >= 1, got ${c?.replica_num}`);
  return { replica_num: n, with_soft_pin: !!c?.with_soft_pin, with_hard_pin: !!c?.with_hard_pin, preferred_segment: c?.preferred_segment ?? '' };
}

export function asBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

/** Turns an engine rejection into a TransferError carrying the right ErrorCode. */
export function transferFailure(e: unknown, what: string): TransferError {
  return new TransferError(`${what}: ${(e as Error)?.message ?? String(e)}`, { cause: e, code: transferErrorCode(e) });
}

/** Puts of caller buffers from this size up register them in place instead of staging a copy. */
export const LARGE_VALUE_BYTES = 2 * 1024 * 1024;

/**
 * Get results from this size up come from the result arena (read into directly, no staging copy);
 * below it the copy costs less than the arena's range bookkeeping and 4 KiB rounding.
 */
export const ARENA_RESULT_BYTES = 32 * 1024;

/** A Get's output buffer and, when it lies in registered memory, its address (read into directly). */
export interface ResultBuffer {
  out: Buffer;
  address: number | undefined;
}

/** Largest Get the engine may read inline (native kInlineMemcpyMax). */
export const INLINE_READ_MAX = 64 * 1024;

/** A Get's name in errors; built only when one is raised. */
export function getWhat(key: unknown): string {
  return `get ${JSON.stringify(key)}`;
}

export function check(status: number, what: string): void {
  if (status !== ErrorCode.OK) throw StoreError.fromCode(status, what);
}

export class PathCore {
  readonly endpoints = new Map<string, string>();

  /** Large caller buffers registered while writes from them are in flight: address -> size, users. */
  readonly borrowed = new Map<number, { size: number; users: number }>();

  readonly results: ResultSlab;

  pool(what: string): BufferPool {
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
  allocOut(size: number): ResultBuffer {
    const arena = this.d.resultArena;
    if (arena && size >= ARENA_RESULT_BYTES) {
      const out = arena.take(size);
      if (out) return { out, address: this.d.addressOf(out) };
    }
    return this.results.take(size);
  }

  isOwn = (segmentName: string): boolean => this.d.localMemcpy && this.d.segments.has(segmentName);

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
  segmentView(h: BufHandle__Output, length: number): Buffer {
    const s = this.ownSegment(h, length);
    return s.region.view(Number(h.buffer) - s.region.address, length);
  }

  /**
   * Where a handle on an own SSD segment lies in its file, for a write there of generation
   * `h.generation`: undefined when the segment is no own file-backed one; throws like segmentView,
   * and when the segment's write fence refuses the generation.
   */
  segmentFile(h: BufHandle__Output, length: number): FileRange | undefined {
    const seg = this.d.segments.get(h.segment_name);
    if (seg?.file === undefined || this.d.offloadFiles === undefined) return undefined;
    const s = this.ownSegment(h, length);
    const gen = Number(h.generation) || 0;
    if (gen !== 0 && this.d.fenced?.(s.name, gen, s.incarnation) === true) {
      throw new TransferError(`a write of generation ${gen} into own segment ${s.name} is refused by its write fence (given up by the master)`, {
        code: ErrorCode.TRANSFER_FAILED,
      });
    }
    return { segment: s.name, fd: s.file!.fd, position: s.file!.offset + Number(h.buffer) - s.region.address, data: EMPTY };
  }

  /** The own segment a handle names, checked: still mounted, the same registration, the range inside it. */
  private ownSegment(h: BufHandle__Output, length: number): OwnSegment {
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
    return s;
  }

  /**
   * Registers a large caller buffer with the engine for the writes from it, so a Put reads it in
   * place instead of copying it into staging first; undefined when that is refused (staged then).
   * Concurrent Puts of one buffer share the registration; the last one drops it.
   */
  borrow(src: Uint8Array): number | undefined {
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
  async giveBack(address: number): Promise<void> {
    const b = this.borrowed.get(address);
    if (!b || --b.users > 0) return;
    this.borrowed.delete(address);
    await this.d.engine.unregisterRegion(address);
  }

  /** Whether some remote piece's handle carries no endpoint we know (a metadata lookup is due). */
  needsLookup(pieces: readonly Piece[]): boolean {
    for (const p of pieces) if (!p.local && !p.handle.te_endpoint && !this.endpoints.has(p.handle.segment_name)) return true;
    return false;
  }

  /** Fills in endpoints for handles that carry none, from the metadata service. */
  async resolveEndpoints(pieces: readonly Piece[]): Promise<void> {
    for (const p of pieces) {
      if (p.local || p.handle.te_endpoint || this.endpoints.has(p.handle.segment_name)) continue;
      const ep = await this.d.lookupEndpoint(p.handle.segment_name);
      if (!ep) throw new TransferError(`no transfer endpoint known for segment ${p.handle.segment_name}`);
      this.endpoints.set(p.handle.segment_name, ep);
    }
  }

  endpointOf = (h: BufHandle__Output): string => h.te_endpoint || this.endpoints.get(h.segment_name)!;

  // ---------------------------------------------------------------- writes

  /** The engine op of a piece: it names the registration the handle was planned for, and a write its generation. */
  op(op: 'read' | 'write', p: Piece, localAddress: number): TransferOp {
    return handleOp(op, p.handle, this.endpointOf(p.handle), localAddress, p.length);
  }

  /** Checksums recorded and checked, or undefined when they are off. */
  readonly checksums: Checksummer | undefined;

  constructor(readonly d: DataPathDeps) {
    this.checksums = d.checksums;
    const arena = d.resultArena;
    this.results = new ResultSlab(RESULT_SLAB_BYTES, RESULT_SLAB_MAX_ITEM, arena && { take: (n) => arena.take(n), addressOf: (b) => d.addressOf(b) });
  }
}
