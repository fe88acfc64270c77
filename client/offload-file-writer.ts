// Writes of replica copies into this client's own SSD offload files (docs/tiers.md "SSD tier"):
// positioned writes (pwritev, on the libuv pool, never the event loop) of the source bytes straight
// from the memory segment that holds them, instead of a store into the file's shared mapping.
//
// Why not the mapping: a store into a page of the sparse file that is not resident takes a page
// fault per 4 KiB (a hole: a zeroed page and a block reservation; a page of the file written
// before and reclaimed since: read from the device first, though every byte is overwritten),
// and a full disk turns into SIGBUS. Measured here on ext4 (2,048 copies of 64 KiB into a new
// sparse file, one process): through the mapping 23-126 us a copy (mostly system time, varying
// run to run), pwrite 16-19 us; a full disk is an ENOSPC for that copy only. The page cache is the
// mapping's, so readers through the mapping (the engine serving the segment) see the bytes.
//
// Page-aligned ranges (position, length and source address multiples of DIRECT_ALIGN: 64 KiB KV
// pages are) are written with O_DIRECT, through a second descriptor of the same file
// (/proc/self/fd, the file is unlinked), the rest buffered. A buffered write copies every byte
// into a page-cache page the kernel must first find (ext4's delayed allocation per 4 KiB, and on
// this VM a fresh page the host backs on first touch), then writes it back from a kworker; a
// direct write hands the source pages to the device. Measured here (6.18, ext4 on virtio,
// 2026-11-28): buffered 64 KiB writes cost 12-38 us of system CPU each in a test program and
// 20-150 us per offloaded 64 KiB object in the store service (more the more the page cache holds,
// 154 us at steady state over 65,536 puts), direct writes of 4 MiB 2.9 us per 64 KiB at 2.9-3.4 GB/s
// (the device's sequential speed; 64 KiB direct writes cost 23-27 us each: the call, not the bytes,
// costs, so adjacent ranges are joined). Reads of the file see the bytes either way: a direct
// write drops the range's pages from the page cache, mappings included. What a direct write does
// not do is leave the bytes in the page cache for a read soon after: that read goes to the device.
// A file system that refuses O_DIRECT (at open, or EINVAL at a write) gets buffered writes.
//
// Adjacent ranges of one file (copies the master placed one after the other) go out as one
// pwritev, and no call writes more than WRITE_MAX_BYTES buffered or DIRECT_MAX_BYTES direct
// (measured, below). One call runs at a time: concurrent writes to one file take turns on its lock
// anyway, and with them on the pool's 4 threads, 3 of 10 runs of the tiers bench had the store
// service spend 4.8-11.6 ms of CPU per 4 MiB offload (waiters spinning for the lock on a busy
// machine); one at a time, 7 of 7 runs spent 1.1-1.25 ms (buffered). Direct writes of 4 MiB from 2
// or 4 threads were no faster than from one (2.8-3.0 GB/s). Writes in flight are
// counted per segment: a write fence on the segment (fence-keeper.ts) is acknowledged only once
// the writes started before it have ended; a write it refuses is never started (the copier asks
// FenceKeeper.refuses first), as the engine refuses writes that arrive over the network.
import { closeSync, constants, openSync, writev } from 'node:fs';

/** One range to write: `data` at `position` of the file `fd` (the SSD segment `segment`). */
export interface FileRange {
  segment: string;
  fd: number;
  position: number;
  data: Uint8Array;
  /** Where `data` lies in this process's memory, when known: a page-aligned range is written with O_DIRECT. */
  address?: number;
}

/**
 * Alignment of a direct range's position, length and source address: the page size (devices ask
 * for their logical block, 512 or 4096), so a direct range never shares a page of the file with a
 * buffered one.
 */
export const DIRECT_ALIGN = 4096;
/** Bytes per direct write call at most: 2-4 MiB calls reach the device's sequential speed here. */
export const DIRECT_MAX_BYTES = 4 * 1024 * 1024;

