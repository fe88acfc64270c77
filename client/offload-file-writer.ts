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
// pwritev. Writes in flight are counted per segment: a write fence on the segment (fence-keeper.ts)
// is acknowledged only once the writes started before it have ended, and a write the fence
// refuses is not started (`refuses`), as the engine does for writes that arrive over the network.
import { writev } from 'node:fs';

/** One range to write: `data` at `position` of the file `fd` (the SSD segment `segment`). */
export interface FileRange {
  segment: string;
  fd: number;
  position: number;
  data: Uint8Array;
}

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

export class OffloadFileWriter {
  /** Per segment: the writes in flight. */
  private readonly inFlight = new Map<string, Set<Promise<unknown>>>();

  /**
   * Writes every range; resolves with each one's outcome in order (undefined: written; an Error:
   * not, maybe partly). Never rejects.
   */
  async write(ranges: readonly FileRange[]): Promise<(Error | undefined)[]> {
    const out: (Error | undefined)[] = ranges.map(() => undefined);
    const order = ranges.map((_, i) => i).sort((a, b) => ranges[a].fd - ranges[b].fd || ranges[a].position - ranges[b].position);
    const runs: number[][] = [];
    let run: number[] = [];
    for (const i of order) {
      const last = run.length > 0 ? ranges[run[run.length - 1]] : undefined;
      const r = ranges[i];
      if (last !== undefined && (last.fd !== r.fd || last.position + last.data.byteLength !== r.position || run.length >= MAX_IOV)) {
        runs.push(run);
        run = [];
      }
      run.push(i);
    }
    if (run.length > 0) runs.push(run);
    await Promise.all(
      runs.map(async (idx) => {
        const first = ranges[idx[0]];
        const p = writeAll(
          first.fd,
          idx.map((i) => ranges[i].data),
          first.position,
        );
        const segments = new Set(idx.map((i) => ranges[i].segment));
        for (const s of segments) this.track(s, p);
        try {
          await p;
        } catch (e) {
          for (const i of idx) out[i] = e as Error;
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
