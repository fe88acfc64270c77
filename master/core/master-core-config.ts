// MasterCore's configuration (one field per master flag it obeys), its defaults and validation,
// and the shapes of the core's read-only reports.
import type { FileTierStats } from './file-index.js';
import type { DiskTierStats } from './disk-tier.js';
import type { ReReplicationStats } from './re-replication.js';
import type { TaskLimits, TaskStats } from './task-manager.js';

export interface MasterCoreConfig {
  defaultKvLeaseTtlMs: number; // --default_kv_lease_ttl (5000)
  defaultKvSoftPinTtlMs: number; // --default_kv_soft_pin_ttl (1800000)
  allowEvictSoftPinnedObjects: boolean; // true
  evictionRatio: number; // 0.05
  evictionHighWatermarkRatio: number; // 0.95
  putStartDiscardTimeoutMs: number; // 30000
  putStartReleaseTimeoutMs: number; // 300000
  clientTtlMs: number; // 10000
  suspectSegmentMs: number; // --unreachable_segment_timeout (5000)
  allocationStrategy: 'random' | 'free_ratio_first' | 'cxl';
  memoryAllocator: 'offset';
  enableCxl: boolean;
  viewVersion: number;
  /** The task manager's flags (task-manager.ts; default DEFAULT_TASK_LIMITS). */
  taskLimits?: TaskLimits;
  // The SSD tier (disk-tier.ts, docs/tiers.md "SSD tier"):
  enableOffload: boolean; // --enable_offload (false): completed writes copied to an SSD segment
  offloadOnEvict: boolean; // --offload_on_evict (false): copied only when eviction picks them
  offloadForceEvict: boolean; // --offload_force_evict (false): evicted without a copy when offload cannot keep up
  promotionOnHit: boolean; // --promotion_on_hit (false)
  promotionAdmissionThreshold: number; // --promotion_admission_threshold (2; 1: every read of an SSD-only object promotes)
  promotionQueueLimit: number; // --promotion_queue_limit (50000)
  quotaBytes: number; // --quota_bytes (0: 90% of the SSD segments' capacity)
  enableDiskEviction: boolean; // --enable_disk_eviction (true)
}

export const defaultMasterCoreConfig: MasterCoreConfig = {
  defaultKvLeaseTtlMs: 5000,
  defaultKvSoftPinTtlMs: 1_800_000,
  allowEvictSoftPinnedObjects: true,
  evictionRatio: 0.05,
  evictionHighWatermarkRatio: 0.95,
  putStartDiscardTimeoutMs: 30_000,
  putStartReleaseTimeoutMs: 300_000,
  clientTtlMs: 10_000,
  suspectSegmentMs: 5_000,
  allocationStrategy: 'random',
  memoryAllocator: 'offset',
  enableCxl: false,
  viewVersion: 0,
  enableOffload: false,
  offloadOnEvict: false,
  offloadForceEvict: false,
  promotionOnHit: false,
  promotionAdmissionThreshold: 2,
  promotionQueueLimit: 50_000,
  quotaBytes: 0,
  enableDiskEviction: true,
};

export interface SweepReport {
  droppedClients: string[];
  unmountedSegments: string[];
  evictedObjects: number;
  releasedZombies: number;
  /** Objects that lost a replica and wait for a copy (re-replication.ts), after this sweep. */
  underReplicated: number;
  /** Copy/move tasks that finished since the last sweep (task-path.ts); absent when none. */
  finishedTasks?: FinishedTasks;
}

/** Tasks finished (listed up to FINISHED_REPORT_MAX of task-manager.ts; `more` counts the rest). */
export interface FinishedTasks {
  tasks: { id: number; kind: 'copy' | 'move'; key: string; ok: boolean; errorCode: number }[];
  more: number;
}

/** Totals, with re-replication's (re-replication.ts), the task manager's, the file tier's (file-index.ts) and the SSD tier's (disk-tier.ts). */
export interface MasterStats extends ReReplicationStats, TaskStats, FileTierStats, DiskTierStats {
  segments: number;
  capacityBytes: number;
  usedBytes: number;
  objects: number;
  activeLeases: number;
  softPinned: number;
  hardPinned: number;
  evictionsTotal: number;
  clients: number;
}

