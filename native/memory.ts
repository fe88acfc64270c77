// Mapped memory for segments and buffers: memfd (default), named POSIX shm, a file on
// hugetlbfs, any file or DAX device, or anonymous memory (from the mmap arena when enabled).
// The bytes are exposed as an external ArrayBuffer over the mapping: never copied.
import { addon, type PopulateResult, type RawRegionHandle } from './addon.js';
import { MemoryError, MemoryErrorCode } from './errors.js';
import { arenaConfig, hugepageDefaults, hugepageSizeBytes, type HugepageSize } from './env-config.js';

export type { PopulateResult } from './addon.js';

export type MemoryKind = 'memfd' | 'shm' | 'hugetlbfs' | 'file' | 'anonymous';

export interface MapOptions {
  size: number;
  kind?: MemoryKind;
  name?: string;
  path?: string;
  create?: boolean;
  offset?: number;
  hugepage?: boolean;
  hugepageSize?: HugepageSize;
  /** Environment consulted for defaults (tests pass their own); default process.env. */
  env?: NodeJS.ProcessEnv;
}

export interface MemoryRegion {
  readonly buffer: ArrayBuffer;
  readonly address: number;
  readonly size: number;
  readonly kind: MemoryKind;
  readonly fd: number;
  readonly released: boolean;
  /**
   * A Buffer over [offset, offset+length) of the region, no copy. Regions may be larger than one
   * TypedArray can span (4 GiB in Node 20), so code takes windows of them rather than one view.
   */
  view(offset: number, length: number): Buffer;
  /**
   * Backs every page with memory now (contents kept), on `threads` threads (default: one per core,
   * at most 8), off the JS thread. Rejects with a MemoryError (OUT_OF_MEMORY) when the machine
   * cannot back the region. A release() meanwhile is safe: the unmap waits for the threads.
   */
  populate(threads?: number): Promise<PopulateResult>;
  release(): void;
}

class MappedRegion implements MemoryRegion {
  #handle: RawRegionHandle;
  #released = false;
  constructor(
    handle: RawRegionHandle,
    readonly buffer: ArrayBuffer,
    readonly address: number,
    readonly size: number,
    readonly kind: MemoryKind,
    readonly fd: number,
  ) {
    this.#handle = handle;
  }
  get released(): boolean {
    return this.#released;
  }
  view(offset: number, length: number): Buffer {
    if (this.#released) throw invalid('MemoryRegion.view: the region is released');
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > this.size) {
      throw invalid(`MemoryRegion.view: [${offset}, +${length}) lies outside the ${this.size}-byte region`);
    }
    return Buffer.from(this.buffer, offset, length);
  }
  async populate(threads = 0): Promise<PopulateResult> {
    if (this.#released) throw invalid('MemoryRegion.populate: the region is released');
    if (!Number.isInteger(threads) || threads < 0) throw invalid(`MemoryRegion.populate: threads must be a non-negative integer, got ${threads}`);
    try {
      return await this.#handle.populate(threads);
    } catch (e) {
      throw MemoryError.from(e);
    }
  }
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#handle.release();
  }
}

function invalid(message: string): MemoryError {
  return new MemoryError(MemoryErrorCode.INVALID_ARGUMENT, message);
}

/** Maps `opts.size` bytes; throws MemoryError (HUGEPAGE_UNAVAILABLE never falls back silently). */
export function mapMemory(opts: MapOptions): MemoryRegion {
  const env = opts.env ?? process.env;
  const kind = opts.kind ?? 'memfd';
  if (!Number.isSafeInteger(opts.size) || opts.size <= 0) throw invalid(`mapMemory: size must be a positive integer, got ${opts.size}`);
  if (opts.offset !== undefined && (!Number.isSafeInteger(opts.offset) || opts.offset < 0)) {
    throw invalid(`mapMemory: offset must be a non-negative integer, got ${opts.offset}`);
  }
  if (kind === 'shm' && !opts.name) throw invalid("mapMemory(kind 'shm'): name is required");
  if ((kind === 'file' || kind === 'hugetlbfs') && !opts.path) throw invalid(`mapMemory(kind '${kind}'): path is required`);
  let defaults: ReturnType<typeof hugepageDefaults>;
  try {
    defaults = hugepageDefaults(env);
  } catch (e) {
    throw invalid((e as Error).message);
  }
  // The env default applies where huge pages make sense for the kind (memfd, anonymous).
  const envHuge = (kind === 'memfd' || kind === 'anonymous') && defaults.hugepage;
  const hugepage = opts.hugepage ?? envHuge;
  const hugepageSize = opts.hugepageSize ?? defaults.hugepageSize;
  if (hugepageSize !== '2MB' && hugepageSize !== '1GB') throw invalid(`mapMemory: hugepageSize must be '2MB' or '1GB'`);
  const arena = kind === 'anonymous' ? arenaConfig(env) : { enabled: false, poolSize: 0 };
  try {
    const raw = addon().mapMemory({
      kind,
      size: opts.size,
      name: opts.name,
      path: opts.path,
      create: opts.create ?? kind === 'shm',
      offset: opts.offset ?? 0,
      hugepage,
      hugepageSize: hugepageSizeBytes(hugepageSize),
      arenaEnabled: arena.enabled,
      arenaPoolSize: arena.poolSize,
    });
    return new MappedRegion(raw.handle, raw.buffer, raw.address, raw.size, raw.kind as MemoryKind, raw.fd);
  } catch (e) {
    throw MemoryError.from(e);
  }
}

/** Address of the first byte of `view` (any TypedArray, Buffer or DataView). */
export function addressOf(view: ArrayBufferView | ArrayBuffer): number {
  try {
    return addon().addressOf(view);
  } catch (e) {
    throw MemoryError.from(e);
  }
}

/** Arena state: whether it was decided/enabled, its size, bytes handed out, exhaustion fallbacks. */
export function arenaStats(): ReturnType<ReturnType<typeof addon>['arenaStats']> {
  return addon().arenaStats();
}
