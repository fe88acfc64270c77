// Prometheus metrics of the master: per-RPC request counts, error counts by code and latency
// histograms (gRPC and fast channel alike), gauges read from the core at scrape time, and the
// process defaults. One Registry per master so tests can run several in one process.
import client from 'prom-client';
import { errorCodeName } from '../common/error-code.js';
import type { MethodInfo } from '../common/master-proto.js';
import type { CoreStats } from './core-port.js';
import type { ConnectionEvents } from './rpc-listener.js';

export type Transport = 'grpc' | 'channel';

export class MasterMetrics {
  readonly registry = new client.Registry();
  private readonly requests: client.Counter<'method' | 'transport'>;
  private readonly errors: client.Counter<'method' | 'code'>;
  private readonly latency: client.Histogram<'method'>;
  // Children resolved once per method: label lookups cost more than the increment itself.
  private readonly reqChild: Record<Transport, client.Counter.Internal[]>;
  private readonly latChild: client.Histogram.Internal<'method'>[];
  private readonly errChild = new Map<string, client.Counter.Internal>();
  private cached: CoreStats | undefined;

  constructor(
    private readonly methods: readonly MethodInfo[],
    private readonly readStats: () => CoreStats,
  ) {
    const registers = [this.registry];
    this.requests = new client.Counter({
      name: 'store_master_rpc_requests_total',
      help: 'RPC requests served, by method and transport',
      labelNames: ['method', 'transport'],
      registers,
    });
    this.errors = new client.Counter({
      name: 'store_master_rpc_errors_total',
      help: 'RPC responses with a non-OK status_code, by method and ErrorCode name',
      labelNames: ['method', 'code'],
      registers,
    });
    this.latency = new client.Histogram({
      name: 'store_master_rpc_latency_seconds',
      help: 'time spent serving an RPC inside the master, by method',
      labelNames: ['method'],
      buckets: [0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
      registers,
    });
    this.reqChild = {
      grpc: methods.map((m) => this.requests.labels(m.name, 'grpc')),
      channel: methods.map((m) => this.requests.labels(m.name, 'channel')),
    };
    this.latChild = methods.map((m) => this.latency.labels(m.name));

    // One core.stats() per scrape, shared by every gauge (metrics() clears it).
    const stats = (): CoreStats => (this.cached ??= this.readStats());
    const gauge = (name: string, help: string, pick: (s: CoreStats) => number): void => {
      new client.Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(pick(stats()));
        },
      });
    };
    gauge('store_master_segments', 'mounted segments', (s) => s.segments);
    gauge('store_master_capacity_bytes', 'total bytes of mounted segments', (s) => s.capacityBytes);
    gauge('store_master_used_bytes', 'bytes allocated to objects', (s) => s.usedBytes);
    gauge('store_master_objects', 'objects stored', (s) => s.objects);
    gauge('store_master_active_leases', 'objects with an active lease', (s) => s.activeLeases);
    gauge('store_master_soft_pinned_objects', 'soft-pinned objects', (s) => s.softPinned);
    gauge('store_master_hard_pinned_objects', 'hard-pinned objects', (s) => s.hardPinned);
    gauge('store_master_clients', 'live clients', (s) => s.clients);
    gauge('store_master_under_replicated_objects', 'objects with fewer replicas than they had (a segment was lost), waiting for a copy', (s) => s.underReplicated);
    gauge('store_master_replica_copies_in_flight', 'replica copies assigned to clients and not yet reported', (s) => s.copiesInFlight);
    gauge('store_master_tasks_pending', 'copy/move tasks waiting for a processing slot or a retry', (s) => s.tasksPending);
    gauge('store_master_tasks_processing', 'copy/move tasks whose copies are under way', (s) => s.tasksProcessing);
    gauge('store_master_tasks_finished', 'copy/move tasks finished and still kept for QueryTask', (s) => s.tasksFinished);
    gauge('store_master_file_tier_used_bytes', 'bytes of values held in file-tier files (--root_fs_dir)', (s) => s.fileUsedBytes);
    gauge('store_master_file_tier_budget_bytes', "the file tier's byte budget (--global_file_segment_size; 0 when the tier is off)", (s) => s.fileBudgetBytes);
    gauge('store_master_file_tier_objects', 'objects with a complete file in the file tier', (s) => s.fileObjects);
    // Counters of totals the core keeps: each scrape adds what the total grew by.
    const total = (name: string, help: string, pick: (s: CoreStats) => number): void => {
      let last = 0;
      new client.Counter({
        name,
        help,
        registers,
        collect() {
          const now = pick(stats());
          if (now > last) this.inc(now - last);
          last = now;
        },
      });
    };
    gauge('store_master_disk_capacity_bytes', 'bytes of mounted SSD (offload) segments', (s) => s.diskCapacityBytes);
    gauge('store_master_disk_used_bytes', 'bytes of SSD segments held by DISK replicas', (s) => s.diskUsedBytes);
    gauge('store_master_disk_quota_bytes', 'disk quota (--quota_bytes, or 90% of the SSD capacity)', (s) => s.diskQuotaBytes);
    gauge('store_master_offloads_queued', 'objects waiting for an offload copy to SSD', (s) => s.offloadsQueued);
    gauge('store_master_offloads_in_flight', 'offload copies assigned and not yet reported', (s) => s.offloadsInFlight);
    gauge('store_master_promotions_queued', 'SSD-only objects waiting for a promotion copy to memory', (s) => s.promotionsQueued);
    total('store_master_offloads_total', 'DISK replicas that joined their object (offload copies reported complete)', (s) => s.offloadsDone);
    total('store_master_offload_failures_total', 'offload copies that failed, went stale or were not reported in time', (s) => s.offloadsFailed);
    total('store_master_offloads_dropped_total', 'completed writes not queued for offload: the queue was full', (s) => s.offloadsDropped);
    total('store_master_offloads_skipped_full_total', 'offloads not placed: no SSD room within the quota', (s) => s.offloadsSkippedFull);
    total(
      'store_master_offloads_requeued_total',
      'objects queued for offload again: their DISK replica went with its SSD segment, a memory replica remained',
      (s) => s.offloadsRequeued,
    );
    total('store_master_promotions_total', 'SSD-only objects given a memory replica again', (s) => s.promotionsDone);
    total('store_master_promotion_failures_total', 'promotions not placed or whose copy failed', (s) => s.promotionsFailed);
    total('store_master_disk_evictions_total', 'objects or DISK replicas removed to keep SSD use within the quota', (s) => s.diskEvictions);
    total('store_master_forced_evictions_total', 'objects evicted from memory without a disk copy while offload was on', (s) => s.forcedEvictions);
    total('store_master_evictions_total', 'objects evicted', (s) => s.evictionsTotal);
    total('store_master_replicas_copied_total', 'replicas copied to replace lost ones', (s) => s.copied);
    total('store_master_replica_copy_failures_total', 'replica copies that failed or were not reported in time', (s) => s.failed);
    total('store_master_tasks_succeeded_total', 'copy/move tasks that succeeded', (s) => s.tasksSucceeded);
    total('store_master_tasks_failed_total', 'copy/move tasks that failed (error, retries exhausted, timed out)', (s) => s.tasksFailed);
    total('store_master_tasks_retried_total', 'copy/move task attempts that failed and were retried', (s) => s.tasksRetried);
    total('store_master_file_tier_files_written_total', 'file-tier files reported complete and indexed', (s) => s.filesWritten);
    total(
      'store_master_file_tier_files_refused_total',
      "file-tier files refused (over the budget, object removed meanwhile, checksums not the memory write's) and deleted",
      (s) => s.filesRefused,
    );
    total('store_master_file_tier_files_bad_total', 'file-tier files the rescan found unreadable (bad header, torn value) and left out', (s) => s.filesBad);
    this.refused = new client.Counter({
      name: 'store_master_rpc_connections_refused_total',
      help: 'RPC connections closed on accept: limit (--rpc_max_connections reached), accept_error (no file descriptor or other accept failure)',
      labelNames: ['reason'],
      registers,
    });
    this.closed = new client.Counter({
      name: 'store_master_rpc_connections_closed_total',
      help: 'RPC connections the master closed: request_timeout, request_budget, handshake_timeout, idle, unknown_protocol, protocol_error, tls_required (plain gRPC on a TLS port), tls_refused (TLS handshake failed: no or untrusted client certificate...)',
      labelNames: ['reason'],
      registers,
    });
    this.authRefusedCounter = new client.Counter({
      name: 'store_master_auth_refused_total',
      help: 'peers refused for want of the cluster secret, by interface: master-channel, master-grpc, metadata-http, master-replication',
      labelNames: ['interface'],
      registers,
    });
    client.collectDefaultMetrics({ register: this.registry });
  }

  private readonly authRefusedCounter: client.Counter<'interface'>;

  /** Counts a peer refused for want of the cluster secret on `iface`. */
  readonly authRefused = (iface: string): void => {
    this.authRefusedCounter.labels(iface).inc();
  };

  private readonly refused: client.Counter<'reason'>;
  private readonly closed: client.Counter<'reason'>;

  /** The sink of the RPC listener's refusals and closes (rpc-listener.ts). */
  readonly connectionEvents: ConnectionEvents = {
    refused: (reason) => this.refused.labels(reason).inc(),
    closed: (reason) => this.closed.labels(reason).inc(),
  };

  /** Gauges of the RPC port, read at scrape time. */
  watchConnections(read: () => { connections: number; bufferedRequestBytes: number }): void {
    const registers = [this.registry];
    new client.Gauge({
      name: 'store_master_rpc_connections',
      help: 'open RPC connections (gRPC and channel)',
      registers,
      collect() {
        this.set(read().connections);
      },
    });
    new client.Gauge({
      name: 'store_master_rpc_buffered_request_bytes',
      help: 'bytes of incomplete requests held across RPC connections',
      registers,
      collect() {
        this.set(read().bufferedRequestBytes);
      },
    });
  }

  /** The gauge of calls held for a new leader's file-tier rescan (master/rescan-hold.ts), read at scrape time. */
  watchHeld(read: () => number): void {
    new client.Gauge({
      name: 'store_master_calls_held_for_rescan',
      help: "calls a new HA leader holds until its rescan of the file tier's directory ends (at most 5 s each)",
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** Records one served RPC. */
  observe(methodIndex: number, transport: Transport, statusCode: number, seconds: number): void {
    this.reqChild[transport][methodIndex].inc();
    this.latChild[methodIndex].observe(seconds);
    if (statusCode !== 0) this.countError(methodIndex, statusCode);
  }

  private countError(methodIndex: number, statusCode: number): void {
    const k = `${methodIndex}:${statusCode}`;
    let c = this.errChild.get(k);
    if (!c) {
      c = this.errors.labels(this.methods[methodIndex].name, errorCodeName(statusCode));
      this.errChild.set(k, c);
    }
    c.inc();
  }

  metrics(): Promise<string> {
    this.cached = undefined;
    return this.registry.metrics();
  }

  /** Totals for the summary line: requests and errors over all methods. */
  async totals(): Promise<{ requests: number; errors: number }> {
    const sum = async (m: client.Metric): Promise<number> => (await m.get()).values.reduce((a, v) => a + v.value, 0);
    return { requests: await sum(this.requests), errors: await sum(this.errors) };
  }

  /** Per-method request counts and mean latency, for /metrics/summary. */
  async perMethod(): Promise<Array<{ method: string; requests: number; meanMs: number }>> {
    const lat = await this.latency.get();
    const out = new Map<string, { count: number; sum: number }>();
    for (const v of lat.values) {
      const method = String(v.labels.method);
      const e = out.get(method) ?? { count: 0, sum: 0 };
      if (v.metricName?.endsWith('_count')) e.count = v.value;
      else if (v.metricName?.endsWith('_sum')) e.sum = v.value;
      out.set(method, e);
    }
    return [...out].filter(([, e]) => e.count > 0).map(([method, e]) => ({ method, requests: e.count, meanMs: (e.sum / e.count) * 1000 }));
  }
}