/** Whether a range may be written with O_DIRECT (the opening comment). */
export function directable(r: FileRange): boolean {
  return r.address !== undefined && r.address % DIRECT_ALIGN === 0 && r.position % DIRECT_ALIGN === 0 && r.data.byteLength > 0 && r.data.byteLength % DIRECT_ALIGN === 0;
}

/**
 * Bytes per write call at most. Measured here (6.18, ext4, 1 GiB into a new sparse file): writes of
 * 64-512 KiB cost 140-210 us of CPU per MiB every run; writes of 1-4 MiB cost 35-2,300 us per MiB
 * depending on the run (larger page-cache folios for larger writes, cheap only when the kernel has
 * them at hand), 550-2,300 us in most runs. A 4 MiB copy is therefore written in 16 calls.
 */
export const WRITE_MAX_BYTES = 256 * 1024;
/** Most buffers in one pwritev (Linux's IOV_MAX is 1024). */
const MAX_IOV = 1024;

function pwritev(fd: number, buffers: Uint8Array[], position: number): Promise<number> {
  return new Promise((resolve, reject) => writev(fd, buffers, position, (e, n) => (e ? reject(e) : resolve(n))));
}

/** Writes `buffers` at `position` whole (a short write continues where it stopped). */
async function writeAll(fd: number, buffers: Uint8Array[], position: number): Promise<void> {
  let rest = buffers;
  let at = position;
  while (rest.length > 0) {
    let n = await pwritev(fd, rest, at);
    if (n <= 0) throw new Error(`pwritev at ${at} wrote nothing`);
    at += n;
    let i = 0;
    while (i < rest.length && n >= rest[i].byteLength) n -= rest[i++].byteLength;
    rest = rest.slice(i);
    if (n > 0) rest[0] = rest[0].subarray(n);
  }
}

/** One write call: adjacent bytes of one file, and the ranges they belong to. */
interface Piece {
  /** The file's descriptor (the mapping's). */
  fd: number;
  /** Its O_DIRECT descriptor when the call is a direct one. */
  direct: number | undefined;
  position: number;
  buffers: Uint8Array[];
  bytes: number;
  ranges: number[];
}

/**
 * The write calls for `ranges`: adjacent ones joined, a call direct (through `directOf`'s
 * descriptor, when it gives one for a directable range) or buffered, never both, and at most
 * DIRECT_MAX_BYTES or WRITE_MAX_BYTES and MAX_IOV buffers.
 */
export function writePieces(ranges: readonly FileRange[], directOf: (r: FileRange) => number | undefined = () => undefined): Piece[] {
  const directs = ranges.map((r) => (directable(r) ? directOf(r) : undefined));
  const order = ranges
    .map((_, i) => i)
    .sort((a, b) => ranges[a].fd - ranges[b].fd || Number(directs[a] !== undefined) - Number(directs[b] !== undefined) || ranges[a].position - ranges[b].position);
  const pieces: Piece[] = [];
  let cur: Piece | undefined;
  for (const i of order) {
    const r = ranges[i];
    const direct = directs[i];
    const max = direct === undefined ? WRITE_MAX_BYTES : DIRECT_MAX_BYTES;
    for (let off = 0; off < r.data.byteLength || (off === 0 && r.data.byteLength === 0);) {
      const position = r.position + off;
      if (cur === undefined || cur.fd !== r.fd || cur.direct !== direct || cur.position + cur.bytes !== position || cur.bytes >= max || cur.buffers.length >= MAX_IOV) {
        cur = { fd: r.fd, direct, position, buffers: [], bytes: 0, ranges: [] };
        pieces.push(cur);
      }
      const n = Math.min(r.data.byteLength - off, max - cur.bytes);
      cur.buffers.push(r.data.subarray(off, off + n));
      cur.bytes += n;
      if (cur.ranges[cur.ranges.length - 1] !== i) cur.ranges.push(i);
      off += n;
    }
  }
  return pieces;
}

