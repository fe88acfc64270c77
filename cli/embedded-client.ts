// The embedded client of `store put`/`store get`: a pure client (global_segment_size 0: it mounts
// nothing and holds no one else's data) with a local buffer sized for the value, no result arena
// (values are read straight into a registered lease), no metrics, one registration attempt (a
// CLI fails fast instead of retrying for a minute) and the client's own warnings only with
// STORE_CLI_VERBOSE=1. Its transfer engine listens on loopback: nobody needs to reach it.
import { Client } from '../client/client.js';
import type { CliContext } from './context.js';
import { masterAddress, metadataServer } from './endpoints.js';

const MiB = 1024 * 1024;

/** The local buffer for a value of `bytes`: the value rounded up to 1 MiB (at least 4 MiB). */
export function localBufferFor(bytes: number): number {
  return Math.max(4 * MiB, Math.ceil(bytes / MiB) * MiB);
}

export async function openClient(ctx: CliContext, valueBytes: number): Promise<Client> {
  const g = ctx.inv.global;
  const env = { ...ctx.env, MC_STORE_CLIENT_SETUP_RETRIES: ctx.env.MC_STORE_CLIENT_SETUP_RETRIES ?? '0' };
  const verbose = ctx.env.STORE_CLI_VERBOSE === '1';
  return Client.setup(
    {
      local_hostname: '127.0.0.1',
      metadata_server: await metadataServer(g, ctx.env),
      global_segment_size: 0,
      local_buffer_size: localBufferFor(valueBytes),
      protocol: 'tcp',
      master_server_address: await masterAddress(g, ctx.env),
    },
    {
      env,
      requestTimeoutMs: g.timeoutMs,
      resultArenaBytes: 0,
      metrics: false,
      replicaCacheEntries: 0,
      ...(ctx.inv.global.clusterSecretFile ? { clusterSecretFile: ctx.inv.global.clusterSecretFile } : {}),
      log: (level, message) => {
        if (verbose) ctx.stderr.write(`[client] ${level} ${message}\n`);
      },
    },
  );
}
