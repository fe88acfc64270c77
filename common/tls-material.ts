// TLS material of a control interface read from files (--tls_cert, --tls_key, --tls_ca on the
// servers; STORE_TLS_CA_FILE, STORE_TLS_CERT_FILE, STORE_TLS_KEY_FILE on the clients) and checked
// before it is used: a missing or unreadable file, a file that is not PEM, a key that does not
// belong to the certificate, a half-given pair: each a TlsConfigError naming the flag and the path.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** A TLS setting that cannot be used; `setting` is the flag or environment variable at fault. */
export class TlsConfigError extends Error {
  override readonly name = 'TlsConfigError';
  readonly code = 'TLS_CONFIG';
  constructor(
    readonly setting: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Paths as given, with the names they were given under (for messages). */
export interface TlsPaths {
  cert?: string;
  key?: string;
  ca?: string;
  names?: { cert: string; key: string; ca: string };
}

/** The PEM contents. `cert`+`key` identify this side; `ca` verifies the other side. */
export interface TlsMaterial {
  cert?: Buffer;
  key?: Buffer;
  ca?: Buffer;
  /** notAfter of the certificate (wall ms), for logs. */
  certExpiresMs?: number;
}

export const SERVER_FLAG_NAMES = { cert: '--tls_cert', key: '--tls_key', ca: '--tls_ca' };
export const CLIENT_ENV_NAMES = { cert: 'STORE_TLS_CERT_FILE', key: 'STORE_TLS_KEY_FILE', ca: 'STORE_TLS_CA_FILE' };

export type ReadFile = (path: string) => Buffer;

function readOne(setting: string, path: string, read: ReadFile): Buffer {
  try {
    return read(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : ((e as Error).message ?? String(e));
    throw new TlsConfigError(setting, `${setting}=${path}: cannot read: ${why}`, { cause: e });
  }
}

/**
 * Reads and checks the files of `paths`. Certificate and key come together or not at all; the key
 * must be the certificate's; every file must hold PEM that parses. Throws TlsConfigError.
 */
export function loadTlsMaterial(paths: TlsPaths, read: ReadFile = (p) => readFileSync(p)): TlsMaterial {
  const n = paths.names ?? SERVER_FLAG_NAMES;
  const has = (s: string | undefined): s is string => s !== undefined && s !== '';
  if (has(paths.cert) !== has(paths.key)) {
    const [given, missing] = has(paths.cert) ? [n.cert, n.key] : [n.key, n.cert];
    throw new TlsConfigError(missing, `${given} is set but ${missing} is not: a certificate needs its private key (give both or neither)`);
  }
  const out: TlsMaterial = {};
  if (has(paths.cert) && has(paths.key)) {
    const cert = readOne(n.cert, paths.cert, read);
    const key = readOne(n.key, paths.key, read);
    let x509: X509Certificate;
    try {
      x509 = new X509Certificate(cert);
    } catch (e) {
      throw new TlsConfigError(n.cert, `${n.cert}=${paths.cert}: not a PEM certificate (${(e as Error).message})`, { cause: e });
    }
    let privateKey;
    try {
      privateKey = createPrivateKey(key);
    } catch (e) {
      throw new TlsConfigError(n.key, `${n.key}=${paths.key}: not a PEM private key (${(e as Error).message})`, { cause: e });
    }
    if (!x509.checkPrivateKey(privateKey)) {
      throw new TlsConfigError(n.key, `${n.key}=${paths.key} does not match the certificate ${n.cert}=${paths.cert} (subject ${x509.subject.replace(/\n/g, ', ')})`);
    }
    out.cert = cert;
    out.key = key;
    out.certExpiresMs = Date.parse(x509.validTo);
  }
  if (has(paths.ca)) {
    const ca = readOne(n.ca, paths.ca, read);
    try {
      new X509Certificate(ca);
    } catch (e) {
      throw new TlsConfigError(n.ca, `${n.ca}=${paths.ca}: not a PEM certificate (${(e as Error).message})`, { cause: e });
    }
    out.ca = ca;
  }
  return out;
}

/** Server side: the files of --tls_cert/--tls_key/--tls_ca, or undefined when TLS is off. */
export function loadServerTls(paths: TlsPaths, read?: ReadFile): TlsMaterial | undefined {
  const has = (s: string | undefined) => s !== undefined && s !== '';
  if (!has(paths.cert) && !has(paths.key) && !has(paths.ca)) return undefined;
  if (has(paths.ca) && !has(paths.cert)) {
    throw new TlsConfigError(
      SERVER_FLAG_NAMES.ca,
      `${SERVER_FLAG_NAMES.ca} (verify client certificates) needs ${SERVER_FLAG_NAMES.cert} and ${SERVER_FLAG_NAMES.key}: a server verifies clients only over TLS`,
    );
  }
  return loadTlsMaterial({ ...paths, names: paths.names ?? SERVER_FLAG_NAMES }, read);
}

/** Client side: STORE_TLS_CA_FILE (+ STORE_TLS_CERT_FILE/STORE_TLS_KEY_FILE for mTLS), or undefined. */
export function clientTlsPathsFromEnv(env: NodeJS.ProcessEnv = process.env): TlsPaths | undefined {
  const ca = env.STORE_TLS_CA_FILE ?? '';
  const cert = env.STORE_TLS_CERT_FILE ?? '';
  const key = env.STORE_TLS_KEY_FILE ?? '';
  if (ca === '' && cert === '' && key === '') return undefined;
  return { ca, cert, key, names: CLIENT_ENV_NAMES };
}

/** Whether `a` and `b` hold the same bytes (a reload that changed nothing is not applied). */
export function sameMaterial(a: TlsMaterial | undefined, b: TlsMaterial | undefined): boolean {
  const eq = (x?: Buffer, y?: Buffer) => (x === undefined ? y === undefined : y !== undefined && x.equals(y));
  return a === b || (a !== undefined && b !== undefined && eq(a.cert, b.cert) && eq(a.key, b.key) && eq(a.ca, b.ca));
}
