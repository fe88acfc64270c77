// Webhook serving certificates when cert-manager is not used: a self-signed CA and a serving
// certificate for the webhook Service's DNS names, made with the `openssl` CLI (node:crypto can
// parse X.509 but not issue it), plus the pure rotation rule read with node:crypto.
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface WebhookCerts {
  caCert: string;
  tlsCert: string;
  tlsKey: string;
}

export function serviceDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

/** A new CA and serving certificate valid for `days`, for `dnsNames` (and 127.0.0.1 for local tests). */
export function generateCerts(dnsNames: string[], days: number, openssl = 'openssl'): WebhookCerts {
  const dir = mkdtempSync(join(tmpdir(), 'store-webhook-certs-'));
  const run = (args: string[]) => execFileSync(openssl, args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    run([
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      String(days + 1),
      '-subj',
      '/CN=store-operator-webhook-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'tls.key', '-out', 'tls.csr', '-subj', `/CN=${dnsNames[0]}`]);
    const san = [...dnsNames.map((n) => `DNS:${n}`), 'IP:127.0.0.1'].join(',');
    writeFileSync(join(dir, 'ext.cnf'), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n`);
    run(['x509', '-req', '-in', 'tls.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'tls.crt', '-days', String(days), '-extfile', 'ext.cnf']);
    return { caCert: readFileSync(join(dir, 'ca.crt'), 'utf8'), tlsCert: readFileSync(join(dir, 'tls.crt'), 'utf8'), tlsKey: readFileSync(join(dir, 'tls.key'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Whether a serving certificate must be replaced at wall time `nowMs`: unreadable, not yet valid,
 * missing one of `dnsNames`, or past `renewFraction` of its lifetime (default: the last third).
 */
export function needsRotation(certPem: string | undefined, nowMs: number, dnsNames: string[], renewFraction = 2 / 3): boolean {
  if (!certPem) return true;
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    return true;
  }
  const from = Date.parse(cert.validFrom);
  const to = Date.parse(cert.validTo);
  if (!(nowMs >= from) || !(nowMs < from + (to - from) * renewFraction)) return true;
  const sans = (cert.subjectAltName ?? '').split(',').map((s) => s.trim());
  return !dnsNames.every((n) => sans.includes(`DNS:${n}`));
}
