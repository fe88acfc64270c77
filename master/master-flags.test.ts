import { FlagError } from '../common/flags.js';
import { masterFlagTable, parseMasterFlags } from './master-flags.js';
import { coreConfigFromFlags, effectiveMaxConnections, FD_RESERVE, openFilesLimit, resolveRpcAddress, unbuiltFeatureNotices } from './master-startup.js';

function flagError(fn: () => unknown): FlagError {
  try {
    fn();
  } catch (e) {
    if (e instanceof FlagError) return e;
    throw e;
  }
  throw new Error('expected a FlagError');
}

describe('store_master flags', () => {
  it('has the spec defaults', () => {
    const { flags } = parseMasterFlags([]);
    expect(flags).toMatchObject({
      rpc_port: 50051,
      rpc_address: '0.0.0.0',
      rpc_interface: '',
      rpc_conn_timeout_seconds: 0,
      rpc_enable_tcp_no_delay: true,
      enable_metric_reporting: true,
      metrics_port: 9003,
      enable_remove_all: true,
      enable_http_metadata_server: false,
      http_metadata_server_host: '0.0.0.0',
      http_metadata_server_port: 8080,
      memory_allocator: 'offset',
      allocation_strategy: 'random',
      put_start_discard_timeout_sec: 30_000,
      put_start_release_timeout_sec: 300_000,
      default_kv_lease_ttl: 5000,
      default_kv_soft_pin_ttl: 1_800_000,
      allow_evict_soft_pinned_objects: true,
      eviction_ratio: 0.05,
      eviction_high_watermark_ratio: 0.95,
      client_ttl: 10_000,
      enable_ha: false,
      ha_backend_type: 'etcd',
      cluster_id: 'store_cluster',
      snapshot_interval_seconds: 300_000,
      snapshot_retention_count: 10,
      max_total_finished_tasks: 10_000,
      max_retry_attempts: 10,
      promotion_admission_threshold: 2,
      promotion_queue_limit: 50_000,
      quota_bytes: 0,
      enable_disk_eviction: true,
      enable_cxl: false,
      cxl_path: '/dev/dax0.0',
      cxl_size: 8_589_934_592,
      global_file_segment_size: 4_294_967_296,
    });
    expect(flags.rpc_thread_num).toBeGreaterThanOrEqual(1);
    expect(flags.rpc_thread_num).toBeLessThanOrEqual(4);
  });

  it('accepts --enable-ha and --enable_ha, and durations in each flag unit', () => {
    expect(parseMasterFlags(['--enable-ha']).flags.enable_ha).toBe(true);
    expect(parseMasterFlags(['--enable_ha=true']).flags.enable_ha).toBe(true);
    const { flags } = parseMasterFlags(['--client_ttl=20', '--default_kv_lease_ttl=250', '--put_start_discard_timeout_sec=1m', '--default_kv_soft_pin_ttl=30m']);
    expect(flags.client_ttl).toBe(20_000);
    expect(flags.default_kv_lease_ttl).toBe(250);
    expect(flags.put_start_discard_timeout_sec).toBe(60_000);
    expect(flags.default_kv_soft_pin_ttl).toBe(1_800_000);
  });

  it('--ha_lease_ms: 4000 by default, durations in ms or with a unit, at least 1 s', () => {
    expect(parseMasterFlags([]).flags.ha_lease_ms).toBe(4000);
    expect(parseMasterFlags(['--ha_lease_ms=3000']).flags.ha_lease_ms).toBe(3000);
    expect(parseMasterFlags(['--ha_lease_ms=2s']).flags.ha_lease_ms).toBe(2000);
    expect(flagError(() => parseMasterFlags(['--ha_lease_ms=500'])).message).toMatch(/ha_lease_ms/);
  });

  it('refuses a memory allocator other than offset, naming the accepted values', () => {
    const e = flagError(() => parseMasterFlags(['--memory_allocator=cachelib']));
    expect(e.flag).toBe('--memory_allocator');
    expect(e.message).toMatch(/accepted values: offset/);
  });

  it('checks flags that depend on each other', () => {
    expect(flagError(() => parseMasterFlags(['--allocation_strategy=cxl'])).flag).toBe('--allocation_strategy');
    expect(parseMasterFlags(['--allocation_strategy=cxl', '--enable_cxl']).flags.allocation_strategy).toBe('cxl');
    expect(flagError(() => parseMasterFlags(['--enable_snapshot'])).flag).toBe('--snapshot_object_store_type');
    expect(flagError(() => parseMasterFlags(['--enable_snapshot_restore'])).message).toMatch(/required with --enable_snapshot_restore/);
    expect(flagError(() => parseMasterFlags(['--enable_snapshot', '--snapshot_object_store_type=s3'])).message).toMatch(/s3: the S3 object store is not built/);
    expect(flagError(() => parseMasterFlags(['--enable_snapshot_restore', '--snapshot_object_store_type=s3'])).flag).toBe('--snapshot_object_store_type');
    expect(flagError(() => parseMasterFlags(['--snapshot_catalog_store_type=redis'])).flag).toBe('--snapshot_catalog_store_connstring');
    expect(flagError(() => parseMasterFlags(['--enable_ha', '--ha_backend_type=redis'])).flag).toBe('--ha_backend_connstring');
    expect(flagError(() => parseMasterFlags(['--eviction_ratio=0'])).flag).toBe('--eviction_ratio');
  });

  it('maps flags onto the core configuration', () => {
    const { flags } = parseMasterFlags([
      '--default_kv_lease_ttl=1s',
      '--client_ttl=3',
      '--allocation_strategy=free_ratio_first',
      '--max_retry_attempts=3',
      '--pending_task_timeout_sec=0',
    ]);
    expect(coreConfigFromFlags(flags, 7)).toEqual({
      defaultKvLeaseTtlMs: 1000,
      suspectSegmentMs: 5000,
      defaultKvSoftPinTtlMs: 1_800_000,
      allowEvictSoftPinnedObjects: true,
      evictionRatio: 0.05,
      evictionHighWatermarkRatio: 0.95,
      putStartDiscardTimeoutMs: 30_000,
      putStartReleaseTimeoutMs: 300_000,
      clientTtlMs: 3000,
      allocationStrategy: 'free_ratio_first',
      memoryAllocator: 'offset',
      enableCxl: false,
      viewVersion: 7,
      taskLimits: { maxPending: 10_000, maxProcessing: 10_000, maxFinished: 10_000, pendingTimeoutMs: 0, processingTimeoutMs: 300_000, maxRetryAttempts: 3 },
      enableOffload: false,
      offloadOnEvict: false,
      offloadForceEvict: false,
      promotionOnHit: false,
      promotionAdmissionThreshold: 2,
      promotionQueueLimit: 50_000,
      quotaBytes: 0,
      enableDiskEviction: true,
    });
  });

  it('resolves --rpc_interface to its IPv4 address and errors when it is missing', () => {
    const ifs = {
      eth0: [
        { address: 'fe80::1', family: 'IPv6', netmask: '', mac: '', internal: false, cidr: null, scopeid: 1 },
        { address: '10.1.2.3', family: 'IPv4', netmask: '', mac: '', internal: false, cidr: null },
      ],
      v6only: [{ address: 'fe80::2', family: 'IPv6', netmask: '', mac: '', internal: false, cidr: null, scopeid: 1 }],
    } as unknown as NodeJS.Dict<import('node:os').NetworkInterfaceInfo[]>;
    expect(resolveRpcAddress({ rpc_address: '0.0.0.0', rpc_interface: 'eth0' }, ifs)).toBe('10.1.2.3');
    expect(resolveRpcAddress({ rpc_address: '1.2.3.4', rpc_interface: '' }, ifs)).toBe('1.2.3.4');
    expect(flagError(() => resolveRpcAddress({ rpc_address: '', rpc_interface: 'eth9' }, ifs)).message).toMatch(/no such network interface \(present: eth0, v6only\)/);
    expect(flagError(() => resolveRpcAddress({ rpc_address: '', rpc_interface: 'v6only' }, ifs)).message).toMatch(/no IPv4 address/);
  });

  it('announces each accepted-but-unbuilt feature once', () => {
    const { flags, parsed } = parseMasterFlags(['--offload_on_evict', '--max_retry_attempts=3', '--root_fs_dir=/mnt/fs']);
    const lines = unbuiltFeatureNotices(flags, parsed.explicit);
    expect(lines).toEqual(['--offload_on_evict/--offload_force_evict: used only with --enable_offload; nothing is offloaded']); // tasks and the file tier are built
    expect(unbuiltFeatureNotices(parseMasterFlags(['--enable_offload', '--offload_on_evict']).flags, new Set())).toEqual([]);
    expect(unbuiltFeatureNotices(parseMasterFlags([]).flags, new Set())).toEqual([]);
    const budgetOnly = parseMasterFlags(['--global_file_segment_size=1GB']);
    expect(unbuiltFeatureNotices(budgetOnly.flags, budgetOnly.parsed.explicit)).toEqual([
      '--global_file_segment_size: used only with --root_fs_dir (the file tier is off); the value is validated and kept',
    ]);
    const snap = parseMasterFlags(['--snapshot_interval_seconds=60', '--snapshot_catalog_store_type=embedded']);
    expect(unbuiltFeatureNotices(snap.flags, snap.parsed.explicit)).toEqual([
      '--snapshot_interval_seconds, --snapshot_catalog_store_type: used only with --enable_snapshot or --enable_snapshot_restore; the value is validated and kept',
    ]);
    process.env.STORE_SNAPSHOT_LOCAL_PATH = '/tmp/unused';
    try {
      const ha = parseMasterFlags(['--enable_ha', '--enable_snapshot', '--snapshot_object_store_type=local']);
      expect(unbuiltFeatureNotices(ha.flags, ha.parsed.explicit)).toEqual([expect.stringMatching(/with --enable_ha: snapshots and the change log serve a single master only/)]);
    } finally {
      delete process.env.STORE_SNAPSHOT_LOCAL_PATH;
    }
  });

  it('lists every flag in the usage text', () => {
    const usage = masterFlagTable.usage();
    for (const s of masterFlagTable.all()) expect(usage).toContain(`--${s.name} `);
  });
});

