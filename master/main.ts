#!/usr/bin/env node
// store_master: parses flags, builds the MasterCore and serves it: gRPC and the fast channel on
// --rpc_port, management HTTP on --metrics_port, optionally the HTTP metadata server; a periodic
// sweep drives leases, client liveness and eviction. With --enable_snapshot_restore the core starts
// from the snapshots and change log in STORE_SNAPSHOT_LOCAL_PATH; with --enable_snapshot it writes
// them (master/state/persistence.ts). SIGINT/SIGTERM close cleanly.
import { joinHostPort } from '../common/host-port.js';
import { clockWith } from '../common/clock.js';
import { randomInt } from 'node:crypto';
import client from 'prom-client';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { FlagError, HelpRequested } from '../common/flags.js';
import { peerOf, RefusalLog, serverAuthSetting, UNAUTHENTICATED_WARNING, type AuthSetting } from '../common/cluster-secret.js';
import { loggerFromFlags, type Logger } from '../common/logger.js';
import { masterMethodByName, masterMethods } from '../common/master-proto.js';
import { CopierPush } from './copier-push.js';
import { MasterCore } from './core/master-core.js';
import type { MasterCorePort } from './core-port.js';
import { createGrpcServer } from './grpc-service.js';
import { HaMaster } from './ha/ha-master.js';
import { createAdminServer, summary, type AdminDeps } from './http-admin.js';
import { deleteDoomedFiles, loadFileTier, openFileTierDir, scanFileTier } from './file-tier-dir.js';
import { FileIndex } from './core/file-index.js';
import { MasterMetrics } from './master-metrics.js';
import { parseMasterFlags, type MasterFlags } from './master-flags.js';
import { coreConfigFromFlags, effectiveMaxConnections, openFilesLimit, resolveRpcAddress, unbuiltFeatureNotices } from './master-startup.js';
import { createMetadataServer, MetadataStore } from './metadata-server.js';
import { RescanHold } from './rescan-hold.js';
import { RpcDispatcher } from './rpc-dispatcher.js';
import { RpcListener } from './rpc-listener.js';
import { HeapGuard } from './heap-guard.js';
import { Sweeper } from './sweeper.js';
import { loadServerTls, TlsConfigError, type TlsMaterial } from '../common/tls-material.js';
import { TlsReloader } from '../common/tls-reloader.js';
import { httpOverTls, type TlsTerminator } from '../common/tls-server.js';
import type { Server as NetServer } from 'node:net';
import { ChangeFanout } from './state/change-fanout.js';
import { CommitBarrier } from './state/commit-barrier.js';
import { Persistence } from './state/persistence.js';
import { REPLICATION_MAGIC, ReplicationLeader } from './state/replication-leader.js';
import { ReplicationFollower } from './state/replication-follower.js';

const SWEEP_INTERVAL_MS = 200;
const REPORT_INTERVAL_MS = 10_000;
const SHUTDOWN_GRACE_MS = 2000;

function exitWithFlagError(e: FlagError): never {
  process.stderr.write(`store_master: ${e.message}\n`);
  process.exit(2);
}

/** Listens; later errors (a failed accept) are logged, never thrown. */
function listen(server: Server | NetServer, port: number, host: string, log: Logger): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.removeListener('error', reject);
      server.on('error', (e) => log.warn(`HTTP server on port ${port}: ${e.message}`));
      const a = server.address();
      resolve(typeof a === 'object' && a ? a.port : port);
    });
  });
}

