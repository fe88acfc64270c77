// The embedded HTTP metadata server (--enable_http_metadata_server): a key -> bytes store at
// /metadata?key=K where transfer engines publish "segment name -> endpoint" records.
// GET returns the bytes (404 if absent), PUT stores the body, DELETE removes (404 if absent).
// Single node, in memory: no HA. With a cluster secret, PUT/POST/DELETE must carry a valid
// x-kvstore-auth header (common/cluster-secret.ts; refused: 401 with a JSON error, the record
// unchanged); GET stays open. Each
// writer (the peer's IP address: the kernel names it, a writer cannot choose it as it could a key
// prefix) holds at most a quota of records and bytes; one that would pass it is answered 429, and
// the store as a whole 507 when full. A few PUTs from one address cannot fill the store and keep
// other hosts' store services from publishing. Processes on one host share its address, and so
// its quota: only the cluster secret tells them apart.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { AUTH_HEADER, NonceCache, verifyCall } from '../common/cluster-secret.js';
import { MALFORMED_TARGET, requestUrl } from '../common/request-url.js';

const TEXT = 'text/plain; charset=utf-8';
/** Records are small endpoint descriptions (a few hundred bytes); refuse anything absurd rather than buffer it. */
export const MAX_METADATA_BYTES = 1024 * 1024;
/** All records together (keys and values): the store lives in the master's heap. */
export const MAX_METADATA_TOTAL_BYTES = 256 * 1024 * 1024;
/** One writer's (IP address's) share: 16 of them at most fill the store. */
export const MAX_METADATA_WRITER_BYTES = 16 * 1024 * 1024;
/** One writer's records (bounds empty ones too): a host has a few store services of a few dozen segments. */
export const MAX_METADATA_WRITER_RECORDS = 4096;

export interface MetadataLimits {
  maxBytes: number;
  writerBytes: number;
  writerRecords: number;
}

export const DEFAULT_METADATA_LIMITS: MetadataLimits = {
  maxBytes: MAX_METADATA_TOTAL_BYTES,
  writerBytes: MAX_METADATA_WRITER_BYTES,
  writerRecords: MAX_METADATA_WRITER_RECORDS,
};

/** What put() did: stored, or refused for the writer's quota or the whole store (nothing changed). */
export type PutOutcome = 'ok' | 'writer_quota' | 'full';

function send(res: ServerResponse, status: number, body: string | Buffer, type = TEXT): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

interface MetadataRecord {
  value: Buffer;
  /** Who stored it (charged for it): the writer of its last PUT. */
  writer: string;
}

interface WriterUsage {
  bytes: number;
  records: number;
}

const cost = (key: string, value: Buffer): number => key.length + value.length;

export class MetadataStore {
  private readonly records = new Map<string, MetadataRecord>();
  private readonly writers = new Map<string, WriterUsage>();
  /** Bytes held: key lengths (UTF-16 units) plus value lengths. */
  bytes = 0;
  readonly limits: MetadataLimits;

  constructor(limits: Partial<MetadataLimits> = {}) {
    this.limits = { ...DEFAULT_METADATA_LIMITS, ...limits };
  }

  get maxBytes(): number {
    return this.limits.maxBytes;
  }

  get(key: string): Buffer | undefined {
    return this.records.get(key)?.value;
  }

  /** What `writer` holds now. */
  usage(writer: string): WriterUsage {
    return { ...(this.writers.get(writer) ?? { bytes: 0, records: 0 }) };
  }

  /**
   * Stores the record, charged to `writer` (a record another writer stored moves to this one).
   * Refused, with nothing changed, when it would grow the writer past its quota or the store past
   * maxBytes; a record that does not grow them always fits.
   */
  put(key: string, value: Buffer, writer = ''): PutOutcome {
    const old = this.records.get(key);
    const oldCost = old ? cost(key, old.value) : 0;
    const newCost = cost(key, value);
    const mine = this.writers.get(writer) ?? { bytes: 0, records: 0 };
    const kept = old?.writer === writer ? oldCost : 0;
    const writerBytes = mine.bytes - kept + newCost;
    const writerRecords = mine.records + (old?.writer === writer ? 0 : 1);
    if ((writerBytes > this.limits.writerBytes && writerBytes > mine.bytes) || writerRecords > this.limits.writerRecords) return 'writer_quota';
    const bytes = this.bytes - oldCost + newCost;
    if (bytes > this.limits.maxBytes && bytes > this.bytes) return 'full';
    if (old) this.release(old.writer, oldCost);
    const after = this.writers.get(writer) ?? { bytes: 0, records: 0 };
    after.bytes += newCost;
    after.records += 1;
    this.writers.set(writer, after);
    this.records.set(key, { value, writer });
    this.bytes = bytes;
    return 'ok';
  }

