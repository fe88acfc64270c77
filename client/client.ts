// The embedded client: `Client.setup(...)` maps and registers memory, publishes its transfer
// endpoint to the metadata service, mounts its global segment with the master and keeps it alive
// with a heartbeat; Put/Get and the other object operations run through the data path. One class,
// two roles: global_segment_size 0 = pure client, local_buffer_size 0 = pure server.
import { FileTier, type FileTierCounts } from './file-tier.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import { rmSync } from 'node:fs';
import { createOffloadFile } from './offload-file.js';
import { HotCache, hotCacheSettings } from './hot-cache.js';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ErrorCode } from '../common/error-code.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { BufferPool, type BufferLease, type PoolRegion } from './buffer-pool.js';
import { OffsetAllocator } from '../common/offset-allocator.js';
import { checkKey, DataPath, type BatchGetIntoResult, type BatchGetResult, type BatchWriteResult, type OwnSegment, type PutConfig, type Value } from './data-path.js';
import type { ReadObserver, ReadSource } from './read-path.js';
import { InvalidParamsError, ObjectNotFoundError, StoreError, UnauthenticatedError, UnavailableError } from './errors.js';
import { clientSecret } from '../common/cluster-secret.js';
import { MasterAuthError } from './master-channel-errors.js';
import { FenceKeeper } from './fence-keeper.js';
import { Heartbeat } from './heartbeat.js';
import { OffloadFileWriter } from './offload-file-writer.js';
import { MasterClient, PING_METHOD } from './master-client.js';
import { parseMasterAddress, resolveMasterAddress, watchLeader } from './leader-discovery.js';
import { openMetadataStore } from './metadata/open-metadata-store.js';
import type { MetadataStore } from './metadata/metadata-store.js';
import { loadNative, type MappedRegion, type NativePort, type ResultArenaPort, type TransferEngineOptions, type TransferEnginePort } from './native-port.js';
import type { DummyClientOptions } from './dummy-client.js';
import type { StoreClient } from './store-client.js';
import { ReplicaCopier } from './replica-copy.js';
import { taskInfoOf, type TaskInfo } from './task-info.js';
import type { TaskInfo__Output } from '../proto/gen/store/TaskInfo.js';
import { resolveSettings, setupBackoffMs, type ClientSetupConfig, type ClientSettings } from './setup-config.js';
import {
  batchBytes,
  bufferBytes,
  ClientMetrics,
  clientMetricsSettings,
  measured,
  addRegionGauges,
  noBytes,
  sizeBytes,
  valueBytes,
  type ClientMetricsSettings,
  type ClientOp,
  type RegionTotals,
} from './client-metrics.js';

export interface ClientOptions {
  /** Heartbeat period (default 1000 ms; the master's --client_ttl defaults to 10 s). */
  heartbeatIntervalMs?: number;
  /**
   * Staging pool caps: most leases / bytes outstanding (also spelled max_regions / max_bytes as in
   * the spec's buffer pool), acquire wait, overflow regions allowed (default true).
   */
  bufferPool?: {
    maxRegions?: number;
    maxBytes?: number;
    max_regions?: number;
    max_bytes?: number;
    acquireTimeoutMs?: number;
    overflow?: boolean;
  };
  /** Per-request timeout of master RPCs (default 10000 ms). */
  requestTimeoutMs?: number;
  /** Transfer engine knobs (defaults are the engine's). */
  engine?: { connectionsPerPeer?: number; chunkSize?: number; timeoutMs?: number; shmTransport?: boolean; shmPeerUids?: number[] };
  /** Log sink; default: warnings and errors to stderr. */
  log?: (level: 'info' | 'warn' | 'error', message: string) => void;
  /** Environment to read MC_* variables from (default process.env). */
  env?: Record<string, string | undefined>;
  /** Monotonic clock in ms (default performance.now). */
  now?: () => number;
  /**
   * Touch every page of the global segment at setup, so writes from peers never wait on first-touch
   * page faults and a machine without the memory fails at startup rather than mid-run (default false).
   */
  prefaultSegment?: boolean;
  /**
   * Bytes of the result arena large Get results are read into directly (default
   * MC_STORE_RESULT_ARENA_SIZE, else local_buffer_size; resident); 0: every Get result is a fresh
   * Buffer filled through a staging lease.
   */
  resultArenaBytes?: number;
  /**
   * Record the CRC-32C of every slice at PutEnd and check it on every Get (docs/integrity.md).
   * Default: MC_STORE_CHECKSUM (1/true/yes/on), else off.
   */
  checksums?: boolean;
  /**
   * Replica lists kept to serve repeated reads of a key without a master call while the read
   * lease granted with them holds (client/replica-cache.ts; default 65,536; 0 disables).
   */
  replicaCacheEntries?: number;
  /**
   * Aborts setup: the registration retries stop at once (a backoff wait is cut short) and setup
   * rejects with an UnavailableError saying so, after unmounting whatever it had mounted. Only
   * setup listens to it; a client that was returned is stopped with close().
   */
  signal?: AbortSignal;
  /**
   * Client metrics: an instance to record into, or false for none. Default: per
   * MC_STORE_CLIENT_METRIC (on unless 0/false), summary logged every MC_STORE_CLIENT_METRIC_INTERVAL
   * seconds (0: never), labelled with MC_STORE_CLUSTER_ID.
   */
  metrics?: ClientMetrics | false;
  /**
   * Segments are mounted after setup with addSegment (a store service's CXL memory): a client
   * with neither a global segment nor a local buffer is then valid (default false: refused).
   */
  segmentsLater?: boolean;
  /**
   * The cluster secret's file (docs/threat-model.md); default STORE_CLUSTER_SECRET_FILE (from
   * `env`, else the process environment). Without
   * one the client speaks unauthenticated, which only a master run with --allow_unauthenticated
   * accepts (others refuse it with UnauthenticatedError).
   */
  clusterSecretFile?: string;
  /**
   * Bytes of Put values copied and waiting for their file-tier write (client/file-tier.ts; default
   * 256 MiB). A Put waits for room when it is full: nothing is dropped.
   */
  fileStagingBytes?: number;
  /**
   * An SSD tier of this client (docs/tiers.md): a sparse file of `size` bytes (a multiple of
   * 4096) in `dir`, mounted at setup as an offload segment (see addOffloadFile).
   */
  offload?: { dir: string; size: number };
}

/** After a Ping brought copies, Pings come this often while no more do (a master that sends no copy notices)... */
const COPY_POLL_MS = 20;
/** ...for this long (then at the heartbeat interval again). */
const COPY_POLL_WINDOW_MS = 2000;

/** A segment of this client: mounted, draining (unmounted with a grace period) or unmounted (memory still held). */
export interface SegmentInfo {
  name: string;
  id: string;
  address: number;
  size: number;
  state: 'mounted' | 'draining' | 'unmounted';
  /** 'cxl' for CXL memory (a DAX device or file), 'ssd' for an offload segment (a file on SSD), else 'dram'. */
  memory: 'dram' | 'cxl' | 'ssd';
}

/** Waits `ms`, or less when `signal` aborts first (the caller checks the signal afterwards). */
function backoff(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The error an aborted setup rejects with. */
function setupAborted(signal: AbortSignal, phase: string): UnavailableError {
  const r: unknown = signal.reason;
  const why = r instanceof Error ? r.message : r === undefined ? 'aborted' : typeof r === 'string' ? r : JSON.stringify(r);
  return new UnavailableError(`setup aborted ${phase} (${why}); nothing is left mounted`, { cause: r });
}

/**
 * `p`, or a rejection with `abortError()` as soon as `signal` aborts; a value `p` yields after that
 * is handed to `late` to dispose of.
 */
function unlessAborted<T>(p: Promise<T>, signal: AbortSignal | undefined, abortError: () => Error, late: (v: T) => void): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      reject(abortError());
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        if (aborted) late(v);
        else resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (!aborted) reject(e);
      },
    );
  });
}

