// The `store` CLI's cluster secret: --cluster_secret_file, else STORE_CLUSTER_SECRET_FILE, else none
// (the servers must then run with --allow_unauthenticated). A file that cannot be used is a usage
// error (exit 2) naming it.
import { clientSecret } from '../common/cluster-secret.js';
import { UsageError } from './cli-errors.js';
import type { CliContext } from './context.js';

export function cliSecret(ctx: CliContext): Buffer | undefined {
  try {
    return clientSecret(ctx.inv.global.clusterSecretFile, ctx.env);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