describe('RPC connection cap under a file descriptor limit', () => {
  const limits = (soft: string) =>
    `Limit                     Soft Limit           Hard Limit           Units     \nMax open files            ${soft}                 1048576              files     \n`;
  it('reads the soft "Max open files" of /proc/self/limits', () => {
    expect(openFilesLimit(limits('1024'))).toBe(1024);
    expect(openFilesLimit(limits('unlimited'))).toBeUndefined();
    expect(openFilesLimit('')).toBeUndefined();
  });

  it('keeps --rpc_max_connections when the limit allows it, else lowers it to the limit less FD_RESERVE and says so', () => {
    expect(effectiveMaxConnections(4096, 1_048_576)).toEqual({ max: 4096 });
    expect(effectiveMaxConnections(4096, undefined)).toEqual({ max: 4096 });
    expect(effectiveMaxConnections(896, 1024)).toEqual({ max: 896 });
    const lowered = effectiveMaxConnections(4096, 1024);
    expect(lowered.max).toBe(1024 - FD_RESERVE);
    expect(lowered.notice).toMatch(/--rpc_max_connections=4096 needs more file descriptors than the limit of 1024 \(ulimit -n\) leaves; serving at most 896/);
    expect(effectiveMaxConnections(4096, 64).max).toBe(1);
  });

  it('has defaults for the connection bounds', () => {
    const { flags } = parseMasterFlags([]);
    expect(flags).toMatchObject({ rpc_max_connections: 4096, rpc_request_timeout_seconds: 30_000, rpc_max_buffered_request_bytes: 256 * 1024 * 1024 });
    expect(parseMasterFlags(['--rpc_request_timeout_seconds=0', '--rpc_max_buffered_request_bytes=64MB']).flags).toMatchObject({
      rpc_request_timeout_seconds: 0,
      rpc_max_buffered_request_bytes: 64 * 1024 * 1024,
    });
    expect(flagError(() => parseMasterFlags(['--rpc_max_connections=0'])).message).toMatch(/rpc_max_connections/);
  });
});
