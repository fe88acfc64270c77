import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTestCerts, type TestCerts } from '../e2e/tls-certs.js';
import { clientTlsPathsFromEnv, loadServerTls, loadTlsMaterial, sameMaterial, TlsConfigError } from './tls-material.js';

let c: TestCerts;
beforeAll(() => {
  c = makeTestCerts();
});
afterAll(() => rmSync(c.dir, { recursive: true, force: true }));

const fails = (f: () => unknown): TlsConfigError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(TlsConfigError);
    return e as TlsConfigError;
  }
  throw new Error('expected a TlsConfigError');
};

describe('loadServerTls', () => {
  it('is off when no flag is given', () => {
    expect(loadServerTls({ cert: '', key: '', ca: '' })).toBeUndefined();
  });

  it('reads a matching certificate and key, and the CA', () => {
    const m = loadServerTls({ cert: c.serverCert, key: c.serverKey, ca: c.ca })!;
    expect(m.cert?.toString()).toContain('BEGIN CERTIFICATE');
    expect(m.ca?.toString()).toContain('BEGIN CERTIFICATE');
    expect(m.certExpiresMs).toBeGreaterThan(Date.now());
  });

  it('names the missing file and the flag', () => {
    const e = fails(() => loadServerTls({ cert: join(c.dir, 'nope.crt'), key: c.serverKey }));
    expect(e.setting).toBe('--tls_cert');
    expect(e.message).toBe(`--tls_cert=${join(c.dir, 'nope.crt')}: cannot read: no such file`);
  });

  it('refuses a key that is not the certificate’s', () => {
    const e = fails(() => loadServerTls({ cert: c.serverCert, key: c.clientKey }));
    expect(e.setting).toBe('--tls_key');
    expect(e.message).toContain('does not match the certificate --tls_cert=');
  });

  it('refuses a half-given pair and a CA without a certificate', () => {
    expect(fails(() => loadServerTls({ cert: c.serverCert })).message).toBe('--tls_cert is set but --tls_key is not: a certificate needs its private key (give both or neither)');
    expect(fails(() => loadServerTls({ ca: c.ca })).setting).toBe('--tls_ca');
  });

  it('refuses a file that is not PEM', () => {
    const junk = join(c.dir, 'junk.pem');
    writeFileSync(junk, 'not a certificate\n');
    expect(fails(() => loadServerTls({ cert: junk, key: c.serverKey })).message).toMatch(/^--tls_cert=.*junk.pem: not a PEM certificate/);
    expect(fails(() => loadServerTls({ cert: c.serverCert, key: junk })).message).toMatch(/^--tls_key=.*junk.pem: not a PEM private key/);
    expect(fails(() => loadServerTls({ cert: c.serverCert, key: c.serverKey, ca: junk })).setting).toBe('--tls_ca');
  });
});

describe('client settings', () => {
  it('come from STORE_TLS_* and name them in errors', () => {
    expect(clientTlsPathsFromEnv({})).toBeUndefined();
    const paths = clientTlsPathsFromEnv({ STORE_TLS_CA_FILE: c.ca, STORE_TLS_CERT_FILE: c.clientCert })!;
    expect(fails(() => loadTlsMaterial(paths)).message).toBe(
      'STORE_TLS_CERT_FILE is set but STORE_TLS_KEY_FILE is not: a certificate needs its private key (give both or neither)',
    );
    expect(loadTlsMaterial(clientTlsPathsFromEnv({ STORE_TLS_CA_FILE: c.ca })!).ca).toBeDefined();
  });
});

describe('sameMaterial', () => {
  it('compares bytes', () => {
    const a = loadServerTls({ cert: c.serverCert, key: c.serverKey })!;
    const copy = join(c.dir, 'copy.crt');
    copyFileSync(c.serverCert, copy);
    expect(sameMaterial(a, loadServerTls({ cert: copy, key: c.serverKey }))).toBe(true);
    expect(sameMaterial(a, loadServerTls({ cert: c.renewedCert, key: c.renewedKey }))).toBe(false);
    expect(sameMaterial(a, loadServerTls({ cert: c.serverCert, key: c.serverKey, ca: c.ca }))).toBe(false);
  });
});
