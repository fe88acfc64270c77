// Eviction rounds, paid in bounded steps. A round begins when a PutStart finds no space or usage
// reaches the high watermark; its target is evictionRatio of the objects in memory (SSD-only
// objects of the disk tier are not counted). The PutStart that began
// it evicts only what its allocation needs (its size in bytes, then twice as much more on each
// failed retry, at most PUT_EVICTION_CAP objects); what is left of the target is a debt that
// sweeps pay, at most SWEEP_EVICTION_BATCH objects each. Zombie writes are released first and
// count toward the target. Which objects go, and in what order, is eviction.ts.
import type { EvictionOrder } from './eviction.js';
import { evictionTarget, PUT_EVICTION_CAP, scanLimitFor, selectZombies, SWEEP_EVICTION_BATCH, type InFlightWrites } from './eviction.js';
import type { MasterCoreConfig } from './master-core-config.js';
import type { ObjectMeta } from './object-meta.js';

/** What one bounded eviction step did; `pending` objects are still owed (paid by later sweeps). */
export interface EvictionResult {
  evicted: number;
  released: number;
  pending: number;
}

/** What the round needs from the core: the candidates, and the two ways of freeing space. */
export interface EvictionHost {
  /** Unfinished writes, oldest first. */
  readonly inFlight: InFlightWrites;
  readonly order: EvictionOrder;
  /** Objects with a replica in memory (the ratio's base). */
  objectCount(): number;
  /** Cancels a zombie write, freeing its space. */
  release(meta: ObjectMeta): void;
  /**
   * Frees a complete object's memory (deleting it, or keeping its DISK replica). False: not now
   * (its offload copy is on the way, disk-tier.ts): the round moves on to the next candidate.
   */
  evict(meta: ObjectMeta): boolean;
}

type RoundConfig = Pick<MasterCoreConfig, 'evictionRatio' | 'putStartReleaseTimeoutMs' | 'allowEvictSoftPinnedObjects' | 'defaultKvSoftPinTtlMs'>;

export class EvictionRound {
  /** Objects the current round still has to remove (0: no round in progress). */
  debt = 0;
  evictionsTotal = 0;

  constructor(
    private readonly host: EvictionHost,
    private readonly config: RoundConfig,
  ) {}

  /** One bounded step of the round in progress, or of a new round when none is. */
  step(now: number, budget: number = SWEEP_EVICTION_BATCH): EvictionResult {
    if (this.debt <= 0) this.debt = evictionTarget(this.host.objectCount(), this.config.evictionRatio);
    const s = this.evictUpTo(now, budget, this.debt, Infinity);
    this.debt = s.exhausted ? 0 : Math.max(0, this.debt - s.evicted - s.released);
    return { evicted: s.evicted, released: s.released, pending: this.debt };
  }

  /**
   * A PutStart of `bytes` found no space: evicts for it and calls `retry` after each batch until
   * it returns true, the cap is reached or nothing is left to evict. Begins a round (or keeps the
   * larger debt of the one in progress). Returns whether nothing was left to evict.
   */
  makeRoom(now: number, bytes: number, retry: () => boolean): boolean {
    const target = evictionTarget(this.host.objectCount(), this.config.evictionRatio);
    let goal = bytes;
    let spent = 0;
    let exhausted = false;
    while (!exhausted && spent < PUT_EVICTION_CAP) {
      const s = this.evictUpTo(now, PUT_EVICTION_CAP - spent, PUT_EVICTION_CAP, goal);
      spent += s.evicted + s.released;
      exhausted = s.exhausted;
      if (s.evicted + s.released === 0 || retry()) break;
      goal *= 2;
    }
    this.debt = exhausted ? 0 : Math.max(this.debt, target - spent);
    return exhausted;
  }

  /**
   * Releases zombie writes, then evicts candidates in spec order, until `maxObjects` are gone in
   * all, or `maxVictims` objects are gone, or at least `bytesGoal` bytes were freed. `exhausted`:
   * no candidate was left (as opposed to a limit being reached).
   */
  private evictUpTo(now: number, maxObjects: number, maxVictims: number, bytesGoal: number): { evicted: number; released: number; exhausted: boolean } {
    const host = this.host;
    let released = 0;
    let freed = 0;
    for (const meta of selectZombies(host.inFlight, now, this.config.putStartReleaseTimeoutMs, maxObjects)) {
      freed += meta.bytes();
      host.release(meta);
      released++;
      if (freed >= bytesGoal) return { evicted: 0, released, exhausted: false };
    }
    const limit = Math.min(maxObjects, maxVictims) - released;
    if (limit <= 0) return { evicted: 0, released, exhausted: false };
    const policy = { allowEvictSoftPinned: this.config.allowEvictSoftPinnedObjects, softPinTtlMs: this.config.defaultKvSoftPinTtlMs };
    const cursor = host.order.cursor(now, policy, scanLimitFor(limit));
    let evicted = 0;
    let deferred = 0;
    let exhausted = false;
    while (evicted < limit && freed < bytesGoal) {
      const meta = cursor.next();
      if (meta === null) {
        exhausted = !cursor.capped;
        break;
      }
      const bytes = meta.bytes();
      if (!host.evict(meta)) {
        if (++deferred > scanLimitFor(limit)) break; // a bounded step, like the cursor's skips
        continue;
      }
      freed += bytes;
      evicted++;
    }
    this.evictionsTotal += evicted;
    return { evicted, released, exhausted };
  }
}
