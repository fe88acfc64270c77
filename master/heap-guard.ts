// Keeps store_master from running out of heap. The objects' metadata lives in the V8 heap, and
// keys may be up to 4096 characters: measured, about 950,000 objects with such keys reached the
// default heap limit and the process aborted, losing every object. The guard reads V8's heap
// statistics on a timer; from HIGH of the heap limit (70%) the core makes no new placements (PutStart
// and UpsertStart get NO_AVAILABLE_HANDLE, see MasterCore's constructor) until usage is back
// under LOW (60%), after removals and a collection. A larger limit is the operator's choice
// (NODE_OPTIONS=--max-old-space-size=N).
import { every, realClock, type Cancel, type Clock } from '../common/clock.js';
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../common/logger.js';

// Of heap_size_limit, which also counts the young generation's reserve (48 MB by default): with
// --max-old-space-size=200 the limit reads 248 MB and the old generation fills at about 194 MB.
const HIGH = 0.7;
const LOW = 0.6;
/** Often enough that a burst of 4 KB keys between two checks is a few MB. */
const INTERVAL_MS = 50;

export interface HeapNumbers {
  used_heap_size: number;
  heap_size_limit: number;
}

export class HeapGuard {
  /** Shared with every core this process makes (a new one per HA term). */
  readonly state = { full: false };
  private timer: Cancel | undefined;

  constructor(
    private readonly log: Logger,
    private readonly read: () => HeapNumbers = getHeapStatistics,
    private readonly clock: Clock = realClock,
  ) {}

  check(): void {
    const h = this.read();
    const ratio = h.used_heap_size / h.heap_size_limit;
    const mb = (n: number): string => `${Math.round(n / 2 ** 20)} MiB`;
    if (!this.state.full && ratio >= HIGH) {
      this.state.full = true;
      this.log.warn(
        `heap ${mb(h.used_heap_size)} of ${mb(h.heap_size_limit)} (>= ${HIGH * 100}%): refusing new objects (NO_AVAILABLE_HANDLE) until under ${LOW * 100}%; remove objects or raise --max-old-space-size`,
      );
    } else if (this.state.full && ratio < LOW) {
      this.state.full = false;
      this.log.info(`heap ${mb(h.used_heap_size)} of ${mb(h.heap_size_limit)}: accepting new objects again`);
    }
  }

  start(): void {
    this.timer ??= every(this.clock, INTERVAL_MS, () => this.check());
  }

  stop(): void {
    this.timer?.();
    this.timer = undefined;
  }
}
