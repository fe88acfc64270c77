// The state every part of the master core works on (writes, upserts, membership, removals,
// diagnostics, state import: the files MasterCore's facade delegates to), in one object they all
// receive: the object table and the structures derived from it, the segments and clients, and
// the counters kept with them. It holds data and the bookkeeping that keeps its own fields in
// step (pin counts, change reports); what changes several of them at once is object-lifecycle.ts.
import type { AllocationStrategy } from './allocation-strategy.js';
import type { ChangeSink } from './change-sink.js';
import { ClientRegistry } from './client-registry.js';
import { CopierRoster } from './copier-roster.js';
import { CxlStrategy } from './cxl-strategy.js';
import type { DiskTier } from './disk-tier.js';
import { EvictionOrder } from './eviction.js';
import { EvictionRound } from './eviction-round.js';
import { FileIndex } from './file-index.js';
import { FreeRatioFirstStrategy } from './free-ratio-first-strategy.js';
import { InFlightList } from './in-flight-list.js';
import { LeaseTracker } from './lease-tracker.js';
import type { MasterCoreConfig } from './master-core-config.js';
import { FLAG_HARD_PIN, FLAG_LISTED, FLAG_SOFT_PIN, type ObjectMeta } from './object-meta.js';
import { ObjectTable } from './object-table.js';
import { RandomStrategy } from './random-strategy.js';
import { ReReplicator } from './re-replication.js';
import { ReplicaPlacer } from './replica-placer.js';
import type { Rng } from './rng.js';
import { SegmentRegistry } from './segment-registry.js';
import { objectRecordOf } from './state-records.js';

/** Value versions stay below this: small integers for V8 (see object-meta.ts). */
export const VERSION_LIMIT = 2 ** 30;

/** The previous placement of an object whose upsert moved it to new space (freed at UpsertEnd). */
export class PreviousPlacement {
  constructor(
    readonly h: number[],
    readonly slices: number,
    readonly flags: number,
  ) {}
}

/** How objects leave when eviction needs room (object-lifecycle.ts does it). */
export interface EvictionEnds {
  /** Cancels a zombie write, freeing its space. */
  release(meta: ObjectMeta): void;
  /** Frees a complete object's memory; false when it waits for its offload copy (eviction-round.ts). */
  evict(meta: ObjectMeta): boolean;
}

function makeStrategy(name: MasterCoreConfig['allocationStrategy']): AllocationStrategy {
  if (name === 'free_ratio_first') return new FreeRatioFirstStrategy();
  if (name === 'cxl') return new CxlStrategy();
  return new RandomStrategy();
}

export class CoreShared {
  /** Every object, by key. */
  readonly objects: ObjectTable;
  /** Complete, not hard-pinned objects in eviction (LRU) order. */
  readonly order = new EvictionOrder();
  /** The eviction round in progress and its debt. */
  readonly eviction: EvictionRound;
  /** Objects whose write (PutStart/UpsertStart) has not ended, in start order (intrusive list). */
  readonly inFlight = new InFlightList();
  /** Placements that upserts in flight moved their objects away from, by key. */
  readonly previous = new Map<string, PreviousPlacement>();
  readonly segments = new SegmentRegistry();
  readonly clients = new ClientRegistry();
  readonly leases = new LeaseTracker();
  readonly placer: ReplicaPlacer;
  /** Clients that copy replicas, and which were told copies wait (copier-roster.ts). */
  readonly copiers = new CopierRoster();
  /** Objects that lost replicas with a segment, and the copies that give them back (re-replication.ts). */
  readonly rereplicator: ReReplicator;
  /** The SSD tier: offload, promotion, disk quota (disk-tier.ts); set by MasterCore once the lifecycle exists. */
  disk!: DiskTier;
  /**
   * Metadata of deleted objects, for the next inserts to reuse: an object that lives as long as
   * the data it describes is copied twice by V8's young-generation collector on its way to the old
   * generation, and that copying was the largest single cost of a put in steady state (puts as
   * fast as evictions). Only objects never leased come here: the lease tracker keeps expiry
   * entries that point at their object (lease-tracker.ts), and nothing else keeps a deleted
   * object's metadata (replies capture values; the walks of table-walk.ts, which span calls,
   * look an object up again once others have deleted any).
   */
  readonly spareMetas: ObjectMeta[] = [];
  softPinnedCount = 0;
  hardPinnedCount = 0;
  /** Objects deleted so far: a batch's looked-up objects are stale once this moves. */
  removals = 0;
  /** The last value version given (nextVersion). */
  private version: number;
  /** The file tier's index (file-index.ts); a disabled one when --root_fs_dir is not set. */
  files: FileIndex = new FileIndex('', 0);
  /** Where committed changes are reported (change-sink.ts); undefined: nobody listens, nothing is built. */
  sink: ChangeSink | undefined;
  /** Where a directed copy's outcome goes (re-replication.ts `direct`; task-path.ts sets it). */
  directedCopySettled: (tag: number, code: number, now: number) => void = () => {};

