// The store_master flag table: every master flag of the spec with its exact name and default,
// typed, plus the cross-flag checks that a single flag's type cannot express.
import { availableParallelism } from 'node:os';
import { FlagError, FlagTable, type FlagSpec, type ParsedFlags } from '../common/flags.js';
import { loggingFlags } from '../common/logger.js';

const GB = 1024 ** 3;
const port = { kind: 'int', min: 0, max: 65535 } as const;

export const masterFlagSpecs: FlagSpec[] = [
  // RPC
  { name: 'rpc_port', ...port, default: 50051, help: 'RPC listen port (gRPC and the fast client channel share it); 0 picks a free port', group: 'RPC' },
  {
    name: 'rpc_thread_num',
    kind: 'int',
    min: 1,
    default: Math.min(4, availableParallelism()),
    defaultText: 'min(4, CPU cores)',
    help: 'worker threads; accepted for compatibility and validated (>= 1): this master serves every RPC on one event-loop thread, so the value has no other effect',
    group: 'RPC',
  },
  { name: 'rpc_address', kind: 'string', default: '0.0.0.0', help: 'RPC bind/advertised address; must be reachable by clients in HA mode', group: 'RPC' },
  {
    name: 'rpc_interface',
    kind: 'string',
    default: '',
    help: 'interface whose current IPv4 address is resolved at startup and used as the address; overrides --rpc_address',
    group: 'RPC',
  },
  {
    name: 'rpc_conn_timeout_seconds',
    kind: 'duration',
    unit: 's',
    min: 0,
    default: 0,
    defaultText: '0',
    help: 'close a client connection idle this long; 0 disables',
    group: 'RPC',
  },
  { name: 'rpc_enable_tcp_no_delay', kind: 'bool', default: true, help: 'set TCP_NODELAY on RPC connections', group: 'RPC' },
  {
    name: 'rpc_max_connections',
    kind: 'int',
    min: 1,
    default: 4096,
    help: 'RPC connections (gRPC and channel) served at once; more are closed on accept and counted',
    group: 'RPC',
  },
  {
    name: 'rpc_request_timeout_seconds',
    kind: 'duration',
    unit: 's',
    min: 0,
    default: 30_000,
    defaultText: '30',
    help: 'close a connection whose request (a channel frame, a gRPC message) has not fully arrived this long after it began; 0 disables',
    group: 'RPC',
  },
  {
    name: 'rpc_max_buffered_request_bytes',
    kind: 'size',
    min: 1,
    default: 256 * 1024 ** 2,
    defaultText: '256MB',
    help: 'incomplete request bytes held across all RPC connections; past it the connections holding the most are closed',
    group: 'RPC',
  },
  {
    name: 'enable_remove_all',
    kind: 'bool',
    default: true,
    help: 'serve RemoveAll (every unleased object, hard-pinned ones too); false answers it NOT_IMPLEMENTED. No RPC is authenticated yet: set false where no client needs it (docs/threat-model.md)',
    group: 'RPC',
  },
  // Security (docs/threat-model.md)
  {
    name: 'cluster_secret_file',
    kind: 'string',
    default: '',
    defaultText: '$STORE_CLUSTER_SECRET_FILE',
    help: 'file holding the cluster secret (>= 32 bytes, trailing whitespace trimmed; make one with "store secret new FILE"): every RPC connection, gRPC call and metadata write must prove it',
    group: 'Security',
  },
  {
    name: 'allow_unauthenticated',
    kind: 'bool',
    default: false,
    help: 'run without a cluster secret (anyone who reaches a port may call anything; also STORE_ALLOW_UNAUTHENTICATED=1); without it or a secret the master refuses to start',
    group: 'Security',
  },
  // TLS of the control interfaces (docs/threat-model.md "TLS")
  {
    name: 'tls_cert',
    kind: 'string',
    default: '',
    help: 'PEM certificate: gRPC on --rpc_port, the HTTP on --metrics_port and the metadata server then speak TLS only (the fast channel stays plain TCP); re-read when the file changes',
    group: 'TLS',
  },
  { name: 'tls_key', kind: 'string', default: '', help: 'PEM private key of --tls_cert', group: 'TLS' },
  { name: 'tls_ca', kind: 'string', default: '', help: 'PEM CA bundle: with it the TLS interfaces require client certificates signed by it (mTLS)', group: 'TLS' },
  // Metrics and HTTP
  { name: 'enable_metric_reporting', kind: 'bool', default: true, help: 'periodically log a one-line metrics summary', group: 'Metrics' },
  { name: 'metrics_port', ...port, default: 9003, help: 'HTTP port of /metrics and the management endpoints', group: 'Metrics' },
  {
    name: 'enable_http_metadata_server',
    kind: 'bool',
    default: false,
    help: 'serve the transfer-engine metadata store at http://<host>:<port>/metadata',
    group: 'HTTP metadata server',
  },
  { name: 'http_metadata_server_host', kind: 'string', default: '0.0.0.0', help: 'bind host of the metadata server', group: 'HTTP metadata server' },
  { name: 'http_metadata_server_port', ...port, default: 8080, help: 'TCP port of the metadata server', group: 'HTTP metadata server' },
  // Allocation, leases, eviction
  { name: 'memory_allocator', kind: 'enum', values: ['offset'], default: 'offset', help: 'buffer allocator per segment', group: 'Allocation' },
  { name: 'allocation_strategy', kind: 'enum', values: ['random', 'free_ratio_first', 'cxl'], default: 'random', help: 'replica placement strategy', group: 'Allocation' },
  {
    name: 'put_start_discard_timeout_sec',
    kind: 'duration',
    unit: 's',
    min: 0,
    default: 30_000,
    defaultText: '30',
    help: 'seconds before an uncompleted PutStart may be preempted by another PutStart',
    group: 'Allocation',
  },
  {
    name: 'put_start_release_timeout_sec',
    kind: 'duration',
    unit: 's',
    min: 0,
    default: 300_000,
    defaultText: '300',
    help: 'seconds before PutStart-allocated space becomes releasable by eviction',
    group: 'Allocation',
  },
  {
    name: 'default_kv_lease_ttl',
    kind: 'duration',
    unit: 'ms',
    min: 0,
    default: 5000,
    defaultText: '5000 (ms)',
    help: 'lease TTL granted by ExistKey/GetReplicaList',
    group: 'Allocation',
  },
  {
    name: 'default_kv_soft_pin_ttl',
    kind: 'duration',
    unit: 'ms',
    min: 0,
    default: 1_800_000,
    defaultText: '1800000 (ms)',
    help: 'soft pin dropped after this long without access',
    group: 'Allocation',
  },
  { name: 'allow_evict_soft_pinned_objects', kind: 'bool', default: true, help: 'allow evicting soft-pinned objects when no other candidate exists', group: 'Allocation' },
  { name: 'eviction_ratio', kind: 'float', min: 0, max: 1, default: 0.05, help: 'fraction of objects evicted when eviction triggers', group: 'Allocation' },
  { name: 'eviction_high_watermark_ratio', kind: 'float', min: 0, max: 1, default: 0.95, help: 'usage ratio that triggers eviction', group: 'Allocation' },
  {
    name: 'client_ttl',
    kind: 'duration',
    unit: 's',
    min: 1,
    default: 10_000,
    defaultText: '10 (s)',
    help: 'silence after which a client is considered disconnected and its segments unmounted',
    group: 'Allocation',
  },
  {
    name: 'unreachable_segment_timeout',
    kind: 'duration',
    unit: 's',
    min: 0,
    default: 5_000,
    defaultText: '5 (s)',
    help: 'a segment a writer reported unreachable gets no new placements for this long unless nothing else has room (0: reports are ignored)',
    group: 'Allocation',
  },
  // High availability
  { name: 'enable_ha', kind: 'bool', default: false, help: 'high-availability mode (also spelled --enable-ha)', group: 'High availability' },
  { name: 'ha_backend_type', kind: 'enum', values: ['etcd', 'redis', 'k8s'], default: 'etcd', help: 'coordination backend', group: 'High availability' },
  { name: 'ha_backend_connstring', kind: 'string', default: '', help: 'backend connection string, e.g. redis://<host>:<port>', group: 'High availability' },
  { name: 'etcd_endpoints', kind: 'string', default: '', help: 'etcd endpoints separated by ";" when the backend is etcd', group: 'High availability' },
  {
    name: 'ha_lease_ms',
    kind: 'duration',
    unit: 'ms',
    min: 1000,
    max: 60_000,
    default: 4000,
    defaultText: '4000 (ms)',
    help: 'leader lease: after a leader dies another serves about this long later; a leader stops serving at 70% of it without a renewal, so a shorter lease also deposes a leader stalled for less',
    group: 'High availability',
  },
  {
    name: 'ha_commit_acks',
    kind: 'int',
    min: 0,
    default: 1,
    help: 'standbys that must have a change before the leader answers the RPC that made it (fewer when fewer are connected; 0: do not wait)',
    group: 'High availability',
  },
  { name: 'cluster_id', kind: 'string', default: 'store_cluster', help: 'cluster id for HA persistence and the root of the file tier', group: 'High availability' },
  // Snapshot
  { name: 'enable_snapshot', kind: 'bool', default: false, help: 'periodic metadata snapshot (experimental)', group: 'Snapshot' },
  { name: 'snapshot_interval_seconds', kind: 'duration', unit: 's', min: 1, default: 300_000, defaultText: '300', help: 'snapshot interval', group: 'Snapshot' },
  {
    name: 'snapshot_child_timeout_seconds',
    kind: 'duration',
    unit: 's',
    min: 1,
    default: 3_600_000,
    defaultText: '3600',
    help: 'timeout per snapshot child process',
    group: 'Snapshot',
  },
  { name: 'snapshot_retention_count', kind: 'int', min: 1, default: 10, help: 'snapshots kept', group: 'Snapshot' },
  {
    name: 'snapshot_object_store_type',
    kind: 'enum',
    values: ['', 'local', 's3'],
    default: '',
    defaultText: '(required with --enable_snapshot)',
    help: 'local or s3',
    group: 'Snapshot',
  },
  { name: 'snapshot_catalog_store_type', kind: 'enum', values: ['', 'embedded', 'redis'], default: '', help: 'embedded or redis', group: 'Snapshot' },
  { name: 'snapshot_catalog_store_connstring', kind: 'string', default: '', help: 'required for the redis catalog', group: 'Snapshot' },
  { name: 'snapshot_backup_dir', kind: 'string', default: '', help: 'optional local backup directory', group: 'Snapshot' },
  { name: 'enable_snapshot_restore', kind: 'bool', default: false, help: 'restore from the latest snapshot at startup', group: 'Snapshot' },
  {
    name: 'change_log_sync',
    kind: 'enum',
    values: ['placement', 'interval'],
    default: 'placement',
    help: 'when the change log is fdatasynced besides every second: placement = also before a reply hands out space while a removal is unsynced (survives a host crash); interval = only every second (survives a master crash)',
    group: 'Snapshot',
  },
  // Task manager
  { name: 'max_total_finished_tasks', kind: 'int', min: 0, default: 10_000, help: 'finished tasks kept', group: 'Task manager' },
  { name: 'max_total_pending_tasks', kind: 'int', min: 0, default: 10_000, help: 'queued pending tasks', group: 'Task manager' },
  { name: 'max_total_processing_tasks', kind: 'int', min: 0, default: 10_000, help: 'simultaneously processing tasks', group: 'Task manager' },
  { name: 'pending_task_timeout_sec', kind: 'duration', unit: 's', min: 0, default: 300_000, defaultText: '300', help: '0 = no timeout', group: 'Task manager' },
  { name: 'processing_task_timeout_sec', kind: 'duration', unit: 's', min: 0, default: 300_000, defaultText: '300', help: '0 = no timeout', group: 'Task manager' },
  { name: 'max_retry_attempts', kind: 'int', min: 0, default: 10, help: 'retries for tasks failed with NO_AVAILABLE_HANDLE', group: 'Task manager' },
  // Offload / tiers
  { name: 'enable_offload', kind: 'bool', default: false, help: 'asynchronous offload of completed writes to SSD', group: 'Offload' },
  { name: 'offload_on_evict', kind: 'bool', default: false, help: 'defer the SSD write to eviction time', group: 'Offload' },
  { name: 'offload_force_evict', kind: 'bool', default: false, help: 'force-evict objects beyond capacity without offload', group: 'Offload' },
  { name: 'promotion_on_hit', kind: 'bool', default: false, help: 'promote SSD-only keys to memory on read hit', group: 'Offload' },
  { name: 'promotion_admission_threshold', kind: 'int', min: 1, default: 2, help: 'minimum count-min-sketch count to allow promotion; 1 disables gating', group: 'Offload' },
  { name: 'promotion_queue_limit', kind: 'int', min: 1, default: 50_000, help: 'max in-flight promotion tasks', group: 'Offload' },
  { name: 'quota_bytes', kind: 'size', default: 0, defaultText: '0 (90% of capacity)', help: 'storage quota', group: 'Offload' },
  { name: 'enable_disk_eviction', kind: 'bool', default: true, help: 'disk eviction', group: 'Offload' },
  // CXL
  { name: 'enable_cxl', kind: 'bool', default: false, help: 'CXL support', group: 'CXL' },
  { name: 'cxl_path', kind: 'string', default: '/dev/dax0.0', help: 'DAX device path', group: 'CXL' },
  { name: 'cxl_size', kind: 'size', default: 8_589_934_592, help: 'CXL memory bytes', group: 'CXL' },
  // File tier
  { name: 'root_fs_dir', kind: 'string', default: '', help: 'shared file-system directory, identical on all client hosts; enables the file tier', group: 'File tier' },
  { name: 'global_file_segment_size', kind: 'size', default: 4 * GB, defaultText: '4GB (4294967296)', help: 'maximum usable file-tier space', group: 'File tier' },
  ...loggingFlags,
];

