// Test helper: the cluster secret of the test run for engines a test makes by hand, read from
// STORE_CLUSTER_SECRET_FILE like the product does (content, trailing whitespace trimmed); undefined
// when the run has none. Engines that reach the run's store services and clients need it once those
// authenticate their engines (authSecret), and without one they keep working as before.
import { readFileSync } from 'node:fs';

export function runSecret(env: NodeJS.ProcessEnv = process.env): Buffer | undefined {
  const file = env.STORE_CLUSTER_SECRET_FILE;
  if (!file) return undefined;
  return Buffer.from(readFileSync(file, 'utf8').replace(/\s+$/, ''));
}
