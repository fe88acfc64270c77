// The store service's extra segments (REST mount API) and the graceful unmount of every segment:
// /api/mount_shm maps a named POSIX shm object, /api/mount a memfd inside the process; a region
// larger than --max_segment_size becomes several segments. A mount that fails part-way gives back
// everything it had mapped and mounted. Unmount with a grace period g > 0 follows one rule:
//
//   t0: UnmountSegment(grace g)  - the master keeps the segment readable, allocates nothing new there
//   t0 + g: UnmountSegment(0)    - the master forgets it: no read is granted on it from now on
//   t0 + g + lease_ttl: unpublish, unregister from the engine, unmap
//
// A read granted before t0 + g holds a lease of at most --default_kv_lease_ttl (the master's
// read lease), and a reader that outlives its lease returns no data; so when the memory goes,
// no read that can still succeed is using it. g = 0 unmounts and frees at once. The store
// service's CXL memory and SSD offload file are mounted here too (mountCxl, mountSsd). Shutdown
// (SIGTERM) applies the same rule to every segment, the global one included.
import { rmSync } from 'node:fs';
import { createOffloadFile } from '../client/offload-file.js';
import type { SegmentInfo } from '../client/client.js';
import type { MapMemoryOptions, MappedRegion } from '../client/native-port.js';
import { StoreError } from '../client/errors.js';
import { ErrorCode } from '../common/error-code.js';
import { MemoryError } from '../native/errors.js';
import { alignUp, RestError, splitRegion, type MemoryMountRequest, type ShmMountRequest, type UnmountRequest } from './mount-request.js';

/** What segment mounting needs from the client. */
export interface SegmentOwner {
  addSegment(region: MappedRegion, opts?: { memory?: 'dram' | 'cxl' | 'ssd'; fileOffset?: number }): Promise<{ name: string; id: string }>;
  unmountSegment(id: string, graceSeconds: number): Promise<void>;
  releaseSegment(id: string): Promise<void>;
  readonly mountedSegments: SegmentInfo[];
}

export type SegmentOrigin = 'shm' | 'memory' | 'cxl' | 'ssd';

export interface SegmentMountsOptions {
  owner: SegmentOwner;
  mapMemory: (opts: MapMemoryOptions) => MappedRegion;
  /** Largest segment; bigger regions are split (a multiple of the page size). */
  maxSegmentSize: number;
  /** The master's read lease TTL (ms): how long a read granted just before the final unmount may run. */
  leaseTtlMs: number;
  /** Alignment of /api/mount sizes: the page size, or the huge page size with huge pages. */
  alignment: number;
  /** memfd huge pages for /api/mount (MC_STORE_USE_HUGEPAGE). */
  hugepage?: { size: '2MB' | '1GB' };
  /** Timer seam: run fn after ms. */
  schedule?: (ms: number, fn: () => void) => void;
  log?: (level: 'info' | 'warn' | 'error', message: string) => void;
}

/**
 * The REST error for a failure behind a call: 400 when the request is at fault (a size or shm
 * object the kernel refuses to map, parameters the master refuses), 503 when the master is
 * unreachable or the client unavailable, 500 otherwise.
 */
function restFailure(e: unknown, what: string): RestError {
  if (e instanceof RestError) return e;
  const code = e instanceof StoreError ? e.code : undefined;
  const status =
    e instanceof MemoryError || code === ErrorCode.INVALID_PARAMS || code === ErrorCode.INVALID_KEY ? 400 : code === ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS ? 503 : 500;
  return new RestError(status, `${what}: ${(e as Error).message}`, { cause: e });
}

export class SegmentMounts {
  /** Segments mounted through the REST API that are still mounted, by id. */
  private readonly mounted = new Map<string, { origin: SegmentOrigin; location: string }>();
  /** Every REST segment whose memory is still held (mounted or draining), by id. */
  private readonly held = new Map<string, { origin: SegmentOrigin; location: string }>();
  /** Unmounts in their grace period or lease wait: resolve once the memory is given back. */
  private readonly draining = new Map<string, Promise<void>>();
  private mapped = 0;
  private closed = false;
  private readonly schedule: (ms: number, fn: () => void) => void;
  private readonly log: NonNullable<SegmentMountsOptions['log']>;

