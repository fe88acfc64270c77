// The hit rate of a cluster over the last minute, from successive scrapes of its master's
// counters (GetReplicaList calls, and those answered OBJECT_NOT_FOUND). Pure: the caller gives the
// time of each scrape. A counter that goes down (a restarted or new master) starts the window over.

export const HIT_RATE_WINDOW_MS = 60_000;

export interface LookupCounters {
  lookups: number;
  misses: number;
}

interface Sample extends LookupCounters {
  at: number;
}

export class HitRateWindow {
  private samples: Sample[] = [];

  /** Records a scrape taken at `at` (ms, monotonic). */
  record(at: number, c: LookupCounters): void {
    const last = this.samples[this.samples.length - 1];
    if (last && (c.lookups < last.lookups || c.misses < last.misses)) this.samples = [];
    this.samples.push({ at, ...c });
    // keep the newest sample at least a window old (the base of the rate), drop older ones
    while (this.samples.length > 2 && this.samples[1].at <= at - HIT_RATE_WINDOW_MS) this.samples.shift();
  }

  /**
   * Hits over lookups between the oldest kept scrape and the newest (up to about a minute), and
   * the seconds that covers; undefined before two scrapes or when nothing was looked up.
   */
  rate(): { hitRate: number; windowSeconds: number } | undefined {
    if (this.samples.length < 2) return undefined;
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    const lookups = last.lookups - first.lookups;
    if (lookups <= 0) return undefined;
    const misses = last.misses - first.misses;
    return { hitRate: (lookups - misses) / lookups, windowSeconds: Math.round((last.at - first.at) / 1000) };
  }
}

/** "97.5%", or "-" when no lookup happened in the window. */
export function formatHitRate(r: { hitRate: number } | undefined): string {
  return r === undefined ? '-' : `${(r.hitRate * 100).toFixed(1)}%`;
}
