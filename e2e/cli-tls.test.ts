// The `store` CLI against a master and a store service serving HTTPS (--tls_cert): with
// STORE_TLS_CA_FILE it lists segments and mounts/unmounts through the REST API; without it the
// server's 400 tells the user to use https and the cluster CA. Real processes; `npm run build` first.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { distRoot, LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { makeTestCerts, type TestCerts } from './tls-certs.js';

const CLI = join(distRoot(), 'cli', 'main.js');
let c: TestCerts;
let cluster: LocalCluster;
let svc: StoreServiceProcess;
let env: NodeJS.ProcessEnv;

function run(args: string[], e: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, ...args], { env: e, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout: out, stderr: err }));
  });
}

beforeAll(async () => {
  c = makeTestCerts();
  const tls = [`--tls_cert=${c.serverCert}`, `--tls_key=${c.serverKey}`];
  cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '32MB', masterArgs: tls, serviceArgs: tls, env: { ...process.env, STORE_TLS_CA_FILE: c.ca } });
  svc = cluster.services[0];
  env = { ...process.env, STORE_MASTER_ADDRESS: cluster.master.rpc, STORE_MASTER_HTTP_ADDRESS: `http://${cluster.master.metrics}`, STORE_TLS_CA_FILE: c.ca };
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
  rmSync(c.dir, { recursive: true, force: true });
}, 30_000);

describe('store CLI with TLS', () => {
  it('lists segments and mounts/unmounts over HTTPS with STORE_TLS_CA_FILE', async () => {
    const segs = await run(['segments', '--json'], env);
    expect(segs.stderr).toBe('');
    expect((JSON.parse(segs.stdout) as { segments: { name: string }[] }).segments.map((s) => s.name)).toContain(svc.segment);
    const mount = await run(['mount', '4MB', '--service', svc.http, '--json'], env);
    expect(mount.stderr).toBe('');
    const id = (JSON.parse(mount.stdout) as { segment_ids: string[] }).segment_ids[0];
    expect((await run(['unmount', id, '--service', svc.http, '--grace', '0'], env)).stdout).toMatch(/unmounted 1/);
  });

  it('without the CA: one line saying the server wants HTTPS and the CA', async () => {
    const plain = { ...env, STORE_TLS_CA_FILE: '' };
    const r = await run(['segments'], plain);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(
      /^store segments: master \/get_segments_detail: the master management HTTP serves HTTPS only on this port \(started with --tls_cert\): use https:\/\/ and trust the cluster CA \(STORE_TLS_CA_FILE\) \(HTTP 400\)\n$/,
    );
  });

  it('a bad STORE_TLS_CA_FILE is a clear error', async () => {
    const r = await run(['segments'], { ...env, STORE_TLS_CA_FILE: join(c.dir, 'missing.crt') });
    expect(r).toMatchObject({ code: 2, stderr: `store segments: STORE_TLS_CA_FILE=${join(c.dir, 'missing.crt')}: cannot read: no such file\n` });
  });
});