  constructor(private readonly o: SegmentMountsOptions) {
    this.schedule = o.schedule ?? ((ms, fn) => setTimeout(fn, ms));
    this.log = o.log ?? (() => {});
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => (ms <= 0 ? resolve() : this.schedule(ms, resolve)));
  }

  /** Where a segment came from (REST mounts only) and its location hint. */
  describe(id: string): { origin: SegmentOrigin; location: string } | undefined {
    return this.held.get(id);
  }

  /** /api/mount_shm: the shm object's [offset, offset+size) as segments of at most maxSegmentSize. */
  mountShm(req: ShmMountRequest): Promise<{ segmentIds: string[] }> {
    const pieces = splitRegion(req.size, this.o.maxSegmentSize, 'mount_shm');
    let at = req.offset;
    const maps = pieces.map((size) => {
      const offset = at;
      at += size;
      return (): MappedRegion => this.o.mapMemory({ kind: 'shm', name: req.name, size, offset, create: false });
    });
    return this.mountAll('shm', req.location, maps, 'mount_shm').then((segmentIds) => ({ segmentIds }));
  }

  /** /api/mount: memfd memory of `size` rounded up to the alignment, as segments. */
  async mountMemory(req: MemoryMountRequest): Promise<{ segmentIds: string[]; allocatedSize: number }> {
    const allocatedSize = alignUp(req.size, this.o.alignment);
    const pieces = splitRegion(allocatedSize, this.o.maxSegmentSize, 'mount');
    const maps = pieces.map(
      (size) => (): MappedRegion =>
        this.o.mapMemory({ kind: 'memfd', name: `store-mount-${++this.mapped}`, size, hugepage: !!this.o.hugepage, hugepageSize: this.o.hugepage?.size }),
    );
    const segmentIds = await this.mountAll('memory', req.location, maps, 'mount');
    return { segmentIds, allocatedSize };
  }

  /**
   * --enable_cxl: the DAX device or file at `path`, its first `size` bytes, mounted as CXL memory
   * (where the master's cxl strategy places), in segments of at most maxSegmentSize. Not
   * pre-faulted: device memory has no page to fault in, and a file's pages are its own.
   */
  mountCxl(path: string, size: number): Promise<string[]> {
    const pieces = splitRegion(size, this.o.maxSegmentSize, 'cxl');
    let at = 0;
    const maps = pieces.map((piece) => {
      const offset = at;
      at += piece;
      return (): MappedRegion => this.o.mapMemory({ kind: 'file', path, size: piece, offset, create: false });
    });
    return this.mountAll('cxl', path, maps, `CXL memory ${path}`, 'cxl');
  }

  /**
   * --offload_dir/--offload_size: the store service's SSD tier (docs/tiers.md). A new sparse file
   * of `size` bytes in `dir` (ftruncate: no block is written until a DISK replica is), mapped
   * MAP_SHARED like a CXL file and mounted as offload segments (protocol ssd: the master places
   * only DISK replicas there). The file is unlinked once mapped: its blocks live as long as the
   * mapping, so a store service that dies leaves nothing behind (its DISK replicas die with its
   * registration at the master anyway).
   */
  async mountSsd(dir: string, size: number): Promise<string[]> {
    const pieces = splitRegion(size, this.o.maxSegmentSize, 'offload');
    let path: string;
    try {
      path = createOffloadFile(dir, size);
    } catch (e) {
      throw new RestError(400, `offload file in ${dir}: ${(e as Error).message}`, { cause: e });
    }
    let at = 0;
    const maps = pieces.map((piece) => {
      const offset = at;
      at += piece;
      return { map: (): MappedRegion => this.o.mapMemory({ kind: 'file', path, size: piece, offset, create: false }), fileOffset: offset };
    });
    try {
      return await this.mountAll('ssd', path, maps, `SSD offload file ${path}`, 'ssd');
    } finally {
      rmSync(path, { force: true }); // mapped (or failed): the name is not needed
    }
  }

  /** Maps and mounts each piece in turn; on any failure gives back every piece done so far. */
  private async mountAll(
    origin: SegmentOrigin,
    location: string,
    maps: (() => MappedRegion)[] | { map: () => MappedRegion; fileOffset: number }[],
    what: string,
    memory: 'dram' | 'cxl' | 'ssd' = 'dram',
  ): Promise<string[]> {
    if (this.closed) throw new RestError(503, `${what}: the store service is shutting down`);
    const ids: string[] = [];
    try {
      for (const m of maps) {
        // an SSD piece says where it starts in the file (copies write there: client/offload-file-writer.ts)
        const { map, fileOffset } = typeof m === 'function' ? { map: m, fileOffset: undefined } : m;
        let region: MappedRegion;
        try {
          region = map();
        } catch (e) {
          throw restFailure(e, what);
        }
        try {
          ids.push((await this.o.owner.addSegment(region, fileOffset === undefined ? { memory } : { memory, fileOffset })).id);
        } catch (e) {
          region.release(); // not the client's: addSegment left it to us
          throw restFailure(e, what);
        }
      }
    } catch (e) {
      for (const id of ids.reverse()) {
        await this.o.owner.releaseSegment(id).catch((err: Error) => this.log('error', `${what}: undoing segment ${id} failed: ${err.message}`));
      }
      throw e;
    }
    for (const id of ids) {
      this.mounted.set(id, { origin, location });
      this.held.set(id, { origin, location });
    }
    this.log('info', `${what}: mounted ${ids.length} segment(s) ${ids.join(', ')}`);
    return ids;
  }

  /**
   * /api/unmount (origin 'memory') and /api/unmount_shm (origin 'shm'). Every id is checked
   * first: one unknown id, or one mounted by the other endpoint, refuses the whole request and
   * nothing is unmounted. Resolves when the master has taken every unmount (grace 0: and the
   * memory is given back); with a grace period the memory goes later (see the file comment).
   */
  async unmount(origin: SegmentOrigin, req: UnmountRequest): Promise<void> {
    const what = origin === 'shm' ? 'unmount_shm' : 'unmount';
    if (this.closed) throw new RestError(503, `${what}: the store service is shutting down`);
    const other = origin === 'shm' ? '/api/mount' : '/api/mount_shm';
    const problems: string[] = [];
    for (const id of req.segmentIds) {
      const m = this.mounted.get(id);
      if (m?.origin === origin) continue;
      if (m) problems.push(`${id} was mounted by ${other}; unmount it with ${other === '/api/mount' ? '/api/unmount' : '/api/unmount_shm'}`);
      else if (this.draining.has(id)) problems.push(`${id} is already being unmounted`);
      else if (this.o.owner.mountedSegments.some((s) => s.id === id)) problems.push(`${id} is not a segment mounted through the REST API`);
      else problems.push(`${id} is not a mounted segment`);
    }
    if (problems.length > 0) throw new RestError(400, `${what}: nothing unmounted: ${problems.join('; ')}`);
    // Taken out before any await: a concurrent request for the same ids is refused above.
    for (const id of req.segmentIds) this.mounted.delete(id);
    let done = 0;
    try {
      for (const id of req.segmentIds) {
        if (req.graceSeconds === 0) {
          await this.o.owner.releaseSegment(id);
          this.held.delete(id);
        } else {
          await this.o.owner.unmountSegment(id, req.graceSeconds);
          this.drain(id, req.graceSeconds);
        }
        done++;
      }
    } catch (e) {
      // The ids not reached stay mounted (an unmount the master took cannot be taken back).
      for (const id of req.segmentIds.slice(done)) this.mounted.set(id, this.held.get(id)!);
      throw restFailure(e, `${what} (${done} of ${req.segmentIds.length} unmounted)`);
    }
    this.log('info', `${what}: ${req.segmentIds.join(', ')} ${req.graceSeconds > 0 ? `unmounting with a ${req.graceSeconds} s grace period` : 'unmounted'}`);
  }

  /**
   * After unmountSegment(id, grace): the final unmount at the grace's end, the lease wait, the
   * release. A shutdown meanwhile takes over (its own final unmount and lease wait cover this one).
   */
  private drain(id: string, graceSeconds: number): void {
    const run = async (): Promise<void> => {
      await this.sleep(graceSeconds * 1000);
      if (this.closed) return;
      await this.o.owner.unmountSegment(id, 0);
      await this.sleep(this.o.leaseTtlMs);
      if (this.closed) return;
      await this.o.owner.releaseSegment(id);
      this.held.delete(id);
      this.log('info', `segment ${id}: grace period over, memory released`);
    };
    const p = run()
      .catch((e: Error) => this.log('error', `segment ${id}: release after the grace period failed: ${e.message}`))
      .finally(() => this.draining.delete(id));
    this.draining.set(id, p);
  }

  /** Resolves when every unmount in its grace period or lease wait has given its memory back. */
  async drained(): Promise<void> {
    while (this.draining.size > 0) await Promise.allSettled([...this.draining.values()]);
  }

  /**
   * Shutdown: no more REST calls; every segment still mounted (the global one included) is
   * unmounted with `graceSeconds`, and at its end every segment not yet unmounted (REST unmounts
   * still in their own grace period too, cut short) is unmounted for good; resolves after the
   * read lease that follows, when no read that can succeed uses the memory. The caller then
   * closes the client, which gives the memory back. graceSeconds 0: resolves at once.
   */
  async shutdown(graceSeconds: number): Promise<void> {
    this.closed = true;
    this.mounted.clear();
    if (graceSeconds <= 0) return;
    const live = this.o.owner.mountedSegments.filter((s) => s.state !== 'unmounted');
    const fresh = live.filter((s) => s.state === 'mounted');
    const results = await Promise.allSettled(fresh.map((s) => this.o.owner.unmountSegment(s.id, graceSeconds)));
    results.forEach((r, i) => {
      if (r.status === 'rejected') this.log('warn', `shutdown: unmount of segment ${fresh[i].name} with a grace period failed: ${(r.reason as Error).message}`);
    });
    this.log('info', `shutdown: ${live.length} segment(s) closed to new allocations; memory released after ${graceSeconds} s + the ${this.o.leaseTtlMs} ms read lease`);
    await this.sleep(graceSeconds * 1000);
    await Promise.allSettled(live.map((s) => this.o.owner.unmountSegment(s.id, 0)));
    this.log('info', `shutdown: grace period over, segments unmounted; memory released after the ${this.o.leaseTtlMs} ms read lease`);
    await this.sleep(this.o.leaseTtlMs);
  }
}