/** The parsed flags, typed. Durations are milliseconds, sizes bytes. */
export interface MasterFlags {
  cluster_secret_file: string;
  allow_unauthenticated: boolean;
  rpc_port: number;
  rpc_thread_num: number;
  rpc_address: string;
  rpc_interface: string;
  rpc_conn_timeout_seconds: number;
  rpc_enable_tcp_no_delay: boolean;
  rpc_max_connections: number;
  rpc_request_timeout_seconds: number;
  rpc_max_buffered_request_bytes: number;
  enable_metric_reporting: boolean;
  tls_cert: string;
  tls_key: string;
  tls_ca: string;
  metrics_port: number;
  enable_remove_all: boolean;
  enable_http_metadata_server: boolean;
  http_metadata_server_host: string;
  http_metadata_server_port: number;
  memory_allocator: 'offset';
  allocation_strategy: 'random' | 'free_ratio_first' | 'cxl';
  put_start_discard_timeout_sec: number;
  put_start_release_timeout_sec: number;
  default_kv_lease_ttl: number;
  default_kv_soft_pin_ttl: number;
  allow_evict_soft_pinned_objects: boolean;
  eviction_ratio: number;
  eviction_high_watermark_ratio: number;
  client_ttl: number;
  unreachable_segment_timeout: number;
  enable_ha: boolean;
  ha_backend_type: 'etcd' | 'redis' | 'k8s';
  ha_backend_connstring: string;
  etcd_endpoints: string;
  cluster_id: string;
  enable_snapshot: boolean;
  snapshot_interval_seconds: number;
  snapshot_child_timeout_seconds: number;
  snapshot_retention_count: number;
  snapshot_object_store_type: '' | 'local' | 's3';
  snapshot_catalog_store_type: '' | 'embedded' | 'redis';
  snapshot_catalog_store_connstring: string;
  snapshot_backup_dir: string;
  enable_snapshot_restore: boolean;
  change_log_sync: 'placement' | 'interval';
  ha_commit_acks: number;
  ha_lease_ms: number;
  max_total_finished_tasks: number;
  max_total_pending_tasks: number;
  max_total_processing_tasks: number;
  pending_task_timeout_sec: number;
  processing_task_timeout_sec: number;
  max_retry_attempts: number;
  enable_offload: boolean;
  offload_on_evict: boolean;
  offload_force_evict: boolean;
  promotion_on_hit: boolean;
  promotion_admission_threshold: number;
  promotion_queue_limit: number;
  quota_bytes: number;
  enable_disk_eviction: boolean;
  enable_cxl: boolean;
  cxl_path: string;
  cxl_size: number;
  root_fs_dir: string;
  global_file_segment_size: number;
  log_dir: string;
  max_log_size: number;
  logtostderr: boolean;
  minloglevel: number;
  v: number;
  config_path: string;
}

