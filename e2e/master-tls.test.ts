// store_master with --tls_cert/--tls_key(/--tls_ca): gRPC over TLS on --rpc_port (plain gRPC
// refused with a reason), the fast channel still plain on the same port, the management HTTP and
// the metadata server over HTTPS (a plain request told to use https), mTLS refusing a client
// without a certificate of the CA, and clear startup errors for bad files. Real processes and
// certificates made by openssl. Run `npm run build` first.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { MasterClient } from '../client/master-client.js';
import { HttpMetadataStore } from '../client/metadata/http-metadata.js';
import { clientSecret } from '../common/cluster-secret.js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import { masterProtoPath } from '../common/master-proto.js';
import { controlFetch } from '../common/tls-fetch.js';
import { loadTlsMaterial } from '../common/tls-material.js';
import { startMaster, type MasterProcess } from './master-process.js';
import { makeTestCerts, type TestCerts } from './tls-certs.js';

let c: TestCerts;
beforeAll(() => {
  c = makeTestCerts();
});
afterAll(() => rmSync(c.dir, { recursive: true, force: true }));

const CLIENT = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';

function ping(address: string, creds: grpc.ChannelCredentials): Promise<{ status_code: number }> {
  const def = protoLoader.loadSync(masterProtoPath(), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const client = new pkg.store.MasterService(address, creds, grpcAuthOptions()); // calls carry the cluster secret's header
  return new Promise<{ status_code: number }>((res, rej) => {
    client.Ping({ client_id: CLIENT }, { deadline: Date.now() + 10_000 }, (e: Error | null, r: { status_code: number }) => (e ? rej(e) : res(r)));
  }).finally(() => client.close());
}

const ca = () => loadTlsMaterial({ ca: c.ca });

describe('store_master with TLS', () => {
  let m: MasterProcess;
  let metadataUrl: string;
  beforeAll(async () => {
    m = await startMaster([
      `--tls_cert=${c.serverCert}`,
      `--tls_key=${c.serverKey}`,
      '--enable_http_metadata_server',
      '--http_metadata_server_host=127.0.0.1',
      '--http_metadata_server_port=0',
    ]);
    metadataUrl = /metadata=(\S+)/.exec(m.stderr())![1];
  });
  afterAll(async () => {
    if (m) expect(await m.stop()).toBe(0);
  });

  it('serves gRPC over TLS to a client trusting the CA and refuses plain gRPC with a reason', async () => {
    expect((await ping(m.rpc, grpc.credentials.createSsl(ca().ca))).status_code).toBe(0);
    await expect(ping(m.rpc, grpc.credentials.createInsecure())).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect(m.stderr()).toContain('plain gRPC on a TLS port: this master serves gRPC over TLS only (--tls_cert)');
    await expect(ping(m.rpc, grpc.credentials.createSsl(loadTlsMaterial({ ca: c.strangerCa }).ca))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });

  it('keeps the fast channel plain on the same port', async () => {
    const client = await MasterClient.connect(m.rpc, { requestTimeoutMs: 10_000 });
    try {
      expect((await client.ping({ client_id: CLIENT })).status_code).toBe(0);
    } finally {
      client.close();
    }
  });

  it('serves the management HTTP and the metadata server over HTTPS only', async () => {
    expect(metadataUrl).toMatch(/^https:\/\//);
    const health = await controlFetch(`${m.http}/health`, {}, ca());
    expect(health.status).toBe(200);
    const plain = await fetch(`${m.http}/health`);
    expect(plain.status).toBe(400);
    expect(await plain.text()).toContain('the master management HTTP serves HTTPS only on this port');
    const store = new HttpMetadataStore(metadataUrl, 5000, clientSecret(), ca());
    const desc = { te_endpoint: '127.0.0.1:12345', protocol: 'tcp', buffer: 4096, size: 1 << 20 };
    await store.publish('seg-a', desc);
    expect(await store.lookup('seg-a')).toEqual(desc);
  });
});

describe('store_master with mTLS (--tls_ca)', () => {
  let m: MasterProcess;
  beforeAll(async () => {
    m = await startMaster([`--tls_cert=${c.serverCert}`, `--tls_key=${c.serverKey}`, `--tls_ca=${c.ca}`]);
  });
  afterAll(async () => {
    if (m) expect(await m.stop()).toBe(0);
  });

  it('serves a client with a certificate of the CA and refuses one without or with a stranger one', async () => {
    const key = loadTlsMaterial({ cert: c.clientCert, key: c.clientKey });
    expect((await ping(m.rpc, grpc.credentials.createSsl(ca().ca, key.key, key.cert))).status_code).toBe(0);
    await expect(ping(m.rpc, grpc.credentials.createSsl(ca().ca))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    const stranger = loadTlsMaterial({ cert: c.strangerClientCert, key: c.strangerClientKey });
    await expect(ping(m.rpc, grpc.credentials.createSsl(ca().ca, stranger.key, stranger.cert))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect((await controlFetch(`${m.http}/health`, {}, { ...ca(), ...key })).status).toBe(200);
    await expect(controlFetch(`${m.http}/health`, {}, ca())).rejects.toThrow();
    expect(m.stderr()).toMatch(/closing RPC connection from 127\.0\.0\.1:\d+: TLS handshake failed/);
  });
});

function runMaster(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const proc = spawn(process.execPath, ['dist/master/main.js', '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((r) => proc.once('close', (code) => r({ code, stderr })));
}

describe('store_master TLS startup errors', () => {
  it('exits 2 with one line naming the flag and the file', async () => {
    const mismatch = await runMaster([`--tls_cert=${c.serverCert}`, `--tls_key=${c.clientKey}`]);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toBe(`store_master: --tls_key=${c.clientKey} does not match the certificate --tls_cert=${c.serverCert} (subject CN=server)\n`);
    const missing = await runMaster([`--tls_cert=${c.dir}/missing.crt`, `--tls_key=${c.serverKey}`]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe(`store_master: --tls_cert=${c.dir}/missing.crt: cannot read: no such file\n`);
  });
});
