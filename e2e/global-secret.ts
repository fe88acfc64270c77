// Jest globalSetup: one cluster secret for the whole run, in a temp dir, named by
// STORE_CLUSTER_SECRET_FILE so that every process the tests spawn (masters, store services, the
// CLI) and every client they make inherit it: the suite tests the authenticated product. Tests of
// the unauthenticated mode and of refusals set their own environment.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export default function globalSetup(): void {
  if (process.env.STORE_CLUSTER_SECRET_FILE) return; // the caller chose one
  const dir = mkdtempSync(join(tmpdir(), 'kvstore-test-secret-'));
  const file = join(dir, 'cluster-secret');
  writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600 });
  process.env.STORE_CLUSTER_SECRET_FILE = file;
}
