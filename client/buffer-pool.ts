// The client's local buffer pool: staging leases cut from one region registered once with the
// transfer engine (local_buffer_size). When that region is full, a temporary overflow region is
// mapped and registered for one lease and released with it. Callers cap pressure with max_regions
// (leases outstanding), max_bytes (bytes outstanding) and an acquire timeout; a blocking acquire
// waits in FIFO order. A released lease refuses further use.
import { realClock, type Clock } from '../common/clock.js';
import { BufferExhaustedError, InvalidParamsError } from './errors.js';
import type { AllocHandle, BufferAllocator } from '../common/buffer-allocator.js';

/** A piece of registered memory: its address (for the transfer engine) and windows over it. */
export interface PoolRegion {
  readonly address: number;
  readonly size: number;
  /** A Buffer over [offset, offset+length) (a region may be larger than one Buffer can span). */
  view(offset: number, length: number): Buffer;
  /** Unregisters and unmaps (overflow regions only). */
  release(): void;
}

/** Space manager over the primary region: the master's O(1) offset allocator, created with base 0. */
export type RangeAllocator = Pick<BufferAllocator, 'allocate' | 'free'>;

export interface BufferPoolOptions {
  primary: PoolRegion;
  allocator: RangeAllocator;
  /** Maps and registers a temporary region of `size` bytes; absent: no overflow. */
  mapOverflow?: (size: number) => PoolRegion;
  /** Most leases outstanding at once (0: unlimited). */
  maxRegions?: number;
  /** Most bytes leased at once, overflow included (0: unlimited). */
  maxBytes?: number;
  /** Default wait of acquire() before it fails with BufferExhaustedError (ms). */
  acquireTimeoutMs?: number;
  /** Default the real clock. */
  clock?: Clock;
}

export class BufferLease {
  private released = false;
  constructor(
    private readonly pool: BufferPool,
    readonly address: number,
    readonly size: number,
    private readonly bytes: Buffer,
    /** true when this lease lives in its own temporary overflow region */
    readonly overflow: boolean,
    readonly token: AllocHandle | undefined,
    readonly region: PoolRegion | undefined,
  ) {}

  /** The leased bytes. Throws once the lease is released: the memory may already be someone else's. */
  get buffer(): Buffer {
    if (this.released) throw new InvalidParamsError(`buffer lease at 0x${this.address.toString(16)} (${this.size} B) used after release`);
    return this.bytes;
  }

  get isReleased(): boolean {
    return this.released;
  }

  release(): void {
    if (this.released) throw new InvalidParamsError(`buffer lease at 0x${this.address.toString(16)} released twice`);
    this.released = true;
    this.pool.returnLease(this);
  }
}

interface Waiter {
  size: number;
  resolve: (lease: BufferLease) => void;
  reject: (e: Error) => void;
  cancel?: () => void;
}

export class BufferPool {
  private leases = 0;
  private leasedBytes = 0;
  private overflowRegions = 0;
  private readonly waiters: Waiter[] = [];
  private closed = false;

  constructor(private readonly opts: BufferPoolOptions) {}

  get primary(): PoolRegion {
    return this.opts.primary;
  }

  stats(): { leases: number; leasedBytes: number; overflowRegions: number; waiting: number } {
    return { leases: this.leases, leasedBytes: this.leasedBytes, overflowRegions: this.overflowRegions, waiting: this.waiters.length };
  }

  private check(size: number): void {
    if (this.closed) throw new BufferExhaustedError('buffer pool is closed');
    if (!Number.isSafeInteger(size) || size <= 0) throw new InvalidParamsError(`buffer lease size must be a positive integer, got ${size}`);
    const { maxBytes, mapOverflow, primary } = this.opts;
    if (maxBytes && size > maxBytes) throw new BufferExhaustedError(`lease of ${size} B exceeds the pool's max_bytes ${maxBytes}`);
    if (!mapOverflow && size > primary.size) {
      throw new BufferExhaustedError(`lease of ${size} B exceeds the local buffer (${primary.size} B) and overflow is disabled`);
    }
  }

  /** A lease now, or null when the caps or the space do not allow it. */
  tryAcquire(size: number): BufferLease | null {
    this.check(size);
    return this.waiters.length > 0 ? null : this.grant(size);
  }

  /** A lease, waiting (FIFO) up to timeoutMs for one; BufferExhaustedError after that. */
  acquire(size: number, timeoutMs = this.opts.acquireTimeoutMs ?? 10_000): Promise<BufferLease> {
    try {
      this.check(size);
      const now = this.waiters.length > 0 ? null : this.grant(size);
      if (now) return Promise.resolve(now);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { size, resolve, reject };
      if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
        // keepAlive: the waiter's promise settles even when nothing else holds the process open
        w.cancel = (this.opts.clock ?? realClock).schedule(
          timeoutMs,
          () => {
            const i = this.waiters.indexOf(w);
            if (i >= 0) this.waiters.splice(i, 1);
            reject(new BufferExhaustedError(`no ${size} B staging buffer within ${timeoutMs} ms (${this.leases} leases, ${this.leasedBytes} B outstanding)`));
            this.drain();
          },
          { keepAlive: true },
        );
      }
      this.waiters.push(w);
    });
  }

  private grant(size: number): BufferLease | null {
    const { maxRegions, maxBytes, allocator, primary, mapOverflow } = this.opts;
    if (maxRegions && this.leases >= maxRegions) return null;
    if (maxBytes && this.leasedBytes + size > maxBytes) return null;
    const got = size <= primary.size ? allocator.allocate(size) : null;
    let lease: BufferLease;
    if (got) {
      lease = new BufferLease(this, primary.address + got.offset, size, primary.view(got.offset, size), false, got, undefined);
    } else if (mapOverflow) {
      let region: PoolRegion;
      try {
        region = mapOverflow(size);
      } catch (e) {
        throw new BufferExhaustedError(`local buffer full and no overflow region of ${size} B could be mapped`, { cause: e });
      }
      this.overflowRegions++;
      lease = new BufferLease(this, region.address, size, region.view(0, size), true, undefined, region);
    } else {
      return null;
    }
    this.leases++;
    this.leasedBytes += size;
    return lease;
  }

  /** Called by BufferLease.release(). */
  returnLease(lease: BufferLease): void {
    this.leases--;
    this.leasedBytes -= lease.size;
    if (lease.overflow) {
      this.overflowRegions--;
      lease.region!.release();
    } else {
      this.opts.allocator.free(lease.token!);
    }
    this.drain();
  }

  private drain(): void {
    while (this.waiters.length > 0) {
      const w = this.waiters[0];
      let lease: BufferLease | null;
      try {
        lease = this.grant(w.size);
      } catch (e) {
        this.waiters.shift();
        w.cancel?.();
        w.reject(e as Error);
        continue;
      }
      if (!lease) return;
      this.waiters.shift();
      w.cancel?.();
      w.resolve(lease);
    }
  }

  /** Fails every waiter; outstanding leases stay valid until released. */
  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) {
      w.cancel?.();
      w.reject(new BufferExhaustedError('buffer pool closed while waiting'));
    }
  }
}