function defaultLog(level: 'info' | 'warn' | 'error', message: string): void {
  if (level !== 'info') process.stderr.write(`[client] ${level.toUpperCase()} ${message}\n`);
}

/** Pause between pings of a newly elected leader that does not serve yet, and how many. */
const SERVING_POLL_MS = 50;
const SERVING_POLLS = 100;

/**
 * Waits (at most SERVING_POLLS pings) until a newly elected leader serves: it publishes its
 * address one backend write before it serves (docs/ha.md "What a new leader does"), and a mount
 * refused meanwhile would wait for the next heartbeat (1 s) to be tried again.
 */
async function untilServing(master: MasterClient, clientId: string, stop: () => boolean): Promise<void> {
  for (let i = 0; i < SERVING_POLLS && !stop(); i++) {
    const r = await master.ping({ client_id: clientId });
    if (r.status_code !== ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS) return;
    await new Promise((resolve) => setTimeout(resolve, SERVING_POLL_MS));
  }
}

/** Errors worth another registration attempt: anything but bad parameters. */
function retryable(e: unknown): boolean {
  if (e instanceof MasterAuthError) return false;
  if (!(e instanceof StoreError)) return true;
  return e.code !== ErrorCode.INVALID_PARAMS && e.code !== ErrorCode.INVALID_KEY && e.code !== ErrorCode.NOT_IMPLEMENTED;
}

export class Client implements StoreClient {
  readonly clientId = randomUUID();
  private readonly segments = new Map<string, OwnSegment>();
  private master: MasterClient | undefined;
  private pool: BufferPool | undefined;
  private localRegion: MappedRegion | undefined;
  private resultArena: ResultArenaPort | undefined;
  private hotRegion: MappedRegion | undefined;
  /** When a Ping last brought replica copies (monotonic ms). */
  private copiesSeenAt = -Infinity;
  /** From the last Ping reply: the master sends copy notices; copies wait beyond those it handed out. */
  private copiesPushed = false;
  private moreCopies = false;
  /** A copy notice came while the copier could take no copies: it pings when it can (onIdle), not at once. */
  private noticed = false;
  /** The local hot cache (MC_STORE_LOCAL_HOT_CACHE_SIZE), if on: its hits and misses are in `stats()`. */
  hotCache: HotCache | undefined;
  private heartbeat: Heartbeat | undefined;
  private stopLeaderWatch: (() => void) | undefined;
  /** host:port of the master in use (the elected leader in HA mode). */
  private masterEndpoint = '';
  /** The cluster secret (null: none, the master must allow unauthenticated clients). */
  private secret: Buffer | null = null;
  private data!: DataPath;
  private closing = false;
  /** Memory registered for other processes' data (dummy clients' shared regions). */
  private readonly attached: MappedRegion[] = [];
  private fences!: FenceKeeper;
  /** Replica copies' positioned writes into own SSD files (offload-file-writer.ts). */
  private readonly offloadFiles = new OffloadFileWriter();
  /** Replica copies the master asks for (replica-copy.ts); undefined for a pure server (no staging). */
  private copier: ReplicaCopier | undefined;
  /** The file tier (file-tier.ts); undefined for a pure server (no Puts, no Gets). */
  private files: FileTier | undefined;
  private fileCounter: { inc(labels: { outcome: string }, n: number): void } | undefined;
  /** Checksum mismatches seen, by segment (metrics). */
  private mismatches: { inc(labels: { segment: string }): void } | undefined;
  /** The remount in progress (they run one at a time). */
  private remounting: Promise<void> = Promise.resolve();
  /** Segments the master has accepted during setup (an aborted setup unmounts exactly these). */
  private readonly mountedInSetup = new Set<OwnSegment>();
  private readonly log: NonNullable<ClientOptions['log']>;
  private readonly now: () => number;
  /** Segments unmounted with the master (draining: in their grace period) whose memory is still held. */
  private readonly unmounting = new Map<OwnSegment, 'draining' | 'unmounted'>();
  /** Suffix of the next extra segment's name (`<endpoint>/<n>`). */
  private extraSegments = 0;
  private stopSummary: (() => void) | undefined;
  /** This client's metrics (undefined when MC_STORE_CLIENT_METRIC is off or options.metrics is false). */
  readonly metrics: ClientMetrics | undefined;
  private readonly metricsSettings: ClientMetricsSettings;

  private constructor(
    readonly settings: ClientSettings,
    private readonly native: NativePort,
    private readonly engine: TransferEnginePort,
    private readonly metadata: MetadataStore,
    private readonly options: ClientOptions,
  ) {
    this.log = options.log ?? defaultLog;
    this.now = options.now ?? (() => performance.now());
    this.metricsSettings = clientMetricsSettings(options.env ?? process.env);
    for (const w of this.metricsSettings.warnings) this.log('warn', w);
    this.metrics = options.metrics === false ? undefined : (options.metrics ?? ClientMetrics.fromSettings(this.metricsSettings));
  }

  /** The summary line every MC_STORE_CLIENT_METRIC_INTERVAL seconds (started once setup is done). */
  private startSummary(): void {
    const m = this.metrics;
    const secs = this.metricsSettings.intervalSeconds;
    if (!m || secs <= 0) return;
    const t = setInterval(() => this.log('info', m.summary()), secs * 1000);
    t.unref(); // never keeps a process alive on its own
    this.stopSummary = () => clearInterval(t);
  }

  /**
   * Sets up a client: validates the parameters (RDMA is refused plainly), starts the transfer
   * engine, maps and registers the local buffer and the global segment, publishes the endpoint,
   * mounts with the master (retried MC_STORE_CLIENT_SETUP_RETRIES times with backoff) and starts
   * the heartbeat. On failure everything acquired so far is released. `options.signal` aborts it.
   */
  static async setup(config: ClientSetupConfig, options: ClientOptions = {}): Promise<Client> {
    const env = options.env ?? process.env;
    const settings = resolveSettings(config, env, options.segmentsLater);
    const signal = options.signal;
    if (signal?.aborted) throw setupAborted(signal, 'before it started');
    try {
      parseMasterAddress(settings.masterAddress, env); // host:port, or etcd://... / redis://... / k8s://... for HA
    } catch (e) {
      throw new InvalidParamsError(`setup: ${(e as Error).message}`, { cause: e });
    }
    let secret: Buffer | undefined;
    try {
      secret = clientSecret(options.clusterSecretFile, { ...process.env, ...options.env });
    } catch (e) {
      throw new InvalidParamsError(`setup: ${(e as Error).message}`, { cause: e });
    }
    const native = await loadNative();
    const range = settings.enginePort !== undefined ? { min: settings.enginePort, max: settings.enginePort } : native.clientPortRange(env);
    // authSecret: the engine's own handshake with its peers (transfer-tcp, transfer-shm)
    const engineOptions: TransferEngineOptions = {
      host: settings.host,
      minPort: range.min,
      maxPort: range.max,
      memcpyLocal: settings.localMemcpy,
      env, // its defaults (MC_STORE_SHM_TRANSPORT, ...) from the same environment as the client's settings
      ...options.engine,
      authSecret: secret,
    };
    const engine = new native.TransferEngine(engineOptions);
    let metadata: MetadataStore;
    try {
      engine.start();
      metadata = openMetadataStore(settings.metadataServer, secret);
    } catch (e) {
      engine.close();
      throw e instanceof StoreError ? e : new UnavailableError(`setup: ${(e as Error).message}`, { cause: e });
    }
    const client = new Client(settings, native, engine, metadata, options);
    client.secret = secret ?? null;
    try {
      await client.init();
      if (signal?.aborted) throw setupAborted(signal, 'as registration completed');
      if (options.offload) await client.addOffloadFile(options.offload.dir, options.offload.size);
    } catch (e) {
      if (client.mountedInSetup.size > 0) await client.unmountAll(client.mountedInSetup); // only an abort gets here with mounts
      await client.release();
      throw e;
    }
    client.mountedInSetup.clear();
    return client;
  }

