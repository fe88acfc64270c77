#!/usr/bin/env node
// store_service: the standalone store service. A real client that contributes its global segment
// to the cluster (no Get/Put traffic of its own unless given a local buffer), with an HTTP server
// for /health, /segments, /metrics and the REST mount API (sidecar/rest-api.ts). Prints one
// "store_service ready ..." line when mounted; on SIGTERM/SIGINT it unmounts every segment with
// --shutdown_grace_seconds (sidecar/segment-mounts.ts), unpublishes them and exits 0. Bad flags exit 2.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import promClient from 'prom-client';
import { FlagError, HelpRequested } from '../common/flags.js';
import { peerOf, RefusalLog, SECRET_ENV, serverAuthSetting, UNAUTHENTICATED_WARNING, type AuthSetting } from '../common/cluster-secret.js';
import { loggerFromFlags, type Logger } from '../common/logger.js';
import { randomUUID } from 'node:crypto';
import { Client } from '../client/client.js';
import { loadNative } from '../client/native-port.js';
import { allowedPeerUids } from '../common/peer-uids.js';
import { ClientService } from './client-service.js';
import { ClientServiceServer } from './client-service-server.js';
import { removeIfOrphaned, sweepOrphanRegions } from './orphan-regions.js';
import { StoreError } from '../client/errors.js';
import { loopbackHostNotice, parseStoreServiceArgs, type StoreServiceConfig } from './store-service-flags.js';
import { MALFORMED_TARGET, requestUrl } from '../common/request-url.js';
import { handleRestRequest } from './rest-api.js';
import { SegmentMounts } from './segment-mounts.js';
import { PAGE_SIZE } from './mount-request.js';
import { realClock } from '../common/clock.js';
import { loadServerTls, TlsConfigError, type TlsMaterial } from '../common/tls-material.js';
import { TlsReloader } from '../common/tls-reloader.js';
import { httpOverTls, type TlsTerminator } from '../common/tls-server.js';
import type { Server as NetServer } from 'node:net';

/** Largest value the dummy-client service carries inside a message (inline Put value, Get reply). */
const MAX_INLINE_BYTES = 16 * 1024 * 1024;

function listen(server: Server | NetServer, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.removeListener('error', reject);
      resolve((server.address() as { port: number }).port);
    });
  });
}

