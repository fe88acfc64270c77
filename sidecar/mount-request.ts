// The store REST mount API's request bodies (spec section C): parsing and validation of
// /api/mount_shm, /api/mount and /api/unmount[_shm] bodies into typed requests, and the split of a
// region into segments of at most --max_segment_size. Pure: every refusal is a RestError (HTTP 400
// with {"status":"error","error":"..."}) naming the field, raised before anything is mapped.

/** A refused REST request: `status` is the HTTP status, `message` goes into the error body. */
export class RestError extends Error {
  override readonly name = 'RestError';
  constructor(
    readonly status: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const bad = (message: string): RestError => new RestError(400, message);

/** Page size: shm offsets and /api/mount sizes are multiples of it. */
export const PAGE_SIZE = 4096;
/** Most segments one request may create or name. */
export const MAX_SEGMENTS_PER_REQUEST = 1024;
/** Longest grace period accepted (one day). */
export const MAX_GRACE_SECONDS = 86_400;
const MAX_NAME = 255;
const MAX_LOCATION = 256;

export interface ShmMountRequest {
  /** The shm object's name without its leading "/". */
  name: string;
  size: number;
  offset: number;
  protocol: string;
  location: string;
}

export interface MemoryMountRequest {
  size: number;
  protocol: string;
  location: string;
}

export interface UnmountRequest {
  /** Distinct ids, in request order. */
  segmentIds: string[];
  graceSeconds: number;
}

function object(body: unknown, allowed: readonly string[], what: string): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw bad(`${what}: the body must be a JSON object`);
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) throw bad(`${what}: unknown field(s) ${unknown.map((k) => JSON.stringify(k)).join(', ')} (accepted: ${allowed.join(', ')})`);
  return body as Record<string, unknown>;
}

function positiveSize(v: unknown, what: string): number {
  if (v === undefined || v === null) throw bad(`${what}: size is required (a positive integer number of bytes)`);
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) throw bad(`${what}: size must be a positive integer number of bytes, got ${JSON.stringify(v)}`);
  return v;
}

function optionalString(v: unknown, field: string, what: string, max: number): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw bad(`${what}: ${field} must be a string, got ${JSON.stringify(v)}`);
  if (v.length > max) throw bad(`${what}: ${field} is longer than ${max} characters`);
  return v;
}

/** protocol: absent means the service's own; anything else must be it (rdma does not exist here). */
function protocolOf(v: unknown, serviceProtocol: string, what: string): string {
  const p = optionalString(v, 'protocol', what, 32);
  if (p === undefined || p === '' || p === serviceProtocol) return serviceProtocol;
  if (p === 'rdma') throw bad(`${what}: protocol "rdma": RDMA is not available in this build (this service uses ${serviceProtocol})`);
  throw bad(`${what}: protocol must be "${serviceProtocol}" (this service's), got ${JSON.stringify(p)}`);
}

/** POST /api/mount_shm {name, size, offset?, protocol?, location?}. */
export function parseMountShm(body: unknown, serviceProtocol: string): ShmMountRequest {
  const what = 'mount_shm';
  const b = object(body, ['name', 'size', 'offset', 'protocol', 'location'], what);
  if (typeof b.name !== 'string' || b.name.length === 0) throw bad(`${what}: name is required (the shared memory object's name, e.g. "/kv-pool")`);
  const name = b.name.startsWith('/') ? b.name.slice(1) : b.name;
  if (name.length === 0) throw bad(`${what}: name "/" names no object`);
  if (name.includes('/') || name.includes('\\')) throw bad(`${what}: name ${JSON.stringify(b.name)} holds a path separator; only a leading "/" is accepted`);
  if (name === '.' || name === '..' || name.includes('\0')) throw bad(`${what}: name ${JSON.stringify(b.name)} is not a valid shared memory object name`);
  if (name.length > MAX_NAME) throw bad(`${what}: name is longer than ${MAX_NAME} characters`);
  const size = positiveSize(b.size, what);
  let offset = 0;
  if (b.offset !== undefined && b.offset !== null) {
    if (typeof b.offset !== 'number' || !Number.isSafeInteger(b.offset) || b.offset < 0) {
      throw bad(`${what}: offset must be a non-negative integer number of bytes, got ${JSON.stringify(b.offset)}`);
    }
    if (b.offset % PAGE_SIZE !== 0) throw bad(`${what}: offset ${b.offset} is not a multiple of the ${PAGE_SIZE}-byte page size`);
    offset = b.offset;
  }
  if (!Number.isSafeInteger(offset + size)) throw bad(`${what}: offset + size is too large`);
  return { name, size, offset, protocol: protocolOf(b.protocol, serviceProtocol, what), location: optionalString(b.location, 'location', what, MAX_LOCATION) ?? '' };
}

/** POST /api/mount {size, protocol?, location?}. */
export function parseMountMemory(body: unknown, serviceProtocol: string): MemoryMountRequest {
  const what = 'mount';
  const b = object(body, ['size', 'protocol', 'location'], what);
  return {
    size: positiveSize(b.size, what),
    protocol: protocolOf(b.protocol, serviceProtocol, what),
    location: optionalString(b.location, 'location', what, MAX_LOCATION) ?? '',
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** POST /api/unmount[_shm] {segment_ids: [..] | "..", grace_period_seconds?}. */
export function parseUnmount(body: unknown, what: string): UnmountRequest {
  const b = object(body, ['segment_ids', 'grace_period_seconds'], what);
  const raw = b.segment_ids;
  if (raw === undefined || raw === null) throw bad(`${what}: segment_ids is required (an array of segment id strings, or one string)`);
  const list = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(list) || list.length === 0) throw bad(`${what}: segment_ids must be a non-empty array of strings or one string`);
  if (list.length > MAX_SEGMENTS_PER_REQUEST) throw bad(`${what}: at most ${MAX_SEGMENTS_PER_REQUEST} segment_ids per request`);
  const ids: string[] = [];
  for (const id of list) {
    if (typeof id !== 'string' || !UUID.test(id)) throw bad(`${what}: segment id ${JSON.stringify(id)} is not a UUID string`);
    const norm = id.toLowerCase();
    if (!ids.includes(norm)) ids.push(norm);
  }
  let graceSeconds = 0;
  const g = b.grace_period_seconds;
  if (g !== undefined && g !== null) {
    if (typeof g !== 'number' || !Number.isFinite(g) || g < 0 || g > MAX_GRACE_SECONDS) {
      throw bad(`${what}: grace_period_seconds must be a number of seconds from 0 to ${MAX_GRACE_SECONDS}, got ${JSON.stringify(g)}`);
    }
    graceSeconds = g;
  }
  return { segmentIds: ids, graceSeconds };
}

export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/**
 * Sizes of the segments a region of `size` bytes is split into: as many full `maxSegmentSize`
 * pieces as fit, then the rest. Refuses more than MAX_SEGMENTS_PER_REQUEST pieces.
 */
export function splitRegion(size: number, maxSegmentSize: number, what: string): number[] {
  const count = Math.ceil(size / maxSegmentSize);
  if (count > MAX_SEGMENTS_PER_REQUEST) {
    throw bad(`${what}: ${size} bytes would make ${count} segments of at most ${maxSegmentSize} bytes (--max_segment_size); at most ${MAX_SEGMENTS_PER_REQUEST} per request`);
  }
  const pieces: number[] = [];
  for (let left = size; left > 0; left -= maxSegmentSize) pieces.push(Math.min(left, maxSegmentSize));
  return pieces;
}
