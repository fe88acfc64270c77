// Memory for large Get results (see src/result_arena.h): one anonymous mapping the transfer
// engine reads into directly; each result is a Buffer over its own ArrayBuffer over a range of it,
// and the range returns to the arena when that ArrayBuffer is garbage collected. The results do
// not count toward V8's external memory (the arena does, while it is filling up); a full arena
// makes take() return undefined (the caller then allocates a Buffer of its own).
import { markAsUntransferable } from 'node:worker_threads';
import { addon, type RawResultArena } from './addon.js';
import { MemoryError, MemoryErrorCode } from './errors.js';

export interface ResultArenaStats {
  size: number;
  /** Bytes in ranges handed out and not yet collected. */
  used: number;
  ranges: number;
  largestFree: number;
  /** take() calls that found no room. */
  refusals: number;
}

export class ResultArena {
  #raw: RawResultArena;
  /** Start of the mapping (register [address, address+size) with the engine). */
  readonly address: number;
  readonly size: number;

  /** Maps `size` bytes and faults them in on a background thread (resident; pages are reused). */
  constructor(size: number) {
    if (!Number.isSafeInteger(size) || size <= 0) throw new MemoryError(MemoryErrorCode.INVALID_ARGUMENT, `ResultArena: size must be a positive integer, got ${size}`);
    try {
      this.#raw = new (addon().ResultArena)(size);
    } catch (e) {
      throw MemoryError.from(e);
    }
    this.address = this.#raw.address();
    this.size = this.#raw.size();
  }

  /** A Buffer of `length` bytes (contents unspecified) that no other live result shares; undefined when full. */
  take(length: number): Buffer | undefined {
    const ab = this.#raw.take(length);
    if (!ab) return undefined;
    // A transfer would move the memory to another owner while the range goes back to the arena.
    markAsUntransferable(ab);
    return Buffer.from(ab);
  }

  /**
   * No more takes (take() returns undefined); the memory of free ranges, and of results as they
   * are collected, goes back to the kernel. Results still held stay valid. Idempotent.
   */
  close(): void {
    this.#raw.close();
  }

  stats(): ResultArenaStats {
    return this.#raw.stats();
  }
}