  delete(key: string): boolean {
    const old = this.records.get(key);
    if (!old) return false;
    this.records.delete(key);
    const c = cost(key, old.value);
    this.release(old.writer, c);
    this.bytes -= c;
    return true;
  }

  get size(): number {
    return this.records.size;
  }

  private release(writer: string, bytes: number): void {
    const u = this.writers.get(writer);
    if (!u) return;
    u.bytes -= bytes;
    u.records -= 1;
    if (u.records === 0) this.writers.delete(writer);
  }
}

/** The writer a request is charged to: its peer's IP address (IPv4-mapped IPv6 as plain IPv4). */
export function writerOf(req: IncomingMessage): string {
  const a = req.socket.remoteAddress ?? '';
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/**
 * The request body, or undefined when it passes MAX_METADATA_BYTES: the rest is then read and
 * dropped (memory stays bounded), so the 413 reply reaches a client still sending (destroying the
 * socket instead cut the reply off: the client saw a hang-up). Node's requestTimeout bounds a
 * body that never ends.
 */
function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n <= MAX_METADATA_BYTES) chunks.push(c);
      else chunks.length = 0;
    });
    req.on('end', () => resolve(n > MAX_METADATA_BYTES ? undefined : Buffer.concat(chunks, n)));
    req.on('error', reject);
  });
}

/** The cluster secret writes must prove, and where refusals go (counted and logged by the caller). */
export interface MetadataAuth {
  secret: Buffer;
  refused: (req: IncomingMessage, why: string) => void;
}

function refuse(res: ServerResponse, why: string): void {
  send(res, 401, JSON.stringify({ status: 'error', error: `UNAUTHENTICATED: ${why}` }) + '\n', 'application/json; charset=utf-8');
}

export function createMetadataServer(store: MetadataStore, auth?: MetadataAuth): Server {
  const nonces = new NonceCache();
  /** The refusal of a write, or undefined when it carries the secret (or none is needed). */
  const problem = (req: IncomingMessage, body: Buffer | undefined): string | undefined => {
    if (!auth) return undefined;
    const h = req.headers[AUTH_HEADER];
    const why = verifyCall(auth.secret, nonces, typeof h === 'string' ? h : undefined, req.method ?? '', req.url ?? '', body);
    if (why !== undefined) auth.refused(req, why);
    return why;
  };
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
        // without the header at all, refused before the body is read
        if (auth && req.headers[AUTH_HEADER] === undefined) {
          refuse(res, problem(req, undefined)!);
          req.resume();
          return;
        }
        readBody(req).then(
          (body) => {
            if (!body) return send(res, 413, `metadata value larger than ${MAX_METADATA_BYTES} bytes\n`);
            const why = problem(req, body);
            if (why !== undefined) return refuse(res, why);
            const writer = writerOf(req);
            const outcome = store.put(key, body, writer);
            if (outcome === 'writer_quota') {
              const u = store.usage(writer);
              const l = store.limits;
              return send(
                res,
                429,
                `metadata quota of ${writer} reached: it holds ${u.records} record(s), ${u.bytes} bytes (at most ${l.writerRecords} records, ${l.writerBytes} bytes per writer address); delete its records first\n`,
              );
            }
            if (outcome === 'full') return send(res, 507, `metadata store full: ${store.bytes} of ${store.maxBytes} bytes held; delete records first\n`);
            send(res, 200, 'metadata updated\n');
          },
          (e: Error) => send(res, 400, `cannot read the request body: ${e.message}\n`),
        );
        return;
      case 'DELETE': {
        const why = problem(req, undefined);
        if (why !== undefined) {
          req.resume();
          return refuse(res, why);
        }
        return store.delete(key) ? send(res, 200, 'metadata deleted\n') : send(res, 404, `metadata key not found: ${key}\n`);
      }
      default:
        res.setHeader('Allow', 'GET, PUT, POST, DELETE');
        return send(res, 405, `method ${req.method} not allowed on /metadata\n`);
    }
  });
}
