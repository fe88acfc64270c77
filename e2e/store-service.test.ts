// End to end for the store_service binary (dist/sidecar/main.js) with a real store_master:
// readiness line and /health, flag errors exit 2 (bad --metadata_server, an unusable --host with
// nothing mounted), SIGTERM unmounts from the master, SIGTERM while setup retries an absent master
// ends the retries, and a store service killed mid-run never makes a Get return wrong bytes.
// Run `npm run build` first.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { LocalCluster, track } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { InvalidParamsError, StoreError, UnavailableError } from '../client/errors.js';
import { freePort } from './free-port.js';
import { MALFORMED_TARGET_REQUEST, rawHttpStatus } from './raw-http.js';

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
    // a request target that is not a URL path gets 400, and the service lives on
    const [host, port] = svc.http.split(':');
    expect(await rawHttpStatus(host, Number(port), MALFORMED_TARGET_REQUEST)).toBe('HTTP/1.1 400 Bad Request');
    expect((await fetch(`http://${svc.http}/health`)).status).toBe(200);
  });

  it('exits 2 naming a bad flag, a bad size or RDMA', async () => {
    const bad = await run(['--bogus_flag=1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--bogus_flag/);
    const size = await run(['--global_segment_size=lots']);
    expect(size.code).toBe(2);
    expect(size.stderr).toMatch(/global_segment_size/);
    const rdma = await run(['--protocol=rdma', '--port=0', '--rpc_port=0', `--master_server=${cluster.master.rpc}`, '--metadata_server=P2PHANDSHAKE', '--global_segment_size=1MB']);
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
      [
        sidecar,
        '--host=127.0.0.1',
        '--port=0',
        '--rpc_port=0',
        '--local_hostname=127.0.0.1',
        `--master_server=${cluster.master.rpc}`,
        `--metadata_server=${cluster.master.metadata}`,
        '--global_segment_size=16MB',
      ],
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

describe('store_service setup against a master that is not there', () => {
  const RETRIES = 20; // MC_STORE_CLIENT_SETUP_RETRIES default: attempts 1..20 log before giving up

  it('SIGTERM while it retries registration stops the retries and exits 0; /health says STARTING meanwhile', async () => {
    const [deadMaster, http] = [await freePort(), await freePort()];
    const env = { ...process.env };
    delete env.MC_STORE_CLIENT_SETUP_RETRIES;
    const proc = spawn(
      process.execPath,
      [
        sidecar,
        '--host=127.0.0.1',
        `--port=${http}`,
        '--rpc_port=0',
        '--local_hostname=127.0.0.1',
        `--master_server=127.0.0.1:${deadMaster}`,
        '--metadata_server=P2PHANDSHAKE',
        '--global_segment_size=16MB',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    const h = track('sigterm-while-retrying', proc);
    try {
      await h.waitFor(/registration attempt 1 failed/);
      // Listening already (bound before setup), but not ready.
      const health = await fetch(`http://127.0.0.1:${http}/health`);
      expect(health.status).toBe(503);
      expect(await health.text()).toBe('STARTING');
      proc.kill('SIGTERM');
      expect(await h.exited).toBe(0);
      const attempts = h.output().match(/registration attempt \d+ failed/g) ?? [];
      expect(attempts.length).toBeGreaterThanOrEqual(1);
      expect(attempts.length).toBeLessThan(RETRIES);
      expect(h.output()).toMatch(/SIGTERM received during setup: setup aborted/);
      expect(h.output()).not.toMatch(/store_service ready|setup failed/);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    }
  });

  it('Client.setup with an aborted signal stops retrying and rejects with "setup aborted"', async () => {
    const ac = new AbortController();
    const attempts: string[] = [];
    const setup = Client.setup(
      { local_hostname: '127.0.0.1', metadata_server: 'P2PHANDSHAKE', global_segment_size: '8MB', local_buffer_size: 0, master_server_address: `127.0.0.1:${await freePort()}` },
      {
        env: { ...process.env, MC_STORE_CLIENT_SETUP_RETRIES: String(RETRIES) },
        signal: ac.signal,
        log: (_level, msg) => {
          if (/registration attempt \d+ failed/.test(msg)) {
            attempts.push(msg);
            ac.abort(new Error('test abort'));
          }
        },
      },
    );
    const err = await setup.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toMatch(/setup aborted .*test abort/);
    expect(attempts).toHaveLength(1);
  });
});

describe('aborting Client.setup once the master has its segment', () => {
  it('unmounts and unpublishes the segment before rejecting', async () => {
    // A metadata server of the test's own: the publish that precedes MountSegment aborts setup, so
    // the abort lands while the mount is under way and the master accepts the segment.
    const ac = new AbortController();
    const requests: string[] = [];
    const meta = createServer((req, res) => {
      requests.push(`${req.method} ${new URL(req.url ?? '/', 'http://meta').searchParams.get('key')}`);
      if (req.method === 'PUT') ac.abort(new Error('test abort'));
      req.resume();
      req.on('end', () => res.writeHead(req.method === 'GET' ? 404 : 200).end());
    });
    await new Promise<void>((r) => meta.listen(0, '127.0.0.1', r));
    try {
      const metadata_server = `http://127.0.0.1:${(meta.address() as AddressInfo).port}/metadata`;
      const err = await Client.setup(cluster.clientConfig({ metadata_server, global_segment_size: 8 * MiB, local_buffer_size: 0 }), { signal: ac.signal }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(UnavailableError);
      expect((err as Error).message).toMatch(/setup aborted .*test abort/);
      const put = requests.find((r) => r.startsWith('PUT '));
      expect(put).toBeDefined();
      const key = put!.slice('PUT '.length);
      expect(requests).toContain(`DELETE ${key}`);
      const segment = key.replace(/^.*\/segments\//, '');
      expect((await cluster.admin('/get_all_segments')).split('\n')).not.toContain(segment);
    } finally {
      meta.closeAllConnections();
      await new Promise((r) => meta.close(r));
    }
  });
});

describe('store_service setup parameters', () => {
  it('a --metadata_server of no accepted form exits 2 naming the flag; Client.setup throws InvalidParamsError', async () => {
    const bad = await run(['--metadata_server=ftp://x', '--port=0', '--rpc_port=0', `--master_server=${cluster.master.rpc}`, '--global_segment_size=1MB']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--metadata_server/);
    expect(bad.stderr).toMatch(/ftp:\/\/x/);
    await expect(Client.setup(cluster.clientConfig({ metadata_server: 'ftp://x' }))).rejects.toBeInstanceOf(InvalidParamsError);
  });

  it('a --host it cannot listen on exits 2 naming the flag, with nothing mounted', async () => {
    const before = (await cluster.admin('/get_all_segments')).split('\n').filter(Boolean).sort();
    const res = await run([
      '--host=no.such.host.invalid',
      '--port=0',
      '--local_hostname=127.0.0.1',
      `--master_server=${cluster.master.rpc}`,
      `--metadata_server=${cluster.master.metadata}`,
      '--global_segment_size=16MB',
    ]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--host/);
    expect(res.stderr).not.toMatch(/store_service ready/);
    expect((await cluster.admin('/get_all_segments')).split('\n').filter(Boolean).sort()).toEqual(before);
  });
});

describe('store_service ports in use', () => {
  it('a taken --port or --rpc_port exits 2 naming the flag, the reason printed once', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as AddressInfo).port;
    try {
      const common = [
        '--host=127.0.0.1',
        '--local_hostname=127.0.0.1',
        `--master_server=${cluster.master.rpc}`,
        `--metadata_server=${cluster.master.metadata}`,
        '--global_segment_size=16MB',
      ];
      for (const [flag, args] of [
        ['--port', [`--port=${port}`, '--rpc_port=0']],
        ['--rpc_port', ['--port=0', `--rpc_port=${port}`, '--shm_dir=none']],
      ] as const) {
        const res = await run([...common, ...args]);
        expect(res.code).toBe(2);
        expect(res.stderr).toMatch(new RegExp(`${flag}: cannot listen`));
        expect(res.stderr.match(/EADDRINUSE/g)).toHaveLength(1);
      }
    } finally {
      taken.close();
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
        expect(
          createHash('sha256')
            .update(await client.get(it.key))
            .digest('hex'),
        ).toBe(want.get(it.key));
      }
    } finally {
      await client.close();
    }
  }, 60_000);
});