  /**
   * The client this process should use: a DummyClient of the real client named by
   * STORE_SIDECAR_ADDRESS (which the sidecar injection sets) when present, else an embedded
   * Client set up with `config` (required then).
   */
  static async connect(config?: ClientSetupConfig, options: ClientOptions & { dummy?: DummyClientOptions } = {}): Promise<StoreClient> {
    const env = options.env ?? process.env;
    if (env.STORE_SIDECAR_ADDRESS || options.dummy?.address || options.dummy?.socketPath) {
      const { DummyClient } = await import('./dummy-client.js');
      return DummyClient.connect({ env, ...options.dummy });
    }
    if (!config) throw new InvalidParamsError('Client.connect: STORE_SIDECAR_ADDRESS is not set and no setup config was given for an embedded client');
    return Client.setup(config, options);
  }

  /** host:port of the master in use (the elected leader in HA mode); '' before the first connection. */
  get masterAddress(): string {
    return this.masterEndpoint;
  }

  /** Whether this client records every slice's CRC-32C at PutEnd and checks it on reads. */
  get recordsChecksums(): boolean {
    return this.checksumsOn();
  }

  /** Whether Puts also write a file-tier copy now (the master names a directory this host can use). */
  get putsWriteFiles(): boolean {
    return this.files?.enabled ?? false;
  }

  /** host:port of this client's transfer engine. */
  get endpoint(): string {
    return this.engine.endpoint;
  }

  /** Segments this client holds (name, id, address, size, state). */
  get mountedSegments(): SegmentInfo[] {
    return [...this.segments.values()].map((s) => ({
      name: s.name,
      id: s.id,
      address: s.region.address,
      size: s.region.size,
      state: this.unmounting.get(s) ?? 'mounted',
      memory: s.kind ?? 'dram',
    }));
  }

  /**
   * Maps and registers memory: `serve` for a segment (peers read and write it; the incarnation of
   * the registration is returned with it), not for local buffers (this engine's own transfers only).
   */
  private mapRegion(size: number, name: string, serve: boolean): { region: MappedRegion; incarnation: number } {
    const s = this.settings;
    const region = this.native.mapMemory({ size, kind: 'memfd', name, hugepage: s.hugepage, hugepageSize: s.hugepageSize });
    try {
      return { region, incarnation: this.engine.registerRegion(region.address, region.size, { serve }) };
    } catch (e) {
      region.release();
      throw e;
    }
  }

  /** Unregisters the region and unmaps it once no chunk moves bytes in it any more. */
  private async unmapRegion(region: MappedRegion): Promise<void> {
    try {
      await this.engine.unregisterRegion(region.address);
    } finally {
      region.release();
    }
  }

  /** Setup's steps, in order; setup() releases what they acquired when one fails. */
  private async init(): Promise<void> {
    this.mapLocalMemory();
    await this.mapSegment();
    this.buildDataPath();
    await this.register();
    await this.learnFileTier();
    this.startHeartbeat();
    this.startSummary();
    if (parseMasterAddress(this.settings.masterAddress, this.options.env ?? process.env).kind !== 'direct') this.followLeader();
  }

  /** The local buffer (staging pool, with overflow regions on demand) and the result arena. */
  private mapLocalMemory(): void {
    const s = this.settings;
    if (s.localBufferSize > 0) {
      const { region } = this.mapRegion(s.localBufferSize, `store-local-${this.clientId}`, false);
      this.localRegion = region;
      const primary: PoolRegion = { address: region.address, size: region.size, view: (o, n) => region.view(o, n), release: () => {} };
      const po = this.options.bufferPool ?? {};
      this.pool = new BufferPool({
        primary,
        allocator: new OffsetAllocator('local-buffer', 0, region.size),
        mapOverflow:
          po.overflow === false
            ? undefined
            : (size) => {
                const { region: r } = this.mapRegion(size, `store-overflow-${this.clientId}`, false);
                return {
                  address: r.address,
                  size: r.size,
                  view: (o, n) => r.view(o, n),
                  release: () => void this.unmapRegion(r).catch((e) => this.log('warn', `unmapping an overflow buffer failed: ${(e as Error).message}`)),
                };
              },
        maxRegions: po.maxRegions ?? po.max_regions,
        maxBytes: po.maxBytes ?? po.max_bytes,
        acquireTimeoutMs: po.acquireTimeoutMs,
      });
    }
    const arenaBytes = this.options.resultArenaBytes ?? s.resultArenaBytes;
    if (!Number.isSafeInteger(arenaBytes) || arenaBytes < 0) throw new InvalidParamsError(`setup: resultArenaBytes must be a non-negative integer, got ${arenaBytes}`);
    if (this.pool && arenaBytes > 0) {
      const arena = new this.native.ResultArena(arenaBytes);
      // Registered for the engine's life. Each result Buffer holds the mapping by itself, so one
      // kept past close() stays valid.
      this.engine.registerRegion(arena.address, arena.size, { serve: false });
      this.resultArena = arena;
    }
    // The local hot cache over SSD-tier reads (hot-cache.ts): its memory is mapped once, memfd with _USE_SHM.
    const hot = hotCacheSettings(this.options.env ?? process.env);
    if (hot) {
      const region = this.native.mapMemory({ size: hot.capacityBytes, kind: hot.useShm ? 'memfd' : 'anonymous', name: `store-hot-cache-${this.clientId}` });
      this.hotRegion = region;
      this.hotCache = new HotCache(Buffer.from(region.buffer), hot.blockSize, hot.admissionThreshold);
    }
  }

  /** The global segment this client contributes (mounted by register()). */
  private async mapSegment(): Promise<void> {
    const s = this.settings;
    if (s.globalSegmentSize > 0) {
      const { region, incarnation } = this.mapRegion(s.globalSegmentSize, `store-segment-${this.clientId}`, true);
      if (this.options.prefaultSegment) {
        // Every page backed now, on several threads (bench:prefault): ready in seconds, and a
        // machine without the memory fails here rather than under a peer's write.
        try {
          const started = this.now();
          const how = await region.populate();
          this.log('info', `segment of ${region.size} bytes prefaulted in ${Math.round(this.now() - started)} ms (${how.method}, ${how.threads} threads)`);
        } catch (e) {
          await this.unmapRegion(region);
          throw e;
        }
      }
      // The segment is named after the engine endpoint: unique per process, and what P2PHANDSHAKE needs.
      const name = this.engine.endpoint;
      this.segments.set(name, { name, id: randomUUID(), region, incarnation });
    }
  }

