// Starts a store_master and one store_service on free ports (dist/sidecar/local-cluster.js, after
// `npm run build`), prints {"rpc":..., "socket":..., "shm_dir":..., "secret":...} on one line
// (secret: the cluster secret's file, the environment's or one LocalCluster made), and stops them
// when its stdin closes or on SIGTERM. Used by bench_dummy.py --start-cluster.
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const { LocalCluster } = await import(join(repo, 'dist', 'sidecar', 'local-cluster.js'));
const segment = process.argv[2] ?? '2GB';
const shmDir = mkdtempSync('/dev/shm/kvstore-bench-');
const cluster = await LocalCluster.start({
  storeServices: 1,
  segmentSize: segment,
  serviceArgs: [`--shm_dir=${shmDir}`, '--local_buffer_size=256MB'],
  masterArgs: ['--default_kv_lease_ttl=500ms'],
});
const svc = cluster.services[0];
console.log(JSON.stringify({ rpc: svc.rpc, socket: svc.socket, shm_dir: shmDir, pid: svc.proc.pid, secret: process.env.STORE_CLUSTER_SECRET_FILE ?? '' }));
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await cluster.stop();
  rmSync(shmDir, { recursive: true, force: true });
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