async function main(): Promise<void> {
  let flags: MasterFlags;
  let explicit: Set<string>;
  let host: string;
  let log: Logger;
  let tls: TlsMaterial | undefined;
  try {
    const r = parseMasterFlags(process.argv.slice(2));
    flags = r.flags;
    tls = loadServerTls({ cert: flags.tls_cert, key: flags.tls_key, ca: flags.tls_ca });
    explicit = r.parsed.explicit;
    host = resolveRpcAddress(flags);
    log = loggerFromFlags('store_master', flags as unknown as Record<string, string | number | boolean>);
  } catch (e) {
    if (e instanceof HelpRequested) {
      process.stdout.write(e.usage);
      process.exit(0);
    }
    if (e instanceof FlagError) exitWithFlagError(e);
    if (e instanceof TlsConfigError) {
      process.stderr.write(`store_master: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }

  let auth: AuthSetting;
  try {
    auth = serverAuthSetting(flags.cluster_secret_file, flags.allow_unauthenticated);
  } catch (e) {
    process.stderr.write(`store_master: ${(e as Error).message}\n`);
    process.exit(2);
  }
  log.info(`store_master starting (pid ${process.pid})`);
  if (auth.allowUnauthenticated) log.warn(UNAUTHENTICATED_WARNING);
  const secret = auth.secret;
  if (explicit.has('rpc_thread_num')) {
    log.info(`--rpc_thread_num=${flags.rpc_thread_num}: accepted; this master serves every RPC on one event-loop thread, so the value has no other effect`);
  }
  for (const line of unbuiltFeatureNotices(flags, explicit)) log.warn(line);

  // Whole ms: the core keeps times in its objects as small integers (see object-meta.ts).
  const clock = (): number => Math.floor(performance.now());
  const viewVersion = Date.now();
  // Each core gets a random key-hash seed: clients cannot choose keys that collide in its object table.
  const heap = new HeapGuard(log);
  // The file tier (docs/tiers.md "File tier"): its directory must be usable (else exit 2), and a
  // single master serves only once its index is rebuilt from the directory. Under HA every new
  // leader rescans (the index is not part of the replicated state): the directory is the truth.
  let fileDir = '';
  let files: FileIndex | undefined;
  if (flags.root_fs_dir !== '') {
    try {
      fileDir = await openFileTierDir(flags.root_fs_dir, flags.cluster_id);
      if (!flags.enable_ha) files = await loadFileTier(fileDir, flags.global_file_segment_size, log);
    } catch (e) {
      process.stderr.write(`store_master: ${(e as Error).message}\n`);
      process.exit(2);
    }
  }
  /**
   * The index of a new leader's core: empty, filled by a scan in the background. Meanwhile reads
   * of keys it cannot tell about yet are held until the scan ends (master/rescan-hold.ts).
   */
  const rescanHold = new RescanHold();
  const leaderFiles = (): FileIndex | undefined => {
    if (fileDir === '') return undefined;
    const idx = new FileIndex(fileDir, flags.global_file_segment_size);
    deleteDoomedFiles(fileDir, idx, log);
    idx.scanning = true;
    const scan = scanFileTier(fileDir, idx, log)
      .then(
        (r) => log.info(`HA: file tier ${fileDir} rescanned as leader: ${r.files} objects, ${r.bytes} B${r.bad ? `, ${r.bad} bad files left out` : ''}`),
        (e: Error) => log.error(`HA: rescanning the file tier ${fileDir} failed: ${e.message}`),
      )
      .finally(() => (idx.scanning = false));
    rescanHold.begin(scan);
    return idx;
  };
  // Copy notices on the channel (docs/master-channel.md "Notices"): every core, each HA term's too, tells through it.
  const copierPush = new CopierPush(masterMethodByName.get('Ping')!.index);
  const makeCore = (version: number, fileIndex = files): MasterCore => {
    const c = new MasterCore(coreConfigFromFlags(flags, version), undefined, randomInt(2 ** 31), heap.state, fileIndex);
    c.setCopierNotify(copierPush.notify);
    return c;
  };
  let core: MasterCore;
  try {
    core = makeCore(viewVersion);
  } catch (e) {
    process.stderr.write(`store_master: ${(e as Error).message}\n`);
    process.exit(2);
  }
  // HA: the transports reach the core through the leader gate; a new core per term, holding the
  // state this master followed as a standby (docs/ha.md "Standbys").
  let ha: HaMaster | undefined;
  const fanout = new ChangeFanout(clock);
  let follower: ReplicationFollower | undefined;
  let replication: ReplicationLeader | undefined;
  let leading: MasterCore | undefined;
  const makeLeaderCore = (v: number): MasterCore => {
    const c = makeCore(v, leaderFiles());
    const image = follower?.stop();
    if (image) {
      const now = clock();
      const r = c.importState(image.toState(now), now);
      log.info(
        `HA: took over the followed state: ${r.segments} segments (RESTORED until their owners mount them again), ${r.objects} objects${r.dropped.length ? `; left out ${r.dropped.length} records` : ''}`,
      );
    } else if (follower) {
      log.warn("HA: elected without a complete copy of the previous leader's state: starting empty");
    }
    c.setChangeSink(fanout);
    leading = c;
    return c;
  };
  try {
    if (flags.enable_ha) {
      ha = new HaMaster({
        flags,
        bindHost: host,
        env: process.env,
        methods: masterMethods,
        makeCore: (v) => makeLeaderCore(v),
        clock,
        log,
        roleChanged: (lead) => {
          if (lead) return;
          leading = undefined;
          replication?.closeAll();
          follower?.start();
        },
        // Which image may be elected, and when a term may serve (docs/ha.md "Which image may be elected").
        standby: { position: () => follower?.position(), discard: () => follower?.discard() },
        beforeServing: (v) => replication!.beginTerm(v),
      });
      const h = ha;
      follower = new ReplicationFollower({ leader: () => h.knownLeader, self: () => h.advertisedAddress, clock, log, ended: () => h.streamEnded(), secret });
      replication = new ReplicationLeader({
        source: () => (h.gate.leading ? leading : undefined),
        seq: () => fanout.seq,
        viewVersion: () => h.gate.viewVersion,
        commitAcks: flags.ha_commit_acks,
        clock,
        log,
        publishInSync: (r) => h.recordInSync(r),
      });
      fanout.add(replication);
    }
  } catch (e) {
    process.stderr.write(`store_master: ${(e as Error).message}\n`);
    process.exit(2);
  }
  const port = ha ? ha.gate.port : (core as unknown as MasterCorePort);
  const metrics = new MasterMetrics(masterMethods, () => port.stats(clock()));
  ha?.registerMetrics(metrics.registry);
  if (replication && follower) {
    const r = replication;
    const f = follower;
    new client.Gauge({
      name: 'store_master_standbys_synced',
      help: 'standbys following this leader with the whole state',
      registers: [metrics.registry],
      collect() {
        this.set(r.syncedCount);
      },
    });
    new client.Gauge({
      name: 'store_master_standby_synced',
      help: '1 while this standby holds the whole state of the leader it follows',
      registers: [metrics.registry],
      collect() {
        this.set(f.synced ? 1 : 0);
      },
    });
  }
  // Snapshots and the change log of a single master (with HA: a notice, master-startup.ts).
  let persistence: Persistence | undefined;
  let barrier: CommitBarrier | undefined;
  if (ha && replication) {
    barrier = new CommitBarrier(
      fanout,
      masterMethods.map((m) => m.name),
    );
    barrier.add(replication);
  }
  if (!ha && (flags.enable_snapshot || flags.enable_snapshot_restore)) {
    const commits = new CommitBarrier(
      fanout,
      masterMethods.map((m) => m.name),
    );
    try {
      const dir = process.env.STORE_SNAPSHOT_LOCAL_PATH!; // checked by validateMasterFlags
      persistence = await Persistence.open({ flags, dir, log, clock, viewVersion, registry: metrics.registry }, core, fanout, commits);
    } catch (e) {
      log.error(`snapshots: ${(e as Error).message}`);
      process.stderr.write(`store_master: snapshots: ${(e as Error).message}\n`);
      log.close();
      process.exit(1);
    }
    if (flags.enable_snapshot) barrier = commits;
  }
  const disabled = new Set(flags.enable_remove_all ? [] : ['RemoveAll']);
  if (!flags.enable_remove_all) log.info('RemoveAll is disabled (--enable_remove_all=false): answered NOT_IMPLEMENTED');
  // Only a new HA leader rescans while it serves (a single master scans before it serves).
  const hold = ha && fileDir !== '' ? rescanHold : undefined;
  if (hold) metrics.watchHeld(() => hold.held);
  const dispatcher = new RpcDispatcher(ha ? ha.gate.rpcTarget : core, masterMethods, clock, metrics, log, disabled, barrier, hold);
  const refusals = new RefusalLog((line) => log.warn(line));
  const { injector } = createGrpcServer(
    dispatcher,
    secret && {
      secret,
      refused: (peer, why) => {
        metrics.authRefused('master-grpc');
        refusals.note(peer, `gRPC call from ${peer} refused: ${why}`);
      },
    },
  );
  let limits = '';
  try {
    limits = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    // not Linux: the flag is used as it is
  }
  const maxConnections = effectiveMaxConnections(flags.rpc_max_connections, openFilesLimit(limits));
  if (maxConnections.notice) log.warn(maxConnections.notice);
  const rpc = new RpcListener(
    {
      host,
      port: flags.rpc_port,
      noDelay: flags.rpc_enable_tcp_no_delay,
      idleTimeoutMs: flags.rpc_conn_timeout_seconds,
      maxConnections: maxConnections.max,
      requestTimeoutMs: flags.rpc_request_timeout_seconds,
      maxBufferedRequestBytes: flags.rpc_max_buffered_request_bytes,
      replication: replication ? { magic: REPLICATION_MAGIC, accept: (socket, rest) => replication.accept(socket, rest) } : undefined,
      secret,
      authRefused: metrics.authRefused,
      tls,
      copierPush,
    },
    injector,
    masterMethods,
    dispatcher,
    log,
    metrics.connectionEvents,
  );
  metrics.watchConnections(() => ({ connections: rpc.connections, bufferedRequestBytes: rpc.bufferedRequestBytes }));
  const startedAt = Date.now();
  const deps: AdminDeps = {
    core: port,
    metrics,
    now: clock,
    info: () => ({
      uptime_seconds: Math.round((Date.now() - startedAt) / 1000),
      view_version: ha ? ha.gate.viewVersion : viewVersion,
      rpc_connections: rpc.connections,
      ...ha?.info(),
    }),
  };
  const admin = createAdminServer(deps);
  // With --tls_cert the HTTP servers are reached through a TLS listener (common/tls-server.ts).
  const terminators: TlsTerminator[] = [];
  const listener = (http: Server, what: string): Server | NetServer => {
    if (!tls) return http;
    const t = httpOverTls(http, tls, what, log);
    terminators.push(t.terminator);
    return t.server;
  };
  const adminListener = listener(admin, 'the master management HTTP');
  let metadata: Server | undefined;
  let metadataListener: Server | NetServer | undefined;

  let rpcPort: number;
  let metricsPort: number;
  let metadataPort = 0;
  try {
    rpcPort = await rpc.listen();
    metricsPort = await listen(adminListener, flags.metrics_port, host, log);
    if (flags.enable_http_metadata_server) {
      metadata = createMetadataServer(
        new MetadataStore(),
        secret && {
          secret,
          refused: (req, why) => {
            metrics.authRefused('metadata-http');
            const peer = peerOf(req.socket);
            refusals.note(peer, `metadata ${req.method} from ${peer} refused: ${why}`);
          },
        },
      );
      metadataListener = listener(metadata, 'the metadata server');
      metadataPort = await listen(metadataListener, flags.http_metadata_server_port, flags.http_metadata_server_host, log);
    }
  } catch (e) {
    log.error(`cannot listen: ${(e as Error).message}`); // on stderr too (the logger copies errors): once
    process.exit(1);
  }

  const sweeper = new Sweeper(port, clockWith(clock), log, SWEEP_INTERVAL_MS);
  sweeper.start();
  heap.start();
  let tlsReloader: TlsReloader | undefined;
  if (tls) {
    tlsReloader = new TlsReloader({
      paths: { cert: flags.tls_cert, key: flags.tls_key, ca: flags.tls_ca },
      current: tls,
      apply: (m) => {
        rpc.reloadTls(m);
        for (const t of terminators) t.reload(m);
      },
      clock: clockWith(clock),
      log,
    });
    tlsReloader.start();
  }
  ha?.start(rpcPort);
  follower?.start();
  let reporter: NodeJS.Timeout | undefined;
  if (flags.enable_metric_reporting) {
    reporter = setInterval(() => {
      summary(deps)
        .then((text) =>
          log.info(
            'metrics: ' +
              text
                .trim()
                .split('\n')
                .slice(1)
                .filter((l) => !l.startsWith('  '))
                .join(' | '),
          ),
        )
        .catch((e: Error) => log.warn(`metric report failed: ${e.message}`));
    }, REPORT_INTERVAL_MS);
    reporter.unref();
  }

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal} received: shutting down`);
    sweeper.stop();
    heap.stop();
    tlsReloader?.stop();
    if (reporter) clearInterval(reporter);
    // The change log closes (synced) once no RPC can change the state any more.
    const rpcClosed = rpc.close(SHUTDOWN_GRACE_MS).then(() => persistence?.close().catch((e: Error) => log.error(`snapshots: closing: ${e.message}`)));
    const closing: Promise<unknown>[] = [rpcClosed, new Promise((r) => adminListener.close(r))];
    follower?.stop();
    replication?.closeAll();
    if (ha) closing.push(ha.stop()); // step down and release the leader record for a fast takeover
    if (metadataListener) closing.push(new Promise((r) => metadataListener?.close(r)));
    admin.closeAllConnections();
    metadata?.closeAllConnections();
    // allSettled: a part that fails to close is not a reason to skip the exit
    void Promise.allSettled(closing).then(() => {
      log.info('store_master stopped');
      log.close();
      process.exit(0);
    });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  const ready = [`rpc=${joinHostPort(host, rpcPort)}`, `metrics=${joinHostPort(host, metricsPort)}`];
  if (metadata) ready.push(`metadata=${tls ? 'https' : 'http'}://${joinHostPort(flags.http_metadata_server_host, metadataPort)}/metadata`);
  if (tls) ready.push(`tls=${tls.ca ? 'mtls' : 'on'}`);
  log.info(`store_master listening: ${ready.join(' ')} view_version=${viewVersion}`);
  if (flags.log_dir && !flags.logtostderr) process.stderr.write(`store_master listening: ${ready.join(' ')}\n`);
}

main().catch((e: Error) => {
  process.stderr.write(`store_master: fatal: ${e.stack ?? e.message}\n`);
  process.exit(1);
});