async function main(): Promise<void> {
  let cfg: StoreServiceConfig;
  let tls: TlsMaterial | undefined;
  try {
    cfg = parseStoreServiceArgs(process.argv.slice(2));
    tls = loadServerTls(cfg.tls);
  } catch (e) {
    if (e instanceof HelpRequested) {
      process.stdout.write(e.usage);
      process.exit(0);
    }
    if (e instanceof FlagError || e instanceof TlsConfigError) {
      process.stderr.write(`store_service: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  // Handlers go in before anything announces readiness: a parent that reads the ready line (on
  // stdout, or the same line logged to stderr) may send SIGTERM at once, and with no handler yet
  // the default action would kill us with the segment still mounted. A signal during setup aborts
  // it (setup stops retrying and unmounts whatever it had mounted) and we exit 0.
  let onSignal: ((signal: string) => void) | undefined;
  let earlySignal: string | undefined;
  const setupAbort = new AbortController();
  const signalled = (signal: string): void => {
    if (onSignal) return onSignal(signal);
    earlySignal ??= signal;
    setupAbort.abort(new Error(`${signal} received`));
  };
  process.on('SIGTERM', () => signalled('SIGTERM'));
  process.on('SIGINT', () => signalled('SIGINT'));

  let auth: AuthSetting;
  try {
    auth = serverAuthSetting(cfg.values.cluster_secret_file as string, cfg.values.allow_unauthenticated as boolean);
  } catch (e) {
    process.stderr.write(`store_service: ${(e as Error).message}\n`);
    process.exit(2);
  }
  const secretFile = (cfg.values.cluster_secret_file as string) || process.env[SECRET_ENV] || '';

  let log: Logger;
  try {
    log = loggerFromFlags('store_service', cfg.values);
  } catch (e) {
    if (e instanceof FlagError) {
      process.stderr.write(`store_service: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }

  if (auth.allowUnauthenticated) log.warn(UNAUTHENTICATED_WARNING);
  // Registered with the client's metrics once there are some (MC_STORE_CLIENT_METRIC).
  const authRefused = new promClient.Counter({
    name: 'store_service_auth_refused_total',
    help: 'peers refused for want of the cluster secret, by interface: dummy-client, dummy-client-grpc, rest-api',
    labelNames: ['interface'],
    registers: [],
  });
  const countRefusal = (iface: string): void => authRefused.labels(iface).inc();

  // The HTTP listener is bound before setup, so a bad --host or a taken --port fails with nothing
  // mounted. Until setup is done it answers 503 STARTING (not ready).
  const http = createServer();
  const starting = (_req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(503, { 'content-type': 'text/plain' }).end('STARTING');
  };
  http.on('request', starting);
  // With --tls_cert the HTTP server is reached through a TLS listener (common/tls-server.ts).
  let httpTls: TlsTerminator | undefined;
  let httpListener: Server | NetServer = http;
  if (tls) ({ server: httpListener, terminator: httpTls } = httpOverTls(http, tls, 'the store service HTTP', log));
  let httpPort: number;
  try {
    httpPort = await listen(httpListener, cfg.port, cfg.host);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    // The port is at fault when it is taken or privileged; anything else (unresolvable name,
    // address not on this machine) is the host's.
    const flag = err.code === 'EADDRINUSE' || err.code === 'EACCES' ? '--port' : '--host';
    const msg = `${flag}: cannot listen on ${cfg.host}:${cfg.port}: ${err.message}`;
    log.error(msg); // errors reach stderr through the logger (glog copies them): once
    log.close();
    process.exit(2);
  }

  // The dummy-client service is bound before setup too (a taken --rpc_port exits 2 with nothing
  // mounted); until setup is done its calls are answered UNAVAILABLE_IN_CURRENT_STATUS.
  let client: Client | undefined;
  const native = await loadNative();
  const peerUids = allowedPeerUids(process.geteuid?.() ?? 0, cfg.peerUids);
  const dummies = new ClientServiceServer(
    {
      shmDir: cfg.shmDir,
      removeIfOrphaned: (p) =>
        removeIfOrphaned(
          p,
          (q) => native.unlinkIfUnlocked(q),
          (q) => log.info(`deleted ${q}: its dummy client died`),
        ),
      mapMemory: (o) => native.mapMemory(o),
      attachRegion: (r) => client!.attachRegion(r),
      detachRegion: (r) => client!.detachRegion(r),
    },
    {
      host: cfg.host,
      port: cfg.rpcPort,
      shmDir: cfg.shmDir,
      log,
      peerUids,
      peerCredentials: (s) => native.socketPeerCredentials(s),
      secret: auth.secret,
      authRefused: countRefusal,
      tls,
    },
  );
  const tlsReloader = tls
    ? new TlsReloader({
        paths: cfg.tls,
        current: tls,
        apply: (m) => {
          httpTls?.reload(m);
          dummies.reloadTls(m);
        },
        clock: realClock,
        log,
      })
    : undefined;
  tlsReloader?.start();
  let rpc: { port: number; socketPath: string };
  try {
    rpc = await dummies.listen();
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const flag = err.code === 'EADDRINUSE' || err.code === 'EACCES' ? '--rpc_port' : err.message.includes('.sock') ? '--shm_dir' : '--host';
    const msg = `${flag}: cannot listen for dummy clients on ${cfg.host}:${cfg.rpcPort}${cfg.shmDir ? ` and in ${cfg.shmDir}` : ''}: ${err.message}`;
    log.error(msg); // errors reach stderr through the logger (glog copies them): once
    log.close();
    process.exit(2);
  }

  if (cfg.shmDir) {
    const orphans = sweepOrphanRegions(cfg.shmDir, (p) => native.unlinkIfUnlocked(p));
    if (orphans.length > 0) log.info(`deleted ${orphans.length} region file(s) of dummy clients that died: ${orphans.slice(0, 5).join(', ')}${orphans.length > 5 ? ', ...' : ''}`);
  }
  const loopback = loopbackHostNotice(cfg.client.local_hostname ?? '', cfg.client.master_server_address ?? '');
  if (loopback) log.warn(loopback);
  log.info(`dummy clients: --rpc_port=${rpc.port} (KVD1 channel and gRPC on ${cfg.host})${rpc.socketPath ? `, Unix socket ${rpc.socketPath}` : ''}`);

  try {
    client = await Client.setup(cfg.client, {
      engine: {
        ...(cfg.threads !== undefined ? { connectionsPerPeer: cfg.threads } : {}),
        // The same uids receive segment fds over the engine's same-host socket (plus MC_STORE_SHM_PEER_UIDS).
        shmPeerUids: allowedPeerUids(process.geteuid?.() ?? 0, cfg.shmPeerUids),
      },
      prefaultSegment: cfg.values.prefault_segment as boolean,
      segmentsLater: cfg.cxl !== undefined || cfg.offload !== undefined,
      log: (level, msg) => (level === 'error' ? log.error(msg) : level === 'warn' ? log.warn(msg) : log.info(msg)),
      signal: setupAbort.signal,
      ...(auth.secret ? { clusterSecretFile: secretFile } : {}),
    });
  } catch (e) {
    await dummies.close().catch(() => {});
    if (setupAbort.signal.aborted) {
      log.info(`${earlySignal} received during setup: ${(e as Error).message}; store_service stopped`);
      log.close();
      http.closeAllConnections();
      tlsReloader?.stop();
      httpListener.close(() => process.exit(0));
      return;
    }
    const code = e instanceof StoreError ? ` (${e.codeName})` : '';
    log.error(`setup failed${code}: ${(e as Error).message}`); // on stderr too (the logger copies errors)
    process.exit(e instanceof StoreError && (e.code === -100 || e.code === -3) ? 2 : 1);
  }

  const real = client;
  dummies.serve(new ClientService(real, { instanceId: randomUUID(), maxInlineBytes: MAX_INLINE_BYTES, shmDir: cfg.shmDir }));

  let stopping = false;
  const huge = real.settings.hugepage;
  const mounts = new SegmentMounts({
    owner: real,
    mapMemory: (o) => native.mapMemory(o),
    maxSegmentSize: cfg.maxSegmentSize,
    leaseTtlMs: cfg.leaseTtlMs,
    alignment: huge ? (real.settings.hugepageSize === '1GB' ? 1024 ** 3 : 2 * 1024 ** 2) : PAGE_SIZE,
    hugepage: huge ? { size: real.settings.hugepageSize } : undefined,
    log: (level, msg) => (level === 'error' ? log.error(msg) : level === 'warn' ? log.warn(msg) : log.info(msg)),
  });
  if (cfg.cxl) {
    try {
      const ids = await mounts.mountCxl(cfg.cxl.path, cfg.cxl.size);
      log.info(`CXL memory ${cfg.cxl.path}: ${cfg.cxl.size} bytes mounted as ${ids.length} segment(s)`);
    } catch (e) {
      // a device or file that cannot be used is a setting to fix: exit 2, as for a bad flag
      log.error(`--cxl_path: ${(e as Error).message}`);
      await dummies.close().catch(() => {});
      await real.close().catch(() => {});
      log.close();
      process.exit(2);
    }
  }
  if (cfg.offload) {
    try {
      const ids = await mounts.mountSsd(cfg.offload.dir, cfg.offload.size);
      log.info(`SSD tier: ${cfg.offload.size} bytes in ${cfg.offload.dir} mounted as ${ids.length} offload segment(s)`);
    } catch (e) {
      // a directory that cannot hold the file is a setting to fix: exit 2, as for a bad flag
      log.error(`--offload_dir: ${(e as Error).message}`);
      await dummies.close().catch(() => {});
      await real.close().catch(() => {});
      log.close();
      process.exit(2);
    }
  }
  if (real.metrics) {
    promClient.collectDefaultMetrics({ register: real.metrics.registry });
    real.metrics.registry.registerMetric(authRefused);
    real.metrics.addGauge('store_dummy_clients_connected', 'dummy clients connected to this real client (KVD1 channel connections)', () => dummies.stats().connections);
    real.metrics.addGauge('store_dummy_regions_mapped', "dummy clients' shared regions mapped by this real client", () => dummies.stats().regions);
    real.metrics.addGauge('store_dummy_region_bytes_mapped', "bytes of dummy clients' shared regions mapped by this real client", () => dummies.stats().regionBytes);
  }
  const restRefusals = new RefusalLog((line) => log.warn(line));
  const rest = {
    mounts,
    protocol: real.settings.protocol,
    metrics: real.metrics,
    stopping: () => stopping,
    auth: auth.secret && {
      secret: auth.secret,
      refused: (req: IncomingMessage, why: string) => {
        countRefusal('rest-api');
        const peer = peerOf(req.socket);
        restRefusals.note(peer, `REST ${req.method} ${req.url} from ${peer} refused: ${why}`);
      },
    },
  };
  http.removeListener('request', starting);
  http.on('request', (req, res) => {
    const url = requestUrl(req);
    if (url === null) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(MALFORMED_TARGET);
    } else if (req.method === 'GET' && url.pathname === '/health') {
      res.writeHead(stopping ? 503 : 200, { 'content-type': 'text/plain' }).end(stopping ? 'STOPPING' : 'OK');
    } else if (req.method === 'GET' && url.pathname === '/segments') {
      const segments = real.mountedSegments.map((seg) => ({ ...seg, origin: mounts.describe(seg.id)?.origin ?? 'global', location: mounts.describe(seg.id)?.location ?? '' }));
      res
        .writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
        .end(JSON.stringify({ client_id: real.clientId, te_endpoint: real.endpoint, segments, dummy_clients: dummies.stats() }));
    } else if (!handleRestRequest(req, res, url.pathname, rest)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`no route ${req.method} ${url.pathname}`);
    }
  });

  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    const grace = cfg.shutdownGraceSeconds;
    log.info(`${signal} received: unmounting ${grace > 0 ? `with a ${grace} s grace period (+ ${cfg.leaseTtlMs} ms read lease)` : 'at once'} and stopping`);
    // Dummy clients are served through the grace period (their reads end before the memory goes).
    mounts
      .shutdown(grace)
      .catch((e: Error) => log.error(`graceful unmount failed: ${e.message}`))
      .then(() => dummies.close())
      .then(() => real.close())
      .catch((e: Error) => log.error(`close failed: ${e.message}`))
      .finally(() => {
        tlsReloader?.stop();
        http.closeAllConnections();
        httpListener.close(() => {
          log.info('store_service stopped');
          log.close();
          process.exit(0);
        });
      });
  };
  onSignal = stop;
  if (earlySignal) {
    stop(earlySignal);
    return;
  }

  const segs = real.mountedSegments.map((s) => `${s.name}(${s.size}B)`).join(',') || 'none';
  const line =
    `store_service ready: http=${cfg.host}:${httpPort} te_endpoint=${real.endpoint} segments=${segs} client_id=${real.clientId}` +
    ` rpc=${cfg.host}:${rpc.port} socket=${rpc.socketPath || 'none'}${tls ? ` tls=${tls.ca ? 'mtls' : 'on'}` : ''}`;
  log.info(line);
  process.stdout.write(line + '\n');
}

main().catch((e: Error) => {
  process.stderr.write(`store_service: fatal: ${e.stack ?? e.message}\n`);
  process.exit(1);
});
