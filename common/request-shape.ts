// A cheap pre-decode check of a request's top-level protobuf fields: how many elements each
// field would make the decoder build. Decoding is where a hostile request costs the master
// (tens of millions of empty sub-requests in 64 MB), so the tags are walked first, bodies
// skipped, and a request whose repeated field exceeds the element cap is refused before any
// object exists. Malformed wire is left to the decoder, which reports it.
import { Reader, type MessageCodec } from './proto-codec.js';

/** The most elements one top-level field of a request may carry (keys, sub-requests, slice lengths). */
export const MAX_REQUEST_ELEMENTS = 65_536;

/** How a packed repeated scalar field stores its elements: varints, or fixed 8 / 4 bytes each. */
export type PackedEncoding = 'varint' | 'fixed64' | 'fixed32';

/** Field number -> encoding, for the repeated scalar fields of a message (those that may arrive packed). */
export type PackedFields = ReadonlyMap<number, PackedEncoding>;

const NO_PACKED: PackedFields = new Map();

/** The repeated scalar (packable) fields of a message type, from its compiled codec. */
export function packedFieldsOf(codec: MessageCodec): PackedFields {
  const out = new Map<number, PackedEncoding>();
  for (const f of codec.fields) {
    if (!f.repeated || f.kind === 'string' || f.kind === 'bytes' || f.kind === 'message' || f.kind === 'map') continue;
    out.set(f.id, f.kind === 'double' ? 'fixed64' : f.kind === 'float' ? 'fixed32' : 'varint');
  }
  return out;
}

/**
 * Returns a one-line problem when a top-level field of `payload` would hold more than
 * `maxRepeated` elements: a field occurring more often than that, or a packed scalar field
 * (per `packed`) holding more values. Also refuses more than `maxRepeated` distinct field
 * numbers (no schema has that many; it bounds the bookkeeping). Returns undefined when the
 * shape is fine or the wire is malformed (the decoder then reports it).
 */
export function requestShapeProblem(payload: Uint8Array, maxRepeated: number, packed: PackedFields = NO_PACKED): string | undefined {
  // N elements take at least N bytes (one per packed varint, two per tag + value), so a payload
  // of at most maxRepeated bytes cannot exceed the cap: the common small request skips the walk.
  const end = payload.length;
  if (end <= maxRepeated) return undefined;
  const counts = new Map<number, number>();
  const r = new Reader(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength), 0, end);
  try {
    return walk(r, payload, counts, maxRepeated, packed);
  } catch (e) {
    if (e instanceof RangeError) return undefined; // truncated or overlong varint: the decoder's call
    throw e;
  }
}

function walk(r: Reader, payload: Uint8Array, counts: Map<number, number>, maxRepeated: number, packed: PackedFields): string | undefined {
  const end = r.end;
  while (r.pos < end) {
    const key = r.varint();
    if (r.hi !== 0) return undefined;
    const id = Math.floor(key / 8);
    const wire = key % 8;
    let elements = 1;
    if (wire === 0) {
      r.varint();
    } else if (wire === 1) {
      r.pos += 8;
    } else if (wire === 5) {
      r.pos += 4;
    } else if (wire === 2) {
      const len = r.varint();
      if (r.hi !== 0) return undefined;
      const pos = r.pos;
      const stop = pos + len;
      if (stop > end) return undefined;
      const enc = packed.get(id);
      if (enc === 'varint') {
        elements = 0;
        for (let i = pos; i < stop; i++) if ((payload[i] & 0x80) === 0) elements++;
      } else if (enc === 'fixed64') elements = Math.floor(len / 8);
      else if (enc === 'fixed32') elements = Math.floor(len / 4);
      r.pos = stop;
    } else {
      return undefined; // groups (3, 4) and wire types 6, 7: the decoder's call
    }
    if (r.pos > end) return undefined;
    const n = (counts.get(id) ?? 0) + elements;
    if (n > maxRepeated) return `field ${id} holds more than ${maxRepeated} elements (request of ${end} bytes)`;
    counts.set(id, n);
    if (counts.size > maxRepeated) return `more than ${maxRepeated} distinct fields (request of ${end} bytes)`;
  }
  return undefined;
}