export const masterFlagTable = new FlagTable('store_master', masterFlagSpecs);

/** Checks that involve several flags; throws FlagError naming the offending flag. */
export function validateMasterFlags(f: MasterFlags): void {
  if (f.eviction_ratio <= 0) throw new FlagError('--eviction_ratio', `invalid value "${f.eviction_ratio}" for flag --eviction_ratio: must be > 0 and <= 1`);
  if (f.eviction_high_watermark_ratio <= 0) {
    throw new FlagError('--eviction_high_watermark_ratio', `invalid value "${f.eviction_high_watermark_ratio}" for flag --eviction_high_watermark_ratio: must be > 0 and <= 1`);
  }
  if (f.allocation_strategy === 'cxl' && !f.enable_cxl) {
    throw new FlagError('--allocation_strategy', '--allocation_strategy=cxl requires --enable_cxl=true');
  }
  const snapshots = f.enable_snapshot || f.enable_snapshot_restore;
  const which = f.enable_snapshot ? '--enable_snapshot' : '--enable_snapshot_restore';
  if (snapshots && f.snapshot_object_store_type === '') {
    throw new FlagError('--snapshot_object_store_type', `flag --snapshot_object_store_type is required with ${which} (accepted values: local, s3)`);
  }
  if (snapshots && f.snapshot_object_store_type === 's3') {
    throw new FlagError(
      '--snapshot_object_store_type',
      '--snapshot_object_store_type=s3: the S3 object store is not built; use local with STORE_SNAPSHOT_LOCAL_PATH (docs/master.md "Snapshots and the change log")',
    );
  }
  if (snapshots && f.snapshot_object_store_type === 'local' && !process.env.STORE_SNAPSHOT_LOCAL_PATH) {
    throw new FlagError('--snapshot_object_store_type', '--snapshot_object_store_type=local needs the environment variable STORE_SNAPSHOT_LOCAL_PATH (a dedicated directory)');
  }
  if (f.snapshot_catalog_store_type === 'redis' && f.snapshot_catalog_store_connstring === '') {
    throw new FlagError('--snapshot_catalog_store_connstring', 'flag --snapshot_catalog_store_connstring is required with --snapshot_catalog_store_type=redis');
  }
  if (f.enable_ha && f.ha_backend_type === 'redis' && f.ha_backend_connstring === '') {
    throw new FlagError('--ha_backend_connstring', 'flag --ha_backend_connstring (redis://<host>:<port>) is required with --ha_backend_type=redis');
  }
}

/** Parses store_master's argv into typed flags. Throws FlagError or HelpRequested. */
export function parseMasterFlags(argv: readonly string[], readFile?: (path: string) => string): { flags: MasterFlags; parsed: ParsedFlags } {
  const parsed = masterFlagTable.parse(argv, readFile);
  const flags = parsed.values as unknown as MasterFlags;
  validateMasterFlags(flags);
  return { flags, parsed };
}