/** The totals of a master with nothing (a follower's, before it leads). */
export const EMPTY_STATS: Readonly<MasterStats> = Object.freeze({
  segments: 0,
  capacityBytes: 0,
  usedBytes: 0,
  objects: 0,
  activeLeases: 0,
  softPinned: 0,
  hardPinned: 0,
  evictionsTotal: 0,
  clients: 0,
  underReplicated: 0,
  copiesInFlight: 0,
  copied: 0,
  failed: 0,
  abandoned: 0,
  tasksPending: 0,
  tasksProcessing: 0,
  tasksFinished: 0,
  tasksSucceeded: 0,
  tasksFailed: 0,
  tasksRetried: 0,
  fileBudgetBytes: 0,
  fileUsedBytes: 0,
  fileObjects: 0,
  filesWritten: 0,
  filesRefused: 0,
  filesBad: 0,
  diskCapacityBytes: 0,
  diskUsedBytes: 0,
  diskQuotaBytes: 0,
  offloadsQueued: 0,
  offloadsInFlight: 0,
  offloadsDone: 0,
  offloadsFailed: 0,
  offloadsDropped: 0,
  offloadsSkippedFull: 0,
  offloadsRequeued: 0,
  promotionsQueued: 0,
  promotionsInFlight: 0,
  promotionsDone: 0,
  promotionsFailed: 0,
  diskEvictions: 0,
  forcedEvictions: 0,
});

export interface SegmentDetail {
  segment_name: string;
  segment_id: string;
  client_id: string;
  base_address: number;
  size_bytes: number;
  te_endpoint: string;
  protocol: string;
  status: 'MOUNTED' | 'UNMOUNTING' | 'RESTORED';
  allocator_used_bytes: number;
  allocator_capacity_bytes: number;
}

/** Rejects a configuration the core cannot run with (thrown once, at construction). */
export function validateMasterCoreConfig(c: MasterCoreConfig): void {
  const problems: string[] = [];
  const nonNegative = (name: Exclude<keyof MasterCoreConfig, 'taskLimits'>): void => {
    const v = c[name];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) problems.push(`${name} must be a non-negative number, got ${String(v)}`);
  };
  nonNegative('defaultKvLeaseTtlMs');
  nonNegative('defaultKvSoftPinTtlMs');
  nonNegative('putStartDiscardTimeoutMs');
  nonNegative('putStartReleaseTimeoutMs');
  nonNegative('clientTtlMs');
  nonNegative('suspectSegmentMs');
  nonNegative('viewVersion');
  nonNegative('quotaBytes');
  if (!Number.isSafeInteger(c.promotionAdmissionThreshold) || c.promotionAdmissionThreshold < 1)
    problems.push(`promotionAdmissionThreshold must be an integer >= 1, got ${c.promotionAdmissionThreshold}`);
  if (!Number.isSafeInteger(c.promotionQueueLimit) || c.promotionQueueLimit < 1) problems.push(`promotionQueueLimit must be an integer >= 1, got ${c.promotionQueueLimit}`);
  if (!(c.evictionRatio > 0 && c.evictionRatio <= 1)) problems.push(`evictionRatio must be in (0, 1], got ${c.evictionRatio}`);
  if (!(c.evictionHighWatermarkRatio > 0 && c.evictionHighWatermarkRatio <= 1)) {
    problems.push(`evictionHighWatermarkRatio must be in (0, 1], got ${c.evictionHighWatermarkRatio}`);
  }
  if (!['random', 'free_ratio_first', 'cxl'].includes(c.allocationStrategy)) {
    problems.push(`allocationStrategy must be random, free_ratio_first or cxl, got ${String(c.allocationStrategy)}`);
  }
  if (c.allocationStrategy === 'cxl' && !c.enableCxl) problems.push('allocationStrategy cxl requires enableCxl');
  const t = c.taskLimits;
  if (t !== undefined) {
    for (const [name, v] of Object.entries(t) as [string, number][]) {
      if (!Number.isSafeInteger(v) || v < 0) problems.push(`taskLimits.${name} must be a non-negative integer, got ${v}`);
    }
  }
  if (c.memoryAllocator !== 'offset') problems.push(`memoryAllocator must be offset, got ${String(c.memoryAllocator)}`);
  if (problems.length > 0) throw new Error(`invalid master configuration: ${problems.join('; ')}`);
}
