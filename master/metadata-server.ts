// The embedded HTTP metadata server (--enable_http_metadata_server): a key -> bytes store at
// /metadata?key=K where transfer engines publish "segment name -> endpoint" records.
// GET returns the bytes (404 if absent), PUT stores the body, DELETE removes (404 if absent).
// Single node, in memory: no HA.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { MALFORMED_TARGET, requestUrl } from '../common/request-url.js';

const TEXT = 'text/plain; charset=utf-8';
/** Records are small endpoint descriptions; refuse anything absurd rather than buffer it. */
export const MAX_METADATA_BYTES = 16 * 1024 * 1024;
/** All records together (keys and values): the store lives in the master's heap. */
export const MAX_METADATA_TOTAL_BYTES = 256 * 1024 * 1024;

function send(res: ServerResponse, status: number, body: string | Buffer, type = TEXT): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

export class MetadataStore {
  private readonly records = new Map<string, Buffer>();
  /** Bytes held: key lengths (UTF-16 units) plus value lengths. */
  bytes = 0;

  constructor(readonly maxBytes = MAX_METADATA_TOTAL_BYTES) {}

  get(key: string): Buffer | undefined {
    return this.records.get(key);
  }
  /** Stores the record; false (nothing changed) when the store would grow past maxBytes. */
  put(key: string, value: Buffer): boolean {
    const old = this.records.get(key);
    const bytes = this.bytes - (old ? key.length + old.length : 0) + key.length + value.length;
    if (bytes > this.maxBytes && bytes > this.bytes) return false;
    this.records.set(key, value);
    this.bytes = bytes;
    return true;
  }
  delete(key: string): boolean {
    const old = this.records.get(key);
    if (!old) return false;
    this.records.delete(key);
    this.bytes -= key.length + old.length;
    return true;
  }
  get size(): number {
    return this.records.size;
  }
}

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > MAX_METADATA_BYTES) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, n)));
    req.on('error', reject);
  });
}

export function createMetadataServer(store: MetadataStore): Server {
  return createServer((req, res) => {
    const url = requestUrl(req);
    if (url === null) return send(res, 400, MALFORMED_TARGET);
    if (url.pathname !== '/metadata') return send(res, 404, `no such endpoint: ${url.pathname} (use /metadata?key=...)\n`);
    const key = url.searchParams.get('key');
    if (key === null || key === '') return send(res, 400, 'missing query parameter "key" (/metadata?key=...)\n');
    switch (req.method) {
      case 'GET': {
        const v = store.get(key);
        return v ? send(res, 200, v, 'application/octet-stream') : send(res, 404, `metadata key not found: ${key}\n`);
      }
      case 'PUT':
      case 'POST':
        readBody(req).then(
          (body) => {
            if (!body) return send(res, 413, `metadata value larger than ${MAX_METADATA_BYTES} bytes\n`);
            if (!store.put(key, body)) return send(res, 507, `metadata store full: ${store.bytes} of ${store.maxBytes} bytes held; delete records first\n`);
            send(res, 200, 'metadata updated\n');
          },
          (e: Error) => send(res, 400, `cannot read the request body: ${e.message}\n`),
        );
        return;
      case 'DELETE':
        return store.delete(key) ? send(res, 200, 'metadata deleted\n') : send(res, 404, `metadata key not found: ${key}\n`);
      default:
        res.setHeader('Allow', 'GET, PUT, POST, DELETE');
        return send(res, 405, `method ${req.method} not allowed on /metadata\n`);
    }
  });
}
