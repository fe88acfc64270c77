// HTTP calls of the `store` CLI (the master's admin endpoints, a store service's REST API) with a
// timeout, and their failures as CLI errors: no answer -> UnreachableError (exit 3), 404 ->
// NotFoundError (exit 1), another refusal -> CliError exit 4 with the server's one-line reason.
// With STORE_TLS_CA_FILE the calls go over HTTPS (common/tls-fetch.ts).
import { AUTH_HEADER, signUrl } from '../common/cluster-secret.js';
import { CliError, ExitCode, NotFoundError, UnreachableError } from './cli-errors.js';
import { controlFetch } from '../common/tls-fetch.js';
import { TlsConfigError } from '../common/tls-material.js';

export interface HttpOptions {
  timeoutMs: number;
  method?: 'GET' | 'POST';
  /** A JSON body (POST). */
  json?: unknown;
  /** What the address is, in error messages ("master", "store service"). */
  peer: string;
  /** The cluster secret: a POST carries x-kvstore-auth signed with it. */
  secret?: Buffer;
}

/** A response that arrived (any status). */
export async function request(url: string, o: HttpOptions): Promise<Response> {
  const signal = AbortSignal.timeout(o.timeoutMs);
  const method = o.method ?? 'GET';
  const body = o.json === undefined ? undefined : JSON.stringify(o.json);
  const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
  if (o.secret !== undefined && method !== 'GET') {
    headers[AUTH_HEADER] = signUrl(o.secret, method, url, body);
  }
  try {
    return await controlFetch(url, { method, signal, headers, body });
  } catch (e) {
    if (e instanceof TlsConfigError) throw new CliError(ExitCode.USAGE, e.message, { cause: e });
    const err = e as Error & { cause?: { code?: string; message?: string } };
    const why = err.name === 'TimeoutError' ? `no answer within ${o.timeoutMs} ms` : (err.cause?.code ?? err.cause?.message ?? err.message);
    throw new UnreachableError(`cannot reach the ${o.peer} at ${new URL(url).origin}: ${why}`, { cause: e });
  }
}

/** The body of a 2xx response as text; 404 -> NotFoundError, other statuses -> exit 4. */
export async function getText(url: string, o: HttpOptions): Promise<string> {
  const res = await request(url, o);
  const body = await readBody(res, url, o);
  if (res.ok) return body;
  throw statusError(res.status, body, url, o);
}

/** Reads a body; a connection cut half-way is the peer's failure. */
export async function readBody(res: Response, url: string, o: HttpOptions): Promise<string> {
  try {
    return await res.text();
  } catch (e) {
    throw new UnreachableError(`the ${o.peer} at ${new URL(url).origin} cut its answer short: ${(e as Error).message}`, { cause: e });
  }
}

export function statusError(status: number, body: string, url: string, o: HttpOptions): CliError {
  const reason = firstLine(body) || `HTTP ${status}`;
  const where = `${o.peer} ${new URL(url).pathname}`;
  if (status === 404) return new NotFoundError(`${where}: ${reason}`);
  if (status === 503) return new UnreachableError(`${where}: ${reason} (HTTP 503)`);
  return new CliError(ExitCode.STORE_ERROR, `${where}: ${reason} (HTTP ${status})`);
}

/** The error of a {"status":"error","error":...} body, else its first line. */
function firstLine(body: string): string {
  try {
    const j = JSON.parse(body) as { error?: unknown };
    if (typeof j.error === 'string') return j.error;
  } catch {
    // not JSON: plain text
  }
  return body.split('\n')[0].trim();
}