  /** Write fences, the data path, the replica copier and the client's own metrics. */
  private buildDataPath(): void {
    const s = this.settings;
    this.fences = new FenceKeeper({
      segment: (name) => {
        const seg = this.segments.get(name);
        return seg && { address: seg.region.address, incarnation: seg.incarnation };
      },
      setFence: (address, fence) => this.engine.setFence(address, fence),
      settled: (name) => this.offloadFiles.settled(name),
      log: (msg) => this.log('warn', msg),
    });
    if (this.pool) {
      this.files = new FileTier({
        crc32c: (d) => this.native.crc32c(d),
        copyWithCrc32c: (dst, src) => this.native.copyWithCrc32c(dst, src),
        report: async (done) => {
          const keys = done.map((f) => f.key);
          const res = await this.m().batchPutEnd({ keys, replica_type: ReplicaType.DISK, checksums: done.map((f) => ({ crc32c: f.checksums })) });
          if (res.status_code !== ErrorCode.OK) return keys.map(() => res.status_code);
          return keys.map((_, i) => res.results[i]?.status_code ?? ErrorCode.INTERNAL_ERROR);
        },
        log: (level, msg) => this.log(level, msg),
        stagingBytes: this.options.fileStagingBytes,
        onCount: (what, n) => this.fileCounter?.inc({ outcome: what }, n),
      });
    }
    this.data = new DataPath({
      master: {
        putStart: (r) => this.m().putStart(r),
        batchPutStart: (r) => this.m().batchPutStart(r),
        putEnd: (r) => this.m().putEnd(r),
        batchPutEnd: (r) => this.m().batchPutEnd(r),
        putRevoke: (r) => this.m().putRevoke(r),
        batchPutRevoke: (r) => this.m().batchPutRevoke(r),
        upsertStart: (r) => this.m().upsertStart(r),
        batchUpsertStart: (r) => this.m().batchUpsertStart(r),
        upsertEnd: (r) => this.m().upsertEnd(r),
        batchUpsertEnd: (r) => this.m().batchUpsertEnd(r),
        upsertRevoke: (r) => this.m().upsertRevoke(r),
        batchUpsertRevoke: (r) => this.m().batchUpsertRevoke(r),
        getReplicaList: (r) => this.m().getReplicaList(r),
        batchGetReplicaList: (r) => this.m().batchGetReplicaList(r),
      },
      engine: this.engine,
      pool: this.pool,
      segments: this.segments,
      addressOf: (v) => this.native.addressOf(v),
      resultArena: this.resultArena,
      hotCache: this.hotCache,
      offloadFiles: this.offloadFiles,
      fenced: (name, gen, incarnation) => this.fences.refuses(name, gen, incarnation),
      attachedRegions: this.attached,
      replicaCacheEntries: this.options.replicaCacheEntries,
      checksums: this.checksumsOn() ? { of: (d) => this.native.crc32c(d), copy: (dst, src) => this.native.copyWithCrc32c(dst, src) } : undefined,
      onChecksumMismatch: (key, segment) => {
        this.mismatches?.inc({ segment });
        this.log('warn', `the bytes of ${JSON.stringify(key)} read from segment ${segment} do not have the CRC-32C their writer recorded; the next replica is tried`);
      },
      localMemcpy: s.localMemcpy,
      meter: this.metrics,
      now: this.now,
      lookupEndpoint: async (name) => (await this.metadata.lookup(name))?.te_endpoint ?? null,
      rpc: (what, call) => this.rpc(what, call),
      rpcThen: (what, call, then) => this.rpcThen(what, call, then),
      files: this.files,
    });
    if (this.pool) {
      this.copier = new ReplicaCopier({
        clientId: () => this.clientId,
        copy: (cs, nearlyDone) => this.data.copyReplicas(cs, nearlyDone),
        reportBatch: (r) => this.m().batchReplicaCopied(r),
        report: (r) => this.m().replicaCopied(r),
        log: (level, msg) => this.log(level, msg),
        // Done with what it took: ask for more now, unless the master tells it when there is more (notices) and nothing waits.
        onIdle: () => {
          if (!this.copiesPushed || this.moreCopies || this.noticed) this.heartbeat?.nudge();
        },
      });
    }

    if (this.metrics) {
      addRegionGauges(this.metrics, () => this.regionTotals());
      const hot = this.hotCache;
      if (hot) {
        // totals kept by the cache (hot-cache.ts); gauges of monotonic counts, read at each scrape
        this.metrics.addGauge('store_client_hot_cache_hits', 'Gets of SSD-tier objects served from the local hot cache (total)', () => hot.stats().hits);
        this.metrics.addGauge('store_client_hot_cache_misses', 'Gets of SSD-tier objects the local hot cache did not hold (total)', () => hot.stats().misses);
        this.metrics.addGauge('store_client_hot_cache_used_bytes', 'bytes of the local hot cache holding values', () => hot.stats().usedBytes);
      }
      this.mismatches = this.metrics.addCounter(
        'store_client_checksum_mismatches_total',
        'replicas whose bytes did not have the CRC-32C their writer recorded (the read tried the next replica)',
        ['segment'],
      );
      if (this.files) {
        const files = this.files;
        this.fileCounter = this.metrics.addCounter(
          'store_client_file_tier_files_total',
          'file-tier files by outcome: written (reported and indexed), refused (by the master: budget, removed meanwhile), failed (write or report), bad (a read found it torn or foreign), read',
          ['outcome'],
        );
        this.metrics.addGauge('store_client_file_tier_staged_bytes', 'bytes of Put values copied and waiting for their file-tier write', () => files.counts.stagedBytes);
      }
    }
  }

