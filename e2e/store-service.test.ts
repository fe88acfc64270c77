// End to end for the store_service binary (dist/sidecar/main.js) with a real store_master:
// readiness line and /health, flag errors exit 2, SIGTERM unmounts from the master, and a store
// service killed mid-run never makes a Get return wrong bytes. Run `npm run build` first.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { LocalCluster, track } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { StoreError } from '../client/errors.js';

const MiB = 1024 * 1024;
const sidecar = join(process.cwd(), 'dist/sidecar/main.js');
let cluster: LocalCluster;

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 3, segmentSize: '64MB' });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
}, 30_000);

async function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const p = spawn(process.execPath, [sidecar, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  p.stderr.on('data', (d) => (stderr += d));
  const [code] = await once(p, 'exit');
  return { code, stderr };
}

describe('store_service process', () => {
  it('serves /health and lists its segment with the master', async () => {
    const svc = cluster.services[0];
    const res = await fetch(`http://${svc.http}/health`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('OK');
    expect((await cluster.admin('/get_all_segments')).split('\n')).toContain(svc.segment);
  });

  it('exits 2 naming a bad flag, a bad size or RDMA', async () => {
    const bad = await run(['--bogus_flag=1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--bogus_flag/);
    const size = await run(['--global_segment_size=lots']);
    expect(size.code).toBe(2);
    expect(size.stderr).toMatch(/global_segment_size/);
    const rdma = await run(['--protocol=rdma', `--master_server=${cluster.master.rpc}`, '--metadata_server=P2PHANDSHAKE', '--global_segment_size=1MB']);
    expect(rdma.code).toBe(2);
    expect(rdma.stderr).toMatch(/RDMA is not available/);
  });

  it('on SIGTERM unmounts its segment from the master and exits 0', async () => {
    const svc = await cluster.addService();
    expect((await cluster.admin('/get_all_segments')).split('\n')).toContain(svc.segment);
    svc.proc.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect((await cluster.admin('/get_all_segments')).split('\n')).not.toContain(svc.segment);
    const meta = await fetch(`${cluster.master.metadata}?key=${encodeURIComponent(`store/segments/${svc.segment}`)}`);
    expect(meta.status).toBe(404);
  });

  it('a SIGTERM during setup (before the ready line) still exits 0 and leaves nothing mounted', async () => {
    const before = (await cluster.admin('/get_all_segments')).split('\n').filter(Boolean).sort();
    const proc = spawn(
      process.execPath,
      [sidecar, '--host=127.0.0.1', '--port=0', '--local_hostname=127.0.0.1', `--master_server=${cluster.master.rpc}`,
        `--metadata_server=${cluster.master.metadata}`, '--global_segment_size=16MB'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const h = track('early-sigterm', proc);
    try {
      // The first log line comes before the client connects to the master.
      await h.waitFor(/--rpc_port=/);
      proc.kill('SIGTERM');
      expect(await h.exited).toBe(0);
      expect(h.output()).not.toMatch(/store_service ready/);
      expect((await cluster.admin('/get_all_segments')).split('\n').filter(Boolean).sort()).toEqual(before);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    }
  });
});

describe('a store service killed mid-run', () => {
  it('never makes a Get return wrong bytes; objects fail over to a surviving replica', async () => {
    const client = await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }));
    try {
      const want = new Map<string, string>();
      const items = Array.from({ length: 60 }, (_, i) => ({ key: `kill-${i}`, value: randomBytes(64 * 1024 + i * 4099) }));
      for (const it of items) want.set(it.key, createHash('sha256').update(it.value).digest('hex'));
      const put = await client.putBatch(items.map((it) => ({ ...it, config: { replica_num: 2 } })));
      expect(put.filter((r) => r.error)).toEqual([]);

      const victim = cluster.services[1];
      let wrong = 0;
      let ok = 0;
      let stop = false;
      const readers = [0, 1].map(async (r) => {
        for (let i = r; !stop; i = (i + 2) % items.length) {
          try {
            const v = await client.get(items[i].key);
            if (createHash('sha256').update(v).digest('hex') === want.get(items[i].key)) ok++;
            else wrong++;
          } catch (e) {
            expect(e).toBeInstanceOf(StoreError); // an error, never another object's bytes
          }
        }
      });
      // Kill once reads are flowing, then let every key be read again after the kill.
      while (ok < 50) await new Promise((r) => setImmediate(r));
      victim.proc.kill('SIGKILL');
      await victim.exited;
      const afterKill = ok;
      while (ok < afterKill + items.length * 2) await new Promise((r) => setImmediate(r));
      stop = true;
      await Promise.all(readers);
      expect(wrong).toBe(0);
      // Each object has a replica on a surviving service, so reads after the kill still succeed.
      for (const it of items) {
        expect(createHash('sha256').update(await client.get(it.key)).digest('hex')).toBe(want.get(it.key));
      }
    } finally {
      await client.close();
    }
  }, 60_000);
});
