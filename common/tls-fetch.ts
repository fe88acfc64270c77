// fetch() for the control interfaces that honours the client TLS settings: with STORE_TLS_CA_FILE
// set, an http:// URL of a master or store service is called as https:// and the server's
// certificate is verified against that CA (STORE_TLS_CERT_FILE/STORE_TLS_KEY_FILE add a client
// certificate for mTLS). Without them it is the global fetch. Node 20's global fetch cannot take a
// CA (only a dispatcher of the undici copy it bundles, whose version the npm one need not match),
// so the TLS case is node:https wrapped into a standard Response: the callers keep one type.
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { Readable } from 'node:stream';
import { clientTlsPathsFromEnv, loadTlsMaterial, type TlsMaterial } from './tls-material.js';

let cached: { key: string; material: TlsMaterial | undefined } | undefined;

/** The client TLS material of the environment (read once per distinct setting), or undefined. */
export function clientTlsFromEnv(env: NodeJS.ProcessEnv = process.env): TlsMaterial | undefined {
  const paths = clientTlsPathsFromEnv(env);
  const key = JSON.stringify(paths ?? null);
  if (cached?.key !== key) cached = { key, material: paths ? loadTlsMaterial(paths) : undefined };
  return cached.material;
}

/** Error codes of a TLS client that met a server not speaking TLS (or speaking it badly). */
const NOT_TLS = new Set(['EPROTO', 'ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ECONNRESET']);

/** A TLS failure explained: what the server did and which setting fixes it. */
export class TlsConnectError extends Error {
  override readonly name = 'TlsConnectError';
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

function explain(e: NodeJS.ErrnoException, origin: string): Error {
  const code = e.code ?? '';
  if (NOT_TLS.has(code))
    return new TlsConnectError(code, `${origin} did not complete a TLS handshake (${code}): is it started with --tls_cert? (unset STORE_TLS_CA_FILE for a plain server)`, {
      cause: e,
    });
  if (code.startsWith('ERR_TLS_') || code.includes('CERT') || code.includes('SIGNATURE') || code.startsWith('ERR_SSL_')) {
    return new TlsConnectError(code, `${origin}: TLS refused: ${e.message} (${code}; the CA is STORE_TLS_CA_FILE, the client certificate STORE_TLS_CERT_FILE/STORE_TLS_KEY_FILE)`, {
      cause: e,
    });
  }
  return e;
}

/** `url` as the TLS setting wants it: http:// becomes https:// when a client CA is set. */
export function controlUrl(url: string, tls: TlsMaterial | undefined = clientTlsFromEnv()): string {
  return tls?.ca && url.startsWith('http://') ? 'https://' + url.slice('http://'.length) : url;
}

/** fetch() with the client TLS settings (see the file comment). Errors keep fetch's shape: a TypeError whose cause says why. */
export async function controlFetch(url: string, init: RequestInit = {}, tls: TlsMaterial | undefined = clientTlsFromEnv()): Promise<Response> {
  const target = controlUrl(url, tls);
  if (!tls || !target.startsWith('https://')) return fetch(target, init);
  const u = new URL(target);
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((v, k) => (headers[k] = v));
  const body =
    init.body === undefined || init.body === null ? undefined : typeof init.body === 'string' ? Buffer.from(init.body) : Buffer.from(await new Response(init.body).arrayBuffer());
  if (body) headers['content-length'] = String(body.length);
  const opts: RequestOptions = { method: init.method ?? 'GET', headers, ca: tls.ca, cert: tls.cert, key: tls.key, signal: init.signal ?? undefined, agent: false };
  return new Promise<Response>((resolve, reject) => {
    const req = httpsRequest(u, opts, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
      const status = res.statusCode ?? 0;
      const noBody = status === 204 || status === 304 || opts.method === 'HEAD';
      if (noBody) res.resume();
      resolve(new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage, headers: h }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (e.name === 'AbortError') return reject(init.signal?.reason ?? e);
      reject(new TypeError('fetch failed', { cause: explain(e, u.origin) }));
    });
    req.end(body);
  });
}
