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
// Adjacent ranges of one file (copies the master placed one after the other) go out as one
// pwritev, and no call writes more than WRITE_MAX_BYTES (measured, below). One call runs at a
// time: concurrent writes to one file take turns on its lock anyway, and with them on the pool's
// 4 threads, 3 of 10 runs of the tiers bench had the store service spend 4.8-11.6 ms of CPU per
// 4 MiB offload (waiters spinning for the lock on a busy machine); one at a time, 7 of 7 runs
// spent 1.1-1.25 ms. Writes in flight are
// counted per segment: a write fence on the segment (fence-keeper.ts) is acknowledged only once
// the writes started before it have ended; a write it refuses is never started (the copier asks
// FenceKeeper.refuses first), as the engine refuses writes that arrive over the network.
import { writev } from 'node:fs';

/** One range to write: `data` at `position` of the file `fd` (the SSD segment `segment`). */
export interface FileRange {
  segment: string;
  fd: number;
  position: number;
  data: Uint8Array;
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
  fd: number;
  position: number;
  buffers: Uint8Array[];
  bytes: number;
  ranges: number[];
}

/** The write calls for `ranges`: adjacent ones joined, every call at most WRITE_MAX_BYTES and MAX_IOV buffers. */
export function writePieces(ranges: readonly FileRange[]): Piece[] {
  const order = ranges.map((_, i) => i).sort((a, b) => ranges[a].fd - ranges[b].fd || ranges[a].position - ranges[b].position);
  const pieces: Piece[] = [];
  let cur: Piece | undefined;
  for (const i of order) {
    const r = ranges[i];
    for (let off = 0; off < r.data.byteLength || (off === 0 && r.data.byteLength === 0);) {
      const position = r.position + off;
      if (cur === undefined || cur.fd !== r.fd || cur.position + cur.bytes !== position || cur.bytes >= WRITE_MAX_BYTES || cur.buffers.length >= MAX_IOV) {
        cur = { fd: r.fd, position, buffers: [], bytes: 0, ranges: [] };
        pieces.push(cur);
      }
      const n = Math.min(r.data.byteLength - off, WRITE_MAX_BYTES - cur.bytes);
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

  /**
   * Writes every range; resolves with each one's outcome in order (undefined: written; an Error:
   * not, maybe partly). Never rejects.
   */
  async write(ranges: readonly FileRange[]): Promise<(Error | undefined)[]> {
    const out: (Error | undefined)[] = ranges.map(() => undefined);
    await Promise.all(
      writePieces(ranges).map(async (piece) => {
        // one write call at a time (the opening comment says why)
        const p = this.tail.then(() => writeAll(piece.fd, piece.buffers, piece.position));
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
