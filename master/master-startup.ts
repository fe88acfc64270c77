// Startup decisions of store_master that depend only on flags: the core configuration, the
// address to serve on (--rpc_interface), and the one-line notices for accepted flags whose
// feature is not built yet. Kept apart from main.ts so they are testable without a process.
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { FlagError } from '../common/flags.js';
import type { MasterFlags } from './master-flags.js';
import type { TaskLimits } from './core/task-manager.js';

export interface CoreConfigFromFlags {
  defaultKvLeaseTtlMs: number;
  defaultKvSoftPinTtlMs: number;
  allowEvictSoftPinnedObjects: boolean;
  evictionRatio: number;
  evictionHighWatermarkRatio: number;
  putStartDiscardTimeoutMs: number;
  putStartReleaseTimeoutMs: number;
  clientTtlMs: number;
  suspectSegmentMs: number;
  allocationStrategy: 'random' | 'free_ratio_first' | 'cxl';
  memoryAllocator: 'offset';
  enableCxl: boolean;
  viewVersion: number;
  taskLimits: TaskLimits;
  enableOffload: boolean;
  offloadOnEvict: boolean;
  offloadForceEvict: boolean;
  promotionOnHit: boolean;
  promotionAdmissionThreshold: number;
  promotionQueueLimit: number;
  quotaBytes: number;
  enableDiskEviction: boolean;
}

export function coreConfigFromFlags(f: MasterFlags, viewVersion: number): CoreConfigFromFlags {
  return {
    defaultKvLeaseTtlMs: f.default_kv_lease_ttl,
    defaultKvSoftPinTtlMs: f.default_kv_soft_pin_ttl,
    allowEvictSoftPinnedObjects: f.allow_evict_soft_pinned_objects,
    evictionRatio: f.eviction_ratio,
    evictionHighWatermarkRatio: f.eviction_high_watermark_ratio,
    putStartDiscardTimeoutMs: f.put_start_discard_timeout_sec,
    putStartReleaseTimeoutMs: f.put_start_release_timeout_sec,
    clientTtlMs: f.client_ttl,
    suspectSegmentMs: f.unreachable_segment_timeout,
    allocationStrategy: f.allocation_strategy,
    memoryAllocator: f.memory_allocator,
    enableCxl: f.enable_cxl,
    viewVersion,
    taskLimits: {
      maxPending: f.max_total_pending_tasks,
      maxProcessing: f.max_total_processing_tasks,
      maxFinished: f.max_total_finished_tasks,
      pendingTimeoutMs: f.pending_task_timeout_sec,
      processingTimeoutMs: f.processing_task_timeout_sec,
      maxRetryAttempts: f.max_retry_attempts,
    },
    enableOffload: f.enable_offload,
    offloadOnEvict: f.offload_on_evict,
    offloadForceEvict: f.offload_force_evict,
    promotionOnHit: f.promotion_on_hit,
    promotionAdmissionThreshold: f.promotion_admission_threshold,
    promotionQueueLimit: f.promotion_queue_limit,
    quotaBytes: f.quota_bytes,
    enableDiskEviction: f.enable_disk_eviction,
  };
}

/** The address to bind: the IPv4 address of --rpc_interface when given, else --rpc_address. */
export function resolveRpcAddress(f: Pick<MasterFlags, 'rpc_address' | 'rpc_interface'>, interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string {
  if (f.rpc_interface === '') return f.rpc_address;
  const addrs = interfaces[f.rpc_interface];
  if (!addrs) {
    const known = Object.keys(interfaces).join(', ');
    throw new FlagError('--rpc_interface', `--rpc_interface=${f.rpc_interface}: no such network interface (present: ${known})`);
  }
  const v4 = addrs.find((a) => a.family === 'IPv4');
  if (!v4) throw new FlagError('--rpc_interface', `--rpc_interface=${f.rpc_interface}: the interface has no IPv4 address`);
  return v4.address;
}

/** One line per accepted flag whose behaviour is not built: said once at startup. */
export function unbuiltFeatureNotices(f: MasterFlags, explicit: Set<string>): string[] {
  const out: string[] = [];
  if ((f.enable_snapshot || f.enable_snapshot_restore) && f.enable_ha) {
    out.push(
      '--enable_snapshot/--enable_snapshot_restore with --enable_ha: snapshots and the change log serve a single master only; with HA no snapshot is taken or restored (the standbys following the leader hold the state)',
    );
  }
  const snapshotFlags = [
    'snapshot_interval_seconds',
    'snapshot_child_timeout_seconds',
    'snapshot_retention_count',
    'snapshot_object_store_type',
    'snapshot_catalog_store_type',
    'snapshot_catalog_store_connstring',
    'snapshot_backup_dir',
  ].filter((n) => explicit.has(n));
  if (snapshotFlags.length > 0 && !f.enable_snapshot && !f.enable_snapshot_restore) {
    out.push(`${snapshotFlags.map((n) => `--${n}`).join(', ')}: used only with --enable_snapshot or --enable_snapshot_restore; the value is validated and kept`);
  }
  if ((f.offload_on_evict || f.offload_force_evict) && !f.enable_offload)
    out.push('--offload_on_evict/--offload_force_evict: used only with --enable_offload; nothing is offloaded');
  if (explicit.has('global_file_segment_size') && f.root_fs_dir === '')
    out.push('--global_file_segment_size: used only with --root_fs_dir (the file tier is off); the value is validated and kept');
  if (f.enable_cxl)
    out.push(`--enable_cxl: CXL segments are placed by the cxl strategy; the master never maps ${f.cxl_path} itself (store services do: store_service --enable_cxl)`);
  return out;
}

/** File descriptors kept for everything but RPC connections (HTTP servers, logs, HA backends). */
export const FD_RESERVE = 128;

/** The soft "Max open files" of a /proc/<pid>/limits text, or undefined (unlimited or unreadable). */
export function openFilesLimit(limitsText: string): number | undefined {
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(limitsText);
  return m && m[1] !== 'unlimited' ? Number(m[1]) : undefined;
}

/**
 * The RPC connection cap to serve with: --rpc_max_connections, lowered to what the process's file
 * descriptor limit leaves after FD_RESERVE, so that the master refuses (and counts) connections
 * rather than running out of descriptors (libuv then accepts and drops connections unseen, and
 * anything else that opens a file fails). `notice` says why when it is lowered.
 */
export function effectiveMaxConnections(flag: number, openFiles: number | undefined): { max: number; notice?: string } {
  if (openFiles === undefined || flag <= openFiles - FD_RESERVE) return { max: flag };
  const max = Math.max(1, openFiles - FD_RESERVE);
  return {
    max,
    notice: `--rpc_max_connections=${flag} needs more file descriptors than the limit of ${openFiles} (ulimit -n) leaves; serving at most ${max} RPC connections (the limit less ${FD_RESERVE} kept for the rest)`,
  };
}