  /** Connects to the master (the leader, in HA mode) and mounts the segments, retried with backoff. */
  private async register(): Promise<void> {
    const s = this.settings;
    const signal = this.options.signal;
    const discovered = parseMasterAddress(s.masterAddress, this.options.env ?? process.env).kind !== 'direct';
    let remountMounted = false; // segments mounted on a master given up since: a new incarnation on the next
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw setupAborted(signal, `before registration attempt ${attempt}`);
      try {
        if (!this.master) {
          // Resolving and connecting change nothing on the master: an abort need not wait for them.
          const aborted = () => setupAborted(signal!, `during registration attempt ${attempt}`);
          this.masterEndpoint = await unlessAborted(resolveMasterAddress(s.masterAddress, this.options.env ?? process.env), signal, aborted, () => {});
          this.master = await unlessAborted(
            MasterClient.connect(this.masterEndpoint, { requestTimeoutMs: this.options.requestTimeoutMs, secret: this.secret, onNotice: this.onNotice }),
            signal,
            aborted,
            (late) => late.close(),
          );
        }
        // A mount in flight is awaited (at most requestTimeoutMs): its outcome decides what to unmount.
        for (const seg of this.segments.values()) {
          if (this.mountedInSetup.has(seg) && !remountMounted) continue;
          await this.mount(seg, this.mountedInSetup.has(seg));
          this.mountedInSetup.add(seg);
        }
        break;
      } catch (e) {
        if (signal?.aborted) throw setupAborted(signal, `during registration attempt ${attempt}`);
        if (!retryable(e) || attempt > s.setupRetries) {
          const msg = `setup: registration with master ${s.masterAddress} failed after ${attempt} attempt(s): ${(e as Error).message}`;
          if (e instanceof MasterAuthError) throw new UnauthenticatedError(msg, { cause: e });
          throw e instanceof StoreError ? StoreError.fromCode(e.code, msg, { cause: e }) : new UnavailableError(msg, { cause: e });
        }
        if (discovered && this.master) {
          // The master we reached may no longer lead (or never did: an election moved on since we
          // read the record): the next attempt reads the leader again.
          this.master.close();
          this.master = undefined;
          remountMounted = this.mountedInSetup.size > 0;
        }
        const wait = setupBackoffMs(attempt);
        this.log('warn', `registration attempt ${attempt} failed (${(e as Error).message}); retrying in ${wait} ms`);
        await backoff(wait, signal);
      }
    }
  }

  /**
   * The file tier's directory, from one Ping before setup returns (later Pings keep it current),
   * so the first Puts already write files. A failed ping leaves it to the heartbeat.
   */
  private async learnFileTier(): Promise<void> {
    if (!this.files) return;
    try {
      const res = await this.m().ping({ client_id: this.clientId, fence_acks: [], can_copy: false });
      await this.files.setRoot(res.file_tier_root ?? '');
    } catch (e) {
      this.log('warn', `learning the file tier's directory failed (${(e as Error).message}); the heartbeat retries`);
    }
  }

  /** File-tier counters of this client (files written, refused, failed, bad files met, reads). */
  get fileTierCounts(): FileTierCounts | undefined {
    return this.files?.counts;
  }

  /** Resolves once every Put's file-tier write so far has been written and reported. */
  fileTierIdle(): Promise<void> {
    return this.files?.drain() ?? Promise.resolve();
  }

  /**
   * A NOTICE on the master channel: Ping means copies wait for this copier, so it pings now rather
   * than at its next heartbeat; a copier that can take none now (a batch being made) pings when it
   * can (onIdle): a Ping now would take nothing and cost master and copier a round trip.
   */
  private readonly onNotice = (method: number): void => {
    if (method !== PING_METHOD || this.copier === undefined || this.closing) return;
    if (this.copier.canTake) this.heartbeat?.nudge();
    else this.noticed = true;
  };

  /** Liveness pings (with fence acks and replica copies), and remounts when the master asks. */
  private startHeartbeat(): void {
    const s = this.settings;
    this.heartbeat = new Heartbeat({
      intervalMs: this.options.heartbeatIntervalMs ?? 1000,
      ping: async () => {
        const copier = this.closing ? undefined : this.copier;
        const canCopy = copier?.canTake ?? false;
        if (canCopy) this.noticed = false;
        const res = await this.m().ping({ client_id: this.clientId, fence_acks: this.fences.takeAcks(), can_copy: canCopy, copy_push: canCopy });
        void this.files?.setRoot(res.file_tier_root ?? '');
        this.fences.install(res.fences);
        this.copiesPushed = res.copy_push === true;
        this.moreCopies = res.more_copies === true;
        // Copies wait that this copier, busy when it pinged, did not take, and it can take them since
        // (done, or down to its last write after deciding not to ask: `moreCopies` was false then): ask again now.
        if (this.moreCopies && !canCopy && copier?.canTake === true) this.heartbeat?.nudge();
        if (res.copies.length > 0) {
          copier?.start(res.copies);
          this.copiesSeenAt = this.now();
        } else if (copier !== undefined && !res.copy_push && this.now() - this.copiesSeenAt < COPY_POLL_WINDOW_MS) {
          // Copies came lately (the SSD tier's offloads follow puts): ask again soon, not at the next heartbeat.
          setTimeout(() => this.heartbeat?.nudge(), COPY_POLL_MS).unref();
        }
        return res;
      },
      remount: () =>
        this.serialized(async () => {
          this.data.clearReplicaCache(); // a master that lost us also lost the leases it granted
          const segs = this.remountable();
          if (segs.length === 0) return; // a pure client has nothing the master must know
          this.log('warn', `master ${s.masterAddress} asked for a remount; remounting ${segs.length} segment(s)`);
          for (const seg of segs) await this.mount(seg, true);
          this.log('info', `remounted ${segs.length} segment(s) with master ${s.masterAddress}`);
        }),
      onError: (e) => {
        // First failure, then every 30th: a long outage should not flood the log.
        const n = this.heartbeat?.failures ?? 1;
        if (n === 1 || n % 30 === 0) this.log('warn', `heartbeat to master ${this.masterEndpoint} failed (${n}x): ${(e as Error).message}`);
      },
    });
    this.heartbeat.start();
    // A copier pings now: the master knows it as one (and where to send copy notices) from the start, not after a heartbeat interval.
    if (this.copier !== undefined) this.heartbeat.nudge();
  }

  /** The memory this client holds (the region gauges). */
  private regionTotals(): RegionTotals {
    const sizes = [...this.segments.values()].map((seg) => seg.region.size);
    if (this.localRegion) sizes.push(this.localRegion.size);
    if (this.resultArena) sizes.push(this.resultArena.size);
    return {
      regions: sizes.length + (this.pool?.stats().overflowRegions ?? 0),
      bytes: sizes.reduce((a, b) => a + b, 0),
      segmentsMounted: this.remountable().length,
    };
  }

  /** HA mode: when another master is elected, switch to it and remount there. */
  private followLeader(): void {
    let switching = Promise.resolve();
    this.stopLeaderWatch = watchLeader(
      this.settings.masterAddress,
      (leader) => {
        if (!leader || leader === this.masterEndpoint || this.closing) return;
        switching = switching.then(() =>
          this.serialized(async () => {
            try {
              const next = await MasterClient.connect(leader, { requestTimeoutMs: this.options.requestTimeoutMs, secret: this.secret, onNotice: this.onNotice });
              await untilServing(next, this.clientId, () => this.closing).catch((e: unknown) => {
                next.close(); // not switched to: nothing else holds it
                throw e;
              });
              const old = this.master;
              this.master = next;
              this.masterEndpoint = leader;
              this.data.clearReplicaCache(); // the old leader's leases mean nothing to the new one
              old?.close();
              const segs = this.remountable();
              this.log('warn', `master leader is now ${leader}; remounting ${segs.length} segment(s)`);
              for (const seg of segs) await this.mount(seg, true);
              this.log('info', `remounted ${segs.length} segment(s) on master leader ${leader}`);
            } catch (e) {
              this.log('warn', `switch to master leader ${leader} failed: ${(e as Error).message}`);
            }
          }),
        );
      },
      {
        env: this.options.env ?? process.env,
        // While the heartbeat fails the leader is likely gone: look for the next one every 100 ms.
        hurry: () => (this.heartbeat?.failures ?? 0) > 0,
        onError: (e) => this.log('warn', `leader lookup failed: ${e.message}`),
      },
    );
  }

  /** Segments a (new) master must know: all but those being unmounted. */
  private remountable(): OwnSegment[] {
    return [...this.segments.values()].filter((seg) => !this.unmounting.has(seg));
  }

  private m(): MasterClient {
    if (!this.master) throw new UnavailableError('the client is not connected to a master');
    return this.master;
  }

  /** Runs remounts one at a time (a master restart and a leader change may ask together). */
  private serialized(fn: () => Promise<void>): Promise<void> {
    const run = this.remounting.then(fn, fn);
    this.remounting = run.catch(() => undefined);
    return run;
  }

  /**
   * Publishes and mounts a segment. A remount first registers the memory again, with a new
   * incarnation: every replica list and write planned for the previous mount (a master that
   * dropped us, restarted, or lost its leadership) is then refused by the engine instead of
   * reaching memory whose objects the master no longer knows (docs/integrity.md).
   */
  private async mount(seg: OwnSegment, remount: boolean): Promise<void> {
    const te_endpoint = this.engine.endpoint;
    if (remount) {
      await this.engine.unregisterRegion(seg.region.address);
      seg.incarnation = this.engine.registerRegion(seg.region.address, seg.region.size, { serve: true });
      this.fences.forget(seg.name);
    }
    await this.metadata.publish(seg.name, { te_endpoint, protocol: this.settings.protocol, buffer: seg.region.address, size: seg.region.size });
    const request = {
      buffer: seg.region.address,
      size: seg.region.size,
      segment_name: seg.name,
      client_id: this.clientId,
      segment_id: seg.id,
      te_endpoint,
      // Peers reach every segment through the engine (the metadata above names its transport); to
      // the master, protocol cxl marks CXL memory, where the cxl allocation strategy places.
      protocol: seg.kind ?? this.settings.protocol,
      incarnation: seg.incarnation,
    };
    let res = await this.m().mountSegment(request);
    if (res.status_code === ErrorCode.SEGMENT_ALREADY_EXISTS) {
      // The master still has this name mounted, with an older registration (or, if it is not
      // ours, the unmount is refused and so is this mount): replace it.
      const gone = await this.m().unmountSegment({ segment_name: seg.name, client_id: this.clientId, grace_period_seconds: 0 });
      if (gone.status_code === ErrorCode.OK || gone.status_code === ErrorCode.SEGMENT_NOT_FOUND) res = await this.m().mountSegment(request);
    }
    if (res.status_code !== ErrorCode.OK) throw StoreError.fromCode(res.status_code, `mount of segment ${seg.name}`);
    if (res.segment_id) seg.id = res.segment_id;
  }

  /**
   * Runs a master call; transport failures become UnavailableError with the cause kept. Not an
   * async function: one promise hop fewer on every data-path operation.
   */
  private rpc<T>(what: string, call: () => Promise<T>): Promise<T> {
    return this.rpcThen(what, call, (v) => v);
  }

  /** rpc(what, call).then(then) with one promise fewer (the Get path's); `then`'s own errors pass as they are. */
  private rpcThen<T, R>(what: string, call: () => Promise<T>, then: (v: T) => R | PromiseLike<R>): Promise<R> {
    if (this.closing) return Promise.reject(new UnavailableError(`${what}: the client is closed`));
    let p: Promise<T>;
    try {
      p = call();
    } catch (e) {
      return Promise.reject(this.rpcFailure(what, e));
    }
    return p.then(then, (e: unknown) => {
      throw this.rpcFailure(what, e);
    });
  }

  private rpcFailure(what: string, e: unknown): Error {
    if (e instanceof StoreError) return e;
    return new UnavailableError(`${what}: master ${this.masterEndpoint || this.settings.masterAddress} unreachable: ${(e as Error).message}`, { cause: e });
  }

  private status(code: number, what: string): void {
    if (code !== ErrorCode.OK) throw StoreError.fromCode(code, what);
  }

  // ------------------------------------------------------------ objects

  /** measured() with this client's metrics. */
  private measure<T>(op: ClientOp, run: () => Promise<T>, bytesOf: (v: T) => number, items = 1): Promise<T> {
    return measured(this.metrics, op, run, bytesOf, items);
  }

  /** Stores `value` under `key` (immutable until removed). Rejects with ObjectExistsError if present. */
  put(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.measure(
      'put',
      () => this.data.put(key, value, config),
      () => valueBytes(value),
    );
  }

  /** Inserts or replaces `key`, reusing the existing placement when the layout allows. */
  upsert(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.measure(
      'upsert',
      () => this.data.upsert(key, value, config),
      () => valueBytes(value),
    );
  }

  /** Many puts: one BatchPutStart, one transfer batch, one BatchPutEnd. Per-key results. */
  putBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    const n = Array.isArray(items) ? items.length : 0;
    return this.measure(
      'put_batch',
      () => this.data.putBatch(items),
      batchBytes(this.metrics, 'put_batch', (_r, i) => valueBytes(items[i]?.value)),
      n,
    );
  }

  upsertBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    const n = Array.isArray(items) ? items.length : 0;
    return this.measure(
      'upsert_batch',
      () => this.data.upsertBatch(items),
      batchBytes(this.metrics, 'upsert_batch', (_r, i) => valueBytes(items[i]?.value)),
      n,
    );
  }

  /** The object's bytes. ObjectNotFoundError when absent; LeaseExpiredError if the read outlived its lease. */
  get(key: string): Promise<Buffer> {
    return this.measure('get', () => this.data.get(key), bufferBytes);
  }

  /** The object's size, and its bytes when it holds at most `maxBytes` (a larger one is not read). */
  getBounded(key: string, maxBytes: number, observe?: ReadObserver): Promise<{ size: number; value?: Buffer }> {
    return this.measure(
      'get',
      () => this.data.getBounded(key, maxBytes, observe),
      (r) => r.value?.length ?? 0,
    );
  }

  /**
   * Reads into `target` (zero-copy when it is registered memory, e.g. from allocBuffer); returns the
   * size. `observe` is told which replica the bytes came from (the dummy-client service passes it on).
   */
  getInto(key: string, target: Uint8Array, observe?: ReadObserver): Promise<number> {
    return this.measure('get_into', () => this.data.getInto(key, target, observe), sizeBytes);
  }

  getBatch(keys: readonly string[]): Promise<BatchGetResult[]> {
    const n = Array.isArray(keys) ? keys.length : 0;
    return this.measure(
      'get_batch',
      () => this.data.getBatch(keys),
      batchBytes(this.metrics, 'get_batch', (r) => r.value?.length ?? 0),
      n,
    );
  }

  /** Reads many objects, each into its target (registered targets directly); per-key size or error. */
  getIntoBatch(items: readonly { key: string; target: Uint8Array }[], observe?: (i: number, source: ReadSource) => void): Promise<BatchGetIntoResult[]> {
    const n = Array.isArray(items) ? items.length : 0;
    return this.measure(
      'get_into_batch',
      () => this.data.getIntoBatch(items, observe),
      batchBytes(this.metrics, 'get_into_batch', (r) => r.size ?? 0),
      n,
    );
  }

  /**
   * Whether checksums are recorded and checked: the option, else MC_STORE_CHECKSUM (1/true/yes/on),
   * else off. Off by default because their cost in bench:transfer was not shown under 5% at 64 KiB
   * and 4 MiB on this machine (3-17% in noisy runs; docs/integrity.md).
   */
  private checksumsOn(): boolean {
    if (this.options.checksums !== undefined) return this.options.checksums;
    const v = (this.options.env ?? process.env).MC_STORE_CHECKSUM;
    return v !== undefined && ['1', 'true', 'yes', 'on'].includes(v.trim().toLowerCase());
  }

  /** Reads served from cached replica lists (no master call), misses, and entries held. */
  get replicaCacheStats(): { hits: number; misses: number; entries: number } {
    return this.data.replicaCacheStats();
  }

  /**
   * Registers memory mapped from elsewhere (a dummy client's shared region) with this client's
   * transfer engine: puts from it and gets into it then move bytes with no copy. Call
   * detachRegion before unmapping it.
   */
  attachRegion(region: MappedRegion): void {
    if (this.closing) throw new UnavailableError('attachRegion: the client is closed');
    this.engine.registerRegion(region.address, region.size, { serve: false }); // our transfers' local side only
    this.attached.push(region);
  }

  /** Unregisters an attached region (waiting for transfers still touching it); the caller unmaps it. */
  async detachRegion(region: MappedRegion): Promise<void> {
    const i = this.attached.indexOf(region);
    if (i < 0) return;
    this.attached.splice(i, 1);
    await this.engine.unregisterRegion(region.address);
  }

  /** A lease of registered staging memory: values written there are put without a copy. */
  allocBuffer(size: number, timeoutMs?: number): Promise<BufferLease> {
    if (!this.pool) return Promise.reject(new UnavailableError('allocBuffer: this client is a pure server (local_buffer_size = 0)'));
    return this.pool.acquire(size, timeoutMs);
  }

  isExist(key: string): Promise<boolean> {
    return this.measure('is_exist', () => this.isExistNow(key), noBytes);
  }

  private async isExistNow(key: string): Promise<boolean> {
    checkKey(key, `isExist ${JSON.stringify(key)}`);
    const res = await this.rpc('ExistKey', () => this.m().existKey({ key }));
    if (res.status_code === ErrorCode.OBJECT_NOT_FOUND) return false;
    this.status(res.status_code, `isExist ${JSON.stringify(key)}`);
    return res.exists;
  }

  batchIsExist(keys: readonly string[]): Promise<boolean[]> {
    return this.measure('batch_is_exist', () => this.batchIsExistNow(keys), noBytes, Array.isArray(keys) ? keys.length : 0);
  }

  private async batchIsExistNow(keys: readonly string[]): Promise<boolean[]> {
    for (const k of keys) checkKey(k, `batchIsExist of ${keys.length} keys`);
    const res = await this.rpc('BatchExistKey', () => this.m().batchExistKey({ keys: [...keys] }));
    this.status(res.status_code, `batchIsExist of ${keys.length} keys`);
    return keys.map((_, i) => res.results[i]?.status_code === ErrorCode.OK && !!res.results[i]?.exists);
  }

  /** Size in bytes of the stored object (takes a read lease, like a Get). */
  getSize(key: string): Promise<number> {
    return this.measure('get_size', () => this.getSizeNow(key), noBytes);
  }

  private async getSizeNow(key: string): Promise<number> {
    checkKey(key, `getSize ${JSON.stringify(key)}`);
    const res = await this.rpc('GetReplicaList', () => this.m().getReplicaList({ key }));
    this.status(res.status_code, `getSize ${JSON.stringify(key)}`);
    const r = res.replica_list.find((x) => x.status === 3 /* COMPLETE */);
    if (!r) throw new ObjectNotFoundError(`getSize ${JSON.stringify(key)}: no complete replica`);
    if (r.file) return Number(r.file.size); // held only by the file tier
    return r.handles.reduce((n, h) => n + Number(h.size), 0);
  }

  /** Removes the object. `force` also removes a hard-pinned one. Refused while a reader holds a lease. */
  remove(key: string, force = false): Promise<void> {
    return this.measure('remove', () => this.removeNow(key, force), noBytes);
  }

  private async removeNow(key: string, force: boolean): Promise<void> {
    checkKey(key, `remove ${JSON.stringify(key)}`);
    const res = await this.rpc('Remove', () => this.m().remove({ key, force }));
    this.status(res.status_code, `remove ${JSON.stringify(key)}`);
  }

  /** Removes every object whose key matches the regular expression; returns how many. */
  removeByRegex(keyRegex: string): Promise<number> {
    return this.measure('remove_by_regex', () => this.removeByRegexNow(keyRegex), noBytes);
  }

  private async removeByRegexNow(keyRegex: string): Promise<number> {
    const res = await this.rpc('RemoveByRegex', () => this.m().removeByRegex({ key_regex: keyRegex }));
    this.status(res.status_code, `removeByRegex ${JSON.stringify(keyRegex)}`);
    return Number(res.removed_count);
  }

  /** Replica lists of every object whose key matches, by key. */
  queryByRegex(keyRegex: string): Promise<Map<string, ReplicaInfo__Output[]>> {
    return this.measure('query_by_regex', () => this.queryByRegexNow(keyRegex), noBytes);
  }

  private async queryByRegexNow(keyRegex: string): Promise<Map<string, ReplicaInfo__Output[]>> {
    const res = await this.rpc('GetReplicaListByRegex', () => this.m().getReplicaListByRegex({ key_regex: keyRegex }));
    this.status(res.status_code, `queryByRegex ${JSON.stringify(keyRegex)}`);
    return new Map(Object.entries(res.object_map).map(([k, v]) => [k, v.replica_list]));
  }

  /** Removes every object without an active lease; returns how many. */
  removeAll(): Promise<number> {
    return this.measure('remove_all', () => this.removeAllNow(), noBytes);
  }

  private async removeAllNow(): Promise<number> {
    const res = await this.rpc('RemoveAll', () => this.m().removeAll({}));
    this.status(res.status_code, 'removeAll');
    return Number(res.removed_count);
  }

  /** Network addresses of the given clients' segments (default: this client). */
  batchQueryIp(clientIds: readonly string[] = [this.clientId]): Promise<Map<string, string[]>> {
    return this.measure('batch_query_ip', () => this.batchQueryIpNow(clientIds), noBytes);
  }

  private async batchQueryIpNow(clientIds: readonly string[]): Promise<Map<string, string[]>> {
    const res = await this.rpc('BatchQueryIp', () => this.m().batchQueryIp({ client_ids: [...clientIds] }));
    this.status(res.status_code, 'batchQueryIp');
    return new Map(Object.entries(res.client_ip_map).map(([k, v]) => [k, v.ip_addresses]));
  }

  /** Clears replicas of this client's objects (all, or only those on `segmentName`); returns the cleared keys. */
  batchReplicaClear(objectKeys: readonly string[], segmentName = '', clientId = this.clientId): Promise<string[]> {
    return this.measure('batch_replica_clear', () => this.batchReplicaClearNow(objectKeys, segmentName, clientId), noBytes);
  }

  private async batchReplicaClearNow(objectKeys: readonly string[], segmentName: string, clientId: string): Promise<string[]> {
    for (const k of objectKeys) checkKey(k, `batchReplicaClear of ${objectKeys.length} keys`);
    const res = await this.rpc('BatchReplicaClear', () => this.m().batchReplicaClear({ object_keys: [...objectKeys], client_id: clientId, segment_name: segmentName }));
    this.status(res.status_code, 'batchReplicaClear');
    return res.cleared_keys;
  }

  // ------------------------------------------------------------ copy and move tasks

  /** Queues a task giving `key` a replica on each segment of `targets` (docs/tiers.md "Copy and move tasks"); returns the task id. */
  createCopyTask(key: string, targets: readonly string[]): Promise<number> {
    return this.measure('create_copy_task', () => this.createCopyTaskNow(key, targets), noBytes);
  }

  private async createCopyTaskNow(key: string, targets: readonly string[]): Promise<number> {
    checkKey(key, 'createCopyTask');
    const res = await this.rpc('CreateCopyTask', () => this.m().createCopyTask({ key, targets: [...targets] }));
    this.status(res.status_code, `createCopyTask ${JSON.stringify(key)} to ${targets.join(', ')}`);
    return Number(res.task_id);
  }

  /** Queues a task moving `key`'s replica from segment `source` to segment `target`; returns the task id. */
  createMoveTask(key: string, source: string, target: string): Promise<number> {
    return this.measure('create_move_task', () => this.createMoveTaskNow(key, source, target), noBytes);
  }

  private async createMoveTaskNow(key: string, source: string, target: string): Promise<number> {
    checkKey(key, 'createMoveTask');
    const res = await this.rpc('CreateMoveTask', () => this.m().createMoveTask({ key, source, target }));
    this.status(res.status_code, `createMoveTask ${JSON.stringify(key)} from ${source} to ${target}`);
    return Number(res.task_id);
  }

  /** A task's state (tasks live in the master's memory: a new master knows none, TASK_NOT_FOUND). */
  queryTask(taskId: number): Promise<TaskInfo> {
    return this.measure('query_task', () => this.queryTaskNow(taskId), noBytes);
  }

  private async queryTaskNow(taskId: number): Promise<TaskInfo> {
    const { task, nowMs } = await this.queryTaskRaw(taskId);
    return taskInfoOf(task, nowMs, Date.now());
  }

  /** queryTask's reply as the master sent it (the dummy-client service forwards it): the task and the master's clock. */
  async queryTaskRaw(taskId: number): Promise<{ task: TaskInfo__Output; nowMs: number }> {
    if (!Number.isSafeInteger(taskId) || taskId <= 0) throw new InvalidParamsError(`queryTask: task id must be a positive integer, got ${String(taskId)}`);
    const res = await this.rpc('QueryTask', () => this.m().queryTask({ task_id: taskId }));
    this.status(res.status_code, `queryTask ${taskId}`);
    return { task: res.task!, nowMs: Number(res.now_ms) };
  }

  // ------------------------------------------------------------ segments

  /**
   * Mounts `region` as one more segment of this client (named `<engine endpoint>/<n>`, so with
   * P2PHANDSHAKE peers still find the engine from the name): registers it with the engine,
   * publishes it to the metadata service and mounts it with the master; from then on it is
   * remounted with the others after a master restart or a leader change. On success the client
   * owns the region (unmapped by releaseSegment() or close()); on failure nothing is left
   * registered, published or mounted, and the region is still the caller's. `memory: 'cxl'`
   * mounts it as CXL memory (a DAX device or a file standing in for one): the master's cxl
   * allocation strategy places there. `memory: 'ssd'` mounts it as an offload segment (a file on
   * this host's SSD, docs/tiers.md): the master places only DISK replicas there.
   */
  async addSegment(region: MappedRegion, opts: { memory?: 'dram' | 'cxl' | 'ssd'; fileOffset?: number } = {}): Promise<{ name: string; id: string }> {
    if (this.closing) throw new UnavailableError('addSegment: the client is closed');
    if (opts.memory !== undefined && opts.memory !== 'dram' && opts.memory !== 'cxl' && opts.memory !== 'ssd')
      throw new InvalidParamsError(`addSegment: memory must be 'dram', 'cxl' or 'ssd', got ${String(opts.memory)}`);
    const name = `${this.engine.endpoint}/${++this.extraSegments}`;
    const seg: OwnSegment = { name, id: randomUUID(), region, incarnation: this.engine.registerRegion(region.address, region.size, { serve: true }) };
    if (opts.memory === 'cxl' || opts.memory === 'ssd') seg.kind = opts.memory;
    // An SSD file region: copies write the file itself (offload-file-writer.ts says why).
    if (opts.memory === 'ssd' && region.kind === 'file' && region.fd >= 0) seg.file = { fd: region.fd, offset: opts.fileOffset ?? 0 };
    try {
      await this.mount(seg, false);
    } catch (e) {
      await this.undoMount(seg);
      throw e instanceof StoreError ? e : new UnavailableError(`mount of segment ${seg.name}: ${(e as Error).message}`, { cause: e });
    }
    if (this.closing) {
      // close() ran meanwhile and did not see this segment.
      await this.undoMount(seg);
      throw new UnavailableError('addSegment: the client was closed during the mount');
    }
    this.segments.set(seg.name, seg);
    return { name: seg.name, id: seg.id };
  }

  /**
   * Adds an SSD tier: a new sparse file of `size` bytes (a positive multiple of 4096) in `dir`,
   * mapped shared and mounted as an offload segment (addSegment with memory 'ssd'); the file is
   * unlinked once mapped. INVALID_PARAMS for a bad size or a directory that cannot hold the file.
   */
  async addOffloadFile(dir: string, size: number): Promise<{ name: string; id: string }> {
    if (!Number.isSafeInteger(size) || size <= 0 || size % 4096 !== 0)
      throw new InvalidParamsError(`addOffloadFile: the size must be a positive multiple of 4096 bytes, got ${size}`);
    let path: string;
    try {
      path = createOffloadFile(dir, size);
    } catch (e) {
      throw new InvalidParamsError(`addOffloadFile: offload file in ${dir}: ${(e as Error).message}`, { cause: e });
    }
    let region: MappedRegion;
    try {
      region = this.native.mapMemory({ kind: 'file', path, size, offset: 0, create: false });
    } finally {
      rmSync(path, { force: true });
    }
    try {
      return await this.addSegment(region, { memory: 'ssd', fileOffset: 0 });
    } catch (e) {
      region.release(); // addSegment left it to us
      throw e;
    }
  }

  /** Best effort: unmount (the master may have taken a mount whose answer was lost), unpublish, unregister. */
  private async undoMount(seg: OwnSegment): Promise<void> {
    await this.master?.unmountSegment({ segment_name: seg.name, client_id: this.clientId, grace_period_seconds: 0 }).catch(() => undefined);
    await this.metadata.remove(seg.name).catch(() => undefined);
    await this.engine.unregisterRegion(seg.region.address).catch(() => undefined); // a closed engine has nothing registered
  }

  private segmentById(id: string): OwnSegment {
    for (const seg of this.segments.values()) if (seg.id === id) return seg;
    throw new InvalidParamsError(`no segment with id ${id} is held by this client`);
  }

  /**
   * Unmounts a segment with the master: `graceSeconds` 0 at once; > 0 the master keeps it
   * readable but closed to new allocations for that long, then unmounts it. The memory stays
   * registered and mapped (reads granted before the unmount may still run) until
   * releaseSegment(); the segment is no longer remounted after a master restart.
   */
  async unmountSegment(id: string, graceSeconds = 0): Promise<void> {
    if (!Number.isFinite(graceSeconds) || graceSeconds < 0) throw new InvalidParamsError(`unmountSegment: grace period must be >= 0 seconds, got ${graceSeconds}`);
    const seg = this.segmentById(id);
    if (this.unmounting.get(seg) === 'unmounted') return;
    const previous = this.unmounting.get(seg);
    this.unmounting.set(seg, graceSeconds > 0 ? 'draining' : 'unmounted');
    let res;
    try {
      // The master counts whole seconds; rounding up keeps the segment readable at least as asked.
      res = await this.rpc('UnmountSegment', () => this.m().unmountSegment({ segment_name: seg.name, client_id: this.clientId, grace_period_seconds: Math.ceil(graceSeconds) }));
    } catch (e) {
      if (previous) this.unmounting.set(seg, previous);
      else this.unmounting.delete(seg);
      throw e;
    }
    // SEGMENT_NOT_FOUND: a restarted master never knew it, or a grace period already ran out.
    if (res.status_code !== ErrorCode.OK && res.status_code !== ErrorCode.SEGMENT_NOT_FOUND) {
      if (previous) this.unmounting.set(seg, previous);
      else this.unmounting.delete(seg);
      throw StoreError.fromCode(res.status_code, `unmount of segment ${seg.name}`);
    }
  }

  /**
   * Gives a segment's memory back: unmounts it with the master at once unless that was done,
   * unpublishes it, unregisters it from the engine (waiting for TCP chunks in flight on it) and
   * unmaps it. Reads still running on it fail with a TransferError, never with other bytes.
   */
  async releaseSegment(id: string): Promise<void> {
    const seg = this.segmentById(id);
    if (this.unmounting.get(seg) !== 'unmounted') await this.unmountSegment(id, 0);
    this.segments.delete(seg.name);
    this.unmounting.delete(seg);
    await this.metadata.remove(seg.name).catch((e) => this.log('warn', `unpublish of ${seg.name} failed: ${(e as Error).message}`));
    await this.offloadFiles.settled(seg.name); // a copy's write still on the file's descriptor
    this.offloadFiles.release(seg.name); // its O_DIRECT descriptor would keep the unlinked file's blocks
    await this.unmapRegion(seg.region);
  }

  // ------------------------------------------------------------ lifecycle

  /** Unmounts this client's segments, unpublishes them, stops the heartbeat and frees everything. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.stopSummary?.();
    this.stopLeaderWatch?.();
    await this.heartbeat?.stop();
    await this.copier?.drain(); // a copy may be writing into memory about to be unmounted
    await this.files?.drain(); // staged values still go to their files
    await this.unmountAll(this.segments.values());
    await this.release();
  }

  /** Unmounts `segs` from the master and unpublishes them; failures are logged, not thrown. */
  private async unmountAll(segs: Iterable<OwnSegment>): Promise<void> {
    for (const seg of segs) {
      if (this.master) {
        try {
          const res = await this.master.unmountSegment({ segment_name: seg.name, client_id: this.clientId });
          if (res.status_code !== ErrorCode.OK && res.status_code !== ErrorCode.SEGMENT_NOT_FOUND) {
            this.log('warn', `unmount of ${seg.name} refused: ${StoreError.fromCode(res.status_code, 'unmount').message}`);
          }
        } catch (e) {
          this.log('warn', `unmount of ${seg.name} failed: ${(e as Error).message}`);
        }
      }
      await this.metadata.remove(seg.name).catch((e) => this.log('warn', `unpublish of ${seg.name} failed: ${(e as Error).message}`));
    }
  }

  /** Frees local resources (no master calls). */
  private async release(): Promise<void> {
    this.closing = true;
    this.stopSummary?.();
    this.stopLeaderWatch?.();
    await this.heartbeat?.stop();
    this.pool?.close();
    this.master?.close();
    this.engine.close();
    this.offloadFiles.close(); // O_DIRECT descriptors of SSD files (copies were drained by close())
    for (const seg of this.segments.values()) seg.region.release();
    this.segments.clear();
    this.localRegion?.release();
    this.localRegion = undefined;
    this.resultArena?.close(); // results the caller still holds stay valid
    this.resultArena = undefined;
    this.hotCache = undefined;
    this.hotRegion?.release(); // values handed out were copies
    this.hotRegion = undefined;
    await this.metadata.close().catch(() => {});
  }
}