export class OffloadFileWriter {
  /** The last write call queued: the next one starts when it has ended. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Per segment: the writes in flight. */
  private readonly inFlight = new Map<string, Set<Promise<unknown>>>();
  /** Per segment: its file opened again with O_DIRECT; null: not to be (refused at open, or off). */
  private readonly directFds = new Map<string, number | null>();
  /** O_DIRECT descriptors whose writes the file refused (EINVAL): kept open until `release`, unused. */
  private readonly refused = new Set<number>();
  /** Bytes written so far each way. */
  readonly counts = { directBytes: 0, bufferedBytes: 0 };

  /** `direct: false`: every write buffered (as before O_DIRECT; tests compare the two). */
  constructor(private readonly opts: { direct?: boolean } = {}) {}

  /** The O_DIRECT descriptor of a range's file, opened on first use; undefined when there is none. */
  private directFd(r: FileRange): number | undefined {
    let fd = this.directFds.get(r.segment);
    if (fd === undefined) {
      fd = null;
      if (this.opts.direct !== false) {
        try {
          fd = openSync(`/proc/self/fd/${r.fd}`, constants.O_WRONLY | constants.O_DIRECT);
        } catch {
          // no O_DIRECT here (or no /proc): buffered
        }
      }
      this.directFds.set(r.segment, fd);
    }
    return fd === null || this.refused.has(fd) ? undefined : fd;
  }

  /** The segment's file is about to be closed: its O_DIRECT descriptor goes first (call after `settled`). */
  release(segment: string): void {
    const fd = this.directFds.get(segment);
    this.directFds.delete(segment);
    if (fd === undefined || fd === null) return;
    this.refused.delete(fd);
    closeSync(fd);
  }

  /** Closes every O_DIRECT descriptor (the client's files are about to be closed). */
  close(): void {
    for (const segment of [...this.directFds.keys()]) this.release(segment);
  }

  /** One write call; a direct one the file refuses (EINVAL) is made buffered, and so are the file's later ones. */
  private async writePiece(piece: Piece): Promise<void> {
    if (piece.direct !== undefined && !this.refused.has(piece.direct)) {
      try {
        await writeAll(piece.direct, piece.buffers, piece.position);
        this.counts.directBytes += piece.bytes;
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EINVAL') throw e;
        this.refused.add(piece.direct);
      }
    }
    await writeAll(piece.fd, piece.buffers, piece.position);
    this.counts.bufferedBytes += piece.bytes;
  }

  /**
   * Writes every range; resolves with each one's outcome in order (undefined: written; an Error:
   * not, maybe partly). Never rejects. `lastStarted` is called when the last of its write calls
   * starts after others (they have ended: one call at a time; never for a single call): the caller
   * may line up more writes behind it, so the device has the next ones as soon as this one ends.
   */
  async write(ranges: readonly FileRange[], lastStarted?: () => void): Promise<(Error | undefined)[]> {
    const out: (Error | undefined)[] = ranges.map(() => undefined);
    const pieces = writePieces(ranges, (r) => this.directFd(r));
    await Promise.all(
      pieces.map(async (piece, n) => {
        // one write call at a time (the opening comment says why)
        const p = this.tail.then(() => {
          if (n > 0 && n === pieces.length - 1) lastStarted?.();
          return this.writePiece(piece);
        });
        this.tail = p.catch(() => {});
        const segments = new Set(piece.ranges.map((i) => ranges[i].segment));
        for (const s of segments) this.track(s, p);
        try {
          await p;
        } catch (e) {
          for (const i of piece.ranges) out[i] = e as Error;
        } finally {
          for (const s of segments) this.untrack(s, p);
        }
      }),
    );
    return out;
  }

  /** Resolves once every write started so far on `segment` has ended (written or failed). */
  async settled(segment: string): Promise<void> {
    const writes = this.inFlight.get(segment);
    if (writes !== undefined) await Promise.allSettled([...writes]);
  }

  private track(segment: string, p: Promise<unknown>): void {
    let set = this.inFlight.get(segment);
    if (set === undefined) this.inFlight.set(segment, (set = new Set()));
    set.add(p);
  }

  private untrack(segment: string, p: Promise<unknown>): void {
    const set = this.inFlight.get(segment);
    if (set === undefined) return;
    set.delete(p);
    if (set.size === 0) this.inFlight.delete(segment);
  }
}
