// Certificates for the TLS tests, made with the openssl CLI in a temporary directory (as
// operator/webhook/certs.ts does): a CA, a server certificate for 127.0.0.1/localhost, a client
// certificate for mTLS, a second server certificate (a renewal) and a stranger CA with its own
// server and client certificates. Returns the directory; the files are named as below.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  /** Another certificate of the same CA for the same names (what a renewal writes). */
  renewedCert: string;
  renewedKey: string;
  clientCert: string;
  clientKey: string;
  strangerCa: string;
  strangerClientCert: string;
  strangerClientKey: string;
}

export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'store-tls-test-'));
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ca = (name: string) =>
    run([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  const leaf = (name: string, caName: string, usage: 'serverAuth' | 'clientAuth') => {
    run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    writeFileSync(join(dir, `${name}.cnf`), `subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=${usage}\nbasicConstraints=CA:FALSE\n`);
    run([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${caName}.crt`,
      '-CAkey',
      `${caName}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '1',
      '-extfile',
      `${name}.cnf`,
    ]);
  };
  ca('ca');
  ca('stranger-ca');
  leaf('server', 'ca', 'serverAuth');
  leaf('renewed', 'ca', 'serverAuth');
  leaf('client', 'ca', 'clientAuth');
  leaf('stranger-client', 'stranger-ca', 'clientAuth');
  const p = (f: string) => join(dir, f);
  return {
    dir,
    ca: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    renewedCert: p('renewed.crt'),
    renewedKey: p('renewed.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    strangerCa: p('stranger-ca.crt'),
    strangerClientCert: p('stranger-client.crt'),
    strangerClientKey: p('stranger-client.key'),
  };
}
