// The store service's HTTP routes beyond /health and /segments: the REST mount API (spec section
// C: POST /api/mount_shm, /api/unmount_shm, /api/mount, /api/unmount with JSON bodies) and
// GET /metrics (client metrics, Prometheus text 0.0.4). Every refusal is a JSON body
// {"status":"error","error":"..."}: 400 for bad input (wrong Content-Type, malformed JSON,
// unknown fields, bad values, unknown ids, a body over MAX_BODY_BYTES), 405 for another method,
// 503 while shutting down or when the master is unreachable, 500 for anything unexpected. With a
// cluster secret the mount API needs a valid x-kvstore-auth header (common/cluster-secret.ts):
// 401 otherwise, before anything is mounted or unmounted. GET /metrics stays open.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AUTH_HEADER, NonceCache, verifyCall } from '../common/cluster-secret.js';
import { parseMountMemory, parseMountShm, parseUnmount, RestError } from './mount-request.js';
import type { SegmentMounts } from './segment-mounts.js';

/** Largest request body read (the largest valid one, 1024 segment ids, is ~45 KB). */
export const MAX_BODY_BYTES = 64 * 1024;

/** What a metrics endpoint needs: undefined when client metrics are off (MC_STORE_CLIENT_METRIC=0). */
export interface MetricsSource {
  text(): Promise<string>;
  readonly contentType: string;
}

export interface RestApiOptions {
  mounts: SegmentMounts;
  /** The service's transfer protocol: the default and only accepted `protocol` field. */
  protocol: string;
  metrics: MetricsSource | undefined;
  /** True once SIGTERM/SIGINT arrived: the mount API answers 503. */
  stopping: () => boolean;
  /** The cluster secret mount calls must prove (undefined: none asked, --allow_unauthenticated). */
  auth?: { secret: Buffer; refused: (req: IncomingMessage, why: string) => void };
}

/** Nonces of the mount API's per-call headers (one store service per process). */
const nonces = new NonceCache();

const API = new Set(['/api/mount_shm', '/api/unmount_shm', '/api/mount', '/api/unmount']);

function sendJson(res: ServerResponse, status: number, body: unknown, close = false): void {
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
  if (close) headers.connection = 'close';
  res.writeHead(status, headers).end(JSON.stringify(body));
}

function sendError(res: ServerResponse, status: number, message: string, extra: Record<string, string> = {}, close = false): void {
  for (const [k, v] of Object.entries(extra)) res.setHeader(k, v);
  sendJson(res, status, { status: 'error', error: message }, close);
}

/** True for application/json, with or without parameters (charset=utf-8), any case. */
export function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(';')[0].trim().toLowerCase() === 'application/json';
}

/** The request body as text; rejects with a 400 RestError past MAX_BODY_BYTES (reading stops). */
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
      reject(new RestError(400, `the request body (${declared} bytes) is larger than ${MAX_BODY_BYTES} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (c: Buffer) => {
      if (failed) return;
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        failed = true;
        reject(new RestError(400, `the request body is larger than ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (!failed) resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', (e) => {
      if (!failed) reject(new RestError(400, `reading the request body failed: ${e.message}`));
      failed = true;
    });
  });
}

/**
 * Serves the mount API and /metrics; returns false for any other path (the caller answers it).
 */
export function handleRestRequest(req: IncomingMessage, res: ServerResponse, pathname: string, o: RestApiOptions): boolean {
  if (pathname === '/metrics') {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain' }).end('GET /metrics');
    } else if (!o.metrics) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('client metrics are off (MC_STORE_CLIENT_METRIC=0)\n');
    } else {
      const m = o.metrics;
      m.text().then(
        (text) => res.writeHead(200, { 'content-type': m.contentType }).end(req.method === 'HEAD' ? undefined : text),
        (e: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics: ${e.message}`),
      );
    }
    return true;
  }
  if (!API.has(pathname)) return false;
  if (req.method !== 'POST') {
    sendError(res, 405, `${pathname} takes POST with Content-Type: application/json`, { allow: 'POST' });
    req.resume();
    return true;
  }
  serveApi(req, res, pathname, o).catch((e: unknown) => {
    const err = e instanceof RestError ? e : new RestError(500, `${pathname}: ${(e as Error).message}`);
    // A body refused unread leaves bytes on the connection: close it after the answer.
    const close = !req.complete;
    if (!res.headersSent) sendError(res, err.status, err.message, {}, close);
    if (close) req.resume();
  });
  return true;
}

/** Throws the 401 of a mount call without the cluster secret (nothing when it has it). */
function unauthenticated(req: IncomingMessage, auth: NonNullable<RestApiOptions['auth']>, body: string | undefined): void {
  const h = req.headers[AUTH_HEADER];
  const why = verifyCall(auth.secret, nonces, typeof h === 'string' ? h : undefined, req.method ?? '', req.url ?? '', body);
  if (why === undefined) return;
  auth.refused(req, why);
  throw new RestError(401, `UNAUTHENTICATED: ${why}`);
}

async function serveApi(req: IncomingMessage, res: ServerResponse, pathname: string, o: RestApiOptions): Promise<void> {
  if (o.auth && req.headers[AUTH_HEADER] === undefined) unauthenticated(req, o.auth, undefined);
  if (!isJsonContentType(req.headers['content-type'])) {
    throw new RestError(400, `${pathname}: Content-Type must be application/json, got ${JSON.stringify(req.headers['content-type'] ?? '')}`);
  }
  const text = await readBody(req);
  if (o.auth) unauthenticated(req, o.auth, text);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new RestError(400, `${pathname}: malformed JSON: ${(e as Error).message}`);
  }
  if (o.stopping()) throw new RestError(503, `${pathname}: the store service is shutting down`);
  switch (pathname) {
    case '/api/mount_shm': {
      const r = await o.mounts.mountShm(parseMountShm(body, o.protocol));
      return sendJson(res, 200, { status: 'success', segment_ids: r.segmentIds });
    }
    case '/api/mount': {
      const r = await o.mounts.mountMemory(parseMountMemory(body, o.protocol));
      return sendJson(res, 200, { status: 'success', segment_ids: r.segmentIds, allocated_size: r.allocatedSize });
    }
    case '/api/unmount_shm':
      await o.mounts.unmount('shm', parseUnmount(body, 'unmount_shm'));
      return sendJson(res, 200, { status: 'success' });
    case '/api/unmount':
      await o.mounts.unmount('memory', parseUnmount(body, 'unmount'));
      return sendJson(res, 200, { status: 'success' });
  }
}
