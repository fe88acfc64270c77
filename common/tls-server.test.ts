// TLS on a real listener: https with the CA, a plain client told to use https, mTLS refusing a
// client without a certificate or with a stranger's, and a renewed certificate served after the
// reloader's next look (FakeClock), with real certificates made by openssl.
import { copyFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect as tlsConnect } from 'node:tls';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { join } from 'node:path';
import { makeTestCerts, type TestCerts } from '../e2e/tls-certs.js';
import { FakeClock } from './clock.js';
import { controlFetch, TlsConnectError } from './tls-fetch.js';
import { loadServerTls, loadTlsMaterial, type TlsMaterial } from './tls-material.js';
import { TlsReloader } from './tls-reloader.js';
import { httpOverTls } from './tls-server.js';

let c: TestCerts;
const silent = { warn: () => {}, info: () => {} };
beforeAll(() => {
  c = makeTestCerts();
});
afterAll(() => rmSync(c.dir, { recursive: true, force: true }));

function hello(): Server {
  return createServer((req, res) => res.end(`hello ${req.method}\n`));
}

async function listen(s: NetServer): Promise<string> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

const close = (s: NetServer) => new Promise((r) => s.close(r));
const client = (extra: Partial<TlsMaterial> = {}): TlsMaterial => ({ ...loadTlsMaterial({ ca: c.ca }), ...extra });

/** The serial number of the certificate the server at `port` presents. */
function servedSerial(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca: loadTlsMaterial({ ca: c.ca }).ca }, () => {
      resolve(s.getPeerCertificate().serialNumber);
      s.end();
    });
    s.on('error', reject);
  });
}

describe('httpOverTls', () => {
  it('serves https to a client trusting the CA; a plain client gets a 400 that says to use https', async () => {
    const http = hello();
    const { server } = httpOverTls(http, loadServerTls({ cert: c.serverCert, key: c.serverKey })!, 'test server', silent);
    const url = await listen(server);
    try {
      const res = await controlFetch(`${url}/x`, { method: 'POST', body: 'b' }, client());
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('hello POST\n');
      const plain = await fetch(`${url}/x`);
      expect(plain.status).toBe(400);
      expect(await plain.text()).toBe('test server serves HTTPS only on this port (started with --tls_cert): use https:// and trust the cluster CA (STORE_TLS_CA_FILE)\n');
    } finally {
      await close(server);
    }
  });

  it('a TLS client on a plain port gets an error that says so', async () => {
    const http = hello();
    const url = await listen(http);
    try {
      const e = await controlFetch(url, {}, client()).catch((x: Error) => x);
      expect(e).toBeInstanceOf(TypeError);
      const cause = (e as Error).cause as TlsConnectError;
      expect(cause).toBeInstanceOf(TlsConnectError);
      expect(cause.message).toMatch(/did not complete a TLS handshake .*is it started with --tls_cert\?/);
    } finally {
      await close(http);
    }
  });

  it('with --tls_ca refuses clients without a certificate of that CA', async () => {
    const http = hello();
    const { server } = httpOverTls(http, loadServerTls({ cert: c.serverCert, key: c.serverKey, ca: c.ca })!, 'test server', silent);
    const url = await listen(server);
    try {
      const mine = loadTlsMaterial({ cert: c.clientCert, key: c.clientKey });
      expect((await controlFetch(url, {}, client(mine))).status).toBe(200);
      const none = await controlFetch(url, {}, client()).catch((x: Error) => x);
      expect(none).toBeInstanceOf(TypeError);
      const stranger = loadTlsMaterial({ cert: c.strangerClientCert, key: c.strangerClientKey });
      expect(await controlFetch(url, {}, client(stranger)).catch((x: Error) => x)).toBeInstanceOf(TypeError);
    } finally {
      await close(server);
    }
  });

  it('a client refuses a server whose certificate its CA did not sign', async () => {
    const http = hello();
    const { server } = httpOverTls(http, loadServerTls({ cert: c.serverCert, key: c.serverKey })!, 'test server', silent);
    const url = await listen(server);
    try {
      const e = await controlFetch(url, {}, loadTlsMaterial({ ca: c.strangerCa })).catch((x: Error) => x);
      expect(((e as Error).cause as TlsConnectError).message).toMatch(/TLS refused: .*STORE_TLS_CA_FILE/);
    } finally {
      await close(server);
    }
  });

  it('serves a renewed certificate after the reloader looks again', async () => {
    const certPath = join(c.dir, 'live.crt');
    const keyPath = join(c.dir, 'live.key');
    copyFileSync(c.serverCert, certPath);
    copyFileSync(c.serverKey, keyPath);
    const paths = { cert: certPath, key: keyPath };
    const first = loadServerTls(paths)!;
    const { server, terminator } = httpOverTls(hello(), first, 'test server', silent);
    const port = Number(new URL(await listen(server)).port);
    const clock = new FakeClock();
    const reloader = new TlsReloader({ paths, current: first, apply: (m) => terminator.reload(m), clock, intervalMs: 5000, log: silent });
    reloader.start();
    try {
      const before = await servedSerial(port);
      // A half-written renewal (new certificate, old key) is skipped: the old one stays.
      copyFileSync(c.renewedCert, certPath);
      await clock.advance(5000);
      expect(reloader.failures).toBe(1);
      expect(await servedSerial(port)).toBe(before);
      copyFileSync(c.renewedKey, keyPath);
      await clock.advance(5000);
      expect(reloader.reloads).toBe(1);
      const after = await servedSerial(port);
      expect(after).not.toBe(before);
      await clock.advance(5000);
      expect(reloader.reloads).toBe(1);
    } finally {
      reloader.stop();
      await close(server);
    }
  });
});
