// `store secret new FILE`: writes a new cluster secret (32 random bytes as 64 hex characters,
// mode 0600; an existing file is never overwritten), for --cluster_secret_file and
// STORE_CLUSTER_SECRET_FILE of every process of one cluster (docs/threat-model.md).
import { writeNewSecret } from '../../common/cluster-secret.js';
import { CliError, ExitCode, UsageError } from '../cli-errors.js';
import { write, type CliContext } from '../context.js';
import { jsonDoc } from '../output.js';

export async function secret(ctx: CliContext): Promise<void> {
  const [verb, file] = ctx.inv.args;
  if (verb !== 'new') throw new UsageError(`unknown secret action "${verb}": store secret new FILE`);
  try {
    writeNewSecret(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'EEXIST' ? 'it exists (a secret is never overwritten; remove it first to replace it)' : (code ?? (e as Error).message);
    throw new CliError(ExitCode.LOCAL_IO, `cannot write ${file}: ${why}`, { cause: e });
  }
  if (ctx.inv.global.json) return write(ctx.stdout, jsonDoc({ file, bytes: 64 }));
  return write(ctx.stdout, `wrote a new cluster secret to ${file} (mode 0600); give every process of the cluster --cluster_secret_file=${file} or STORE_CLUSTER_SECRET_FILE\n`);
}