  /**
   * `keyHashSeed` varies the key hashes (object table, batch key set). `heap.full`: the process's
   * heap is near its limit (master/heap-guard.ts), so no new placement is made.
   */
  constructor(
    readonly config: Readonly<MasterCoreConfig>,
    readonly rng: Rng,
    readonly keyHashSeed: number | undefined,
    readonly heap: { readonly full: boolean },
    ends: EvictionEnds,
  ) {
    this.objects = new ObjectTable(keyHashSeed);
    // Versions start where this master's view version (ms since the epoch at its start) points,
    // so another master's (a restart, an HA leader) rarely meet this one's for the same key.
    this.version = config.viewVersion % VERSION_LIMIT;
    this.eviction = new EvictionRound(
      {
        inFlight: this.inFlight,
        order: this.order,
        // Objects in memory: SSD-only ones (the disk list) are not memory eviction's to count. With
        // them counted, a round over a large SSD tier aimed at more objects than memory held.
        objectCount: () => this.objects.size - this.order.disk.size,
        release: (meta) => ends.release(meta),
        evict: (meta) => ends.evict(meta),
      },
      config,
    );
    this.placer = new ReplicaPlacer(makeStrategy(config.allocationStrategy), this.segments, rng);
    // Copy ids scoped by the view version (ms since the epoch of this master's start, or 0 in tests).
    this.rereplicator = new ReReplicator(
      this.objects,
      this.segments,
      this.placer,
      config.viewVersion * 1024 + 1,
      (meta) => this.emitObject(meta),
      (tag, code, now) => this.directedCopySettled(tag, code, now),
      (purpose, key, meta) => this.disk.copyEnded(purpose, key, meta),
      () => this.copiers.wakeAll(),
    );
  }

  /**
   * A new value version (ObjectMeta.version): 1 up to VERSION_LIMIT - 1, then round again. Unique
   * within this master for 2^30 writes; a reader keys its cache by the version together with the
   * replica's place and checksums (client/hot-cache.ts), so a repeat would also need the same key
   * rewritten at the same place with the same CRC-32C.
   */
  nextVersion(): number {
    this.version = this.version >= VERSION_LIMIT - 1 ? 1 : this.version + 1;
    return this.version;
  }

  /** Reports an object's whole record to the sink. */
  emitObject(meta: ObjectMeta): void {
    this.sink?.object(objectRecordOf(this.segments, meta), meta.lastAccess);
  }

  countPins(flags: number, sign: 1 | -1): void {
    if (flags & FLAG_SOFT_PIN) this.softPinnedCount += sign;
    if (flags & FLAG_HARD_PIN) this.hardPinnedCount += sign;
  }

  /** Replaces an object's flags, keeping its eviction-list membership bit (lists own that bit). */
  setFlags(meta: ObjectMeta, flags: number): void {
    this.countPins(meta.flags, -1);
    meta.flags = (flags & ~FLAG_LISTED) | (meta.flags & FLAG_LISTED);
    this.countPins(flags, 1);
  }
}
