#!/usr/bin/env node
// store_service: the standalone store service. A real client that contributes its global segment
// to the cluster (no Get/Put traffic of its own unless given a local buffer), with an HTTP server
// for /health. Prints one "store_service ready ..." line when mounted; on SIGTERM/SIGINT it
// unmounts its segments from the master, unpublishes them and exits 0. Bad flags exit 2.
import { createServer, type Server } from 'node:http';
import { FlagError, HelpRequested } from '../common/flags.js';
import { loggerFromFlags, type Logger } from '../common/logger.js';
import { Client } from '../client/client.js';
import { StoreError } from '../client/errors.js';
import { parseStoreServiceArgs, type StoreServiceConfig } from './store-service-flags.js';

function listen(server: Server, port: number, host: string): Promise<number> {
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
  try {
    cfg = parseStoreServiceArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof HelpRequested) {
      process.stdout.write(e.usage);
      process.exit(0);
    }
    if (e instanceof FlagError) {
      process.stderr.write(`store_service: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  // Handlers go in before anything announces readiness: a parent that reads the ready line (on
  // stdout, or the same line logged to stderr) may send SIGTERM at once, and with no handler yet
  // the default action would kill us with the segment still mounted. A signal during setup is
  // remembered and acted on as soon as there is something to unmount.
  let onSignal: ((signal: string) => void) | undefined;
  let earlySignal: string | undefined;
  const signalled = (signal: string): void => {
    if (onSignal) onSignal(signal);
    else earlySignal ??= signal;
  };
  process.on('SIGTERM', () => signalled('SIGTERM'));
  process.on('SIGINT', () => signalled('SIGINT'));

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
  log.info(`--rpc_port=${cfg.rpcPort}: reserved for the dummy-client RPC (ClientService), which this build does not serve`);

  let client: Client;
  try {
    client = await Client.setup(cfg.client, {
      prefaultSegment: cfg.values.prefault_segment as boolean,
      log: (level, msg) => (level === 'error' ? log.error(msg) : level === 'warn' ? log.warn(msg) : log.info(msg)),
    });
  } catch (e) {
    const code = e instanceof StoreError ? ` (${e.codeName})` : '';
    log.error(`setup failed${code}: ${(e as Error).message}`);
    process.stderr.write(`store_service: setup failed${code}: ${(e as Error).message}\n`);
    process.exit(e instanceof StoreError && (e.code === -100 || e.code === -3) ? 2 : 1);
  }

  let stopping = false;
  const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/health') {
      res.writeHead(stopping ? 503 : 200, { 'content-type': 'text/plain' }).end(stopping ? 'STOPPING' : 'OK');
    } else if (req.method === 'GET' && url.pathname === '/segments') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(
        JSON.stringify({ client_id: client.clientId, te_endpoint: client.endpoint, segments: client.mountedSegments }),
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`no route ${req.method} ${url.pathname}`);
    }
  });
  let httpPort: number;
  try {
    httpPort = await listen(http, cfg.port, cfg.host);
  } catch (e) {
    log.error(`cannot listen on ${cfg.host}:${cfg.port}: ${(e as Error).message}`);
    process.stderr.write(`store_service: cannot listen on ${cfg.host}:${cfg.port}: ${(e as Error).message}\n`);
    await client.close();
    process.exit(1);
  }

  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal} received: unmounting and stopping`);
    client
      .close()
      .catch((e: Error) => log.error(`close failed: ${e.message}`))
      .finally(() => {
        http.closeAllConnections();
        http.close(() => {
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

  const segs = client.mountedSegments.map((s) => `${s.name}(${s.size}B)`).join(',') || 'none';
  const line = `store_service ready: http=${cfg.host}:${httpPort} te_endpoint=${client.endpoint} segments=${segs} client_id=${client.clientId}`;
  log.info(line);
  process.stdout.write(line + '\n');
}

main().catch((e: Error) => {
  process.stderr.write(`store_service: fatal: ${e.stack ?? e.message}\n`);
  process.exit(1);
});
