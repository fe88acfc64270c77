// A compiled protobuf (proto3) codec for the master messages, used by the fast channel on both
// ends. It is built from the protobufjs reflection of proto/store_master.proto and writes the
// same wire bytes, but encodes in one pass into one buffer and decodes straight into plain
// objects of the generated __Output shape (every field present, 64-bit integers as numbers),
// several times faster than protobufjs' encode + decode + toObject on the batch replies.
// Wrong-typed fields are refused with a TypeError naming the field, never silently zeroed.
// A string field whose bytes are not UTF-8 never decodes to a valid string (see utf8Text).
import { isUtf8 } from 'node:buffer';
import protobuf from 'protobufjs';

type ScalarKind = 'int32' | 'sint32' | 'uint32' | 'int64' | 'uint64' | 'bool' | 'string' | 'bytes' | 'enum' | 'double' | 'float';

interface FieldPlan {
  id: number;
  name: string;
  kind: ScalarKind | 'message' | 'map';
  repeated: boolean;
  /** message field or map value */
  sub?: MessageCodec;
  /** map key kind */
  keyKind?: ScalarKind;
  /** map value kind when scalar */
  valueKind?: ScalarKind | 'message';
  tagBytes: number[];
}

const WIRE_VARINT = 0;
const WIRE_64 = 1;
const WIRE_LEN = 2;
const WIRE_32 = 5;

function wireType(kind: string): number {
  if (kind === 'double') return WIRE_64;
  if (kind === 'float') return WIRE_32;
  if (kind === 'string' || kind === 'bytes' || kind === 'message' || kind === 'map') return WIRE_LEN;
  return WIRE_VARINT;
}

/** The varint encoding of a non-negative safe integer, byte by byte (for pre-encoded tags): Writer.varint's bytes. */
export function varintBytes(v: number): number[] {
  const w = new Writer(10);
  w.varint(v);
  return Array.from(w.buf.subarray(0, w.pos));
}

/** Bytes of the varint of a non-negative safe integer. */
function varintLength(v: number): number {
  let n = 1;
  for (; v >= 0x80; n++) v = Math.floor(v / 128);
  return n;
}

// --- writer: one growable scratch buffer, reused across encodes ---

/**
 * A value that writes its own message body (no tag, no length prefix) and names the message type
 * it stands for. Lets a producer that already holds compact state (the master's replica lists)
 * skip building the plain objects only to have them read back field by field. Its bytes must be
 * exactly what the generated encoder writes for the equivalent plain object.
 */
export const WIRE_BODY = Symbol('wireBody');
export const WIRE_TYPE = Symbol('wireType');
export interface SelfEncoding {
  /** Name of the message type, e.g. "GetReplicaListResponse". */
  readonly [WIRE_TYPE]: string;
  [WIRE_BODY](w: Writer): void;
}

/**
 * Makes every instance of `cls` a SelfEncoding message of `type` whose body the method `body`
 * writes: for classes whose module must not know the wire format (the master core's replies,
 * given theirs by master/replica-wire.ts). Set on the prototype, so an instance carries no field
 * for it; `body` is the method itself (no wrapper), one function per class, as a class's own
 * method would be.
 */
export function encodeInstancesAs<T extends object>(cls: abstract new (...args: never[]) => T, type: string, body: (this: T, w: Writer) => void): void {
  Object.defineProperty(cls.prototype, WIRE_TYPE, { value: type, configurable: true });
  Object.defineProperty(cls.prototype, WIRE_BODY, { value: body, configurable: true });
}

export class Writer {
  buf: Buffer;
  pos = 0;

  constructor(size = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  tag(bytes: number[]): void {
    this.ensure(bytes.length);
    for (let i = 0; i < bytes.length; i++) this.buf[this.pos++] = bytes[i];
  }

  /** Non-negative integer up to 2^53. */
  varint(v: number): void {
    this.ensure(10);
    const b = this.buf;
    while (v >= 0x80) {
      b[this.pos++] = (v & 0x7f) | 0x80;
      v = v >= 0x80000000 ? Math.floor(v / 128) : v >>> 7;
    }
    b[this.pos++] = v;
  }

  /** A negative int32/int64 as its 10-byte two's-complement varint. */
  negative(v: number): void {
    if (v >= -0x80000000) {
      // high word all ones: 4 groups of the low word, a mixed byte, then the ones
      this.ensure(10);
      const b = this.buf;
      let lo = v >>> 0;
      for (let i = 0; i < 4; i++) {
        b[this.pos++] = (lo & 0x7f) | 0x80;
        lo >>>= 7;
      }
      b[this.pos++] = lo | 0x70 | 0x80;
      b[this.pos++] = 0xff;
      b[this.pos++] = 0xff;
      b[this.pos++] = 0xff;
      b[this.pos++] = 0xff;
      b[this.pos++] = 0x01;
      return;
    }
    let big = BigInt.asUintN(64, BigInt(v));
    this.ensure(10);
    while (big >= 0x80n) {
      this.buf[this.pos++] = Number(big & 0x7fn) | 0x80;
      big >>= 7n;
    }
    this.buf[this.pos++] = Number(big);
  }

  string(s: string): void {
    const n = s.length;
    if (n < 43) {
      // at most 126 UTF-8 bytes: a one-byte length prefix, ASCII copied by hand
      this.ensure(1 + n * 3);
      const b = this.buf;
      const start = this.pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[start + i] = c;
      }
      if (i < n && !s.isWellFormed()) throw illFormed();
      const len = i === n ? n : b.write(s, start, 'utf8');
      b[this.pos] = len;
      this.pos = start + len;
      return;
    }
    if (!s.isWellFormed()) throw illFormed(); // O(1) for one-byte strings
    const len = Buffer.byteLength(s);
    this.varint(len);
    this.ensure(len);
    this.buf.write(s, this.pos, 'utf8');
    this.pos += len;
  }

  /** One byte (a one-byte tag or a small varint). */
  byte(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  /** Bytes already in wire form (pre-encoded fields), copied by hand: they are short. */
  raw(v: Uint8Array): void {
    const n = v.length;
    this.ensure(n);
    const b = this.buf;
    const at = this.pos;
    for (let i = 0; i < n; i++) b[at + i] = v[i]!;
    this.pos = at + n;
  }

  bytes(v: Uint8Array): void {
    this.varint(v.length);
    this.ensure(v.length);
    this.buf.set(v, this.pos);
    this.pos += v.length;
  }

  /** Reserves a one-byte length prefix; returns the body start. */
  beginLen(): number {
    this.ensure(1);
    return ++this.pos;
  }

  /** Writes the length of the body begun at `start`, moving it when the prefix needs more bytes. */
  endLen(start: number): void {
    const len = this.pos - start;
    if (len < 0x80) {
      this.buf[start - 1] = len;
      return;
    }
    const extra = varintLength(len) - 1;
    this.ensure(extra);
    this.buf.copyWithin(start + extra, start, this.pos);
    const end = this.pos + extra;
    this.pos = start - 1; // the prefix fits where it was reserved plus the room just made
    this.varint(len);
    this.pos = end;
  }
}

// --- reader ---

/** Short ASCII strings decoded recently, by a hash of their bytes (see Reader.string). */
const INTERN_MAX_BYTES = 64;
const INTERN_MASK = 1023;
const internTable: string[] = new Array<string>(INTERN_MASK + 1).fill('');
/**
 * asciiOfLength[n](b, s): the n bytes at b[s..] (all ASCII) as a string, through one
 * String.fromCharCode call with n explicit arguments: about a third of the cost of the native
 * latin1Slice call for short strings. Built from numbers only.
 */
const asciiOfLength = Array.from(
  { length: INTERN_MAX_BYTES + 1 },
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- measured above; built from numbers only
  (_, n) => new Function('b', 's', `return String.fromCharCode(${Array.from({ length: n }, (_, i) => `b[s + ${i}]`).join(', ')});`) as (b: Buffer, s: number) => string,
);

/** The n bytes at b[start..] as a string; they must all be ASCII and n at most 64. */
export function asciiString(b: Buffer, start: number, n: number): string {
  return asciiOfLength[n](b, start);
}

declare global {
  interface String {
    /** ES2024; in Node 20. */
    isWellFormed(): boolean;
  }
}

/**
 * A string with an unpaired UTF-16 surrogate has no UTF-8 form: Buffer's encoder would write
 * U+FFFD in its place, so "a\ud800" and "a\udfff" would both arrive as "a\ufffd". Refused instead.
 */
function illFormed(): TypeError {
  return new TypeError('a string field holds an unpaired UTF-16 surrogate, which has no UTF-8 form (not Unicode text)');
}

/**
 * The string of the UTF-8 bytes b[start..stop). Bytes that are not UTF-8 must not pass for a
 * valid key: Buffer's decoder replaces each malformed sequence with U+FFFD, so "a\xff" and
 * "a\xfe" would both become "a\ufffd", one key. When the bytes are not UTF-8 (checked only if
 * the decoded string holds a U+FFFD at all, which well-formed ASCII never does), every U+FFFD
 * becomes the unpaired surrogate U+DCFF instead: the string is not well-formed Unicode, so the
 * key rule (common/key-rules.ts) refuses it with INVALID_KEY.
 */
export function utf8Text(b: Buffer, start: number, stop: number): string {
  const s = b.toString('utf8', start, stop);
  if (s.indexOf('\ufffd') < 0 || isUtf8(b.subarray(start, stop))) return s;
  return s.replace(/\ufffd/g, '\udcff');
}

export class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  /** Varint as [low 32 bits, high 32 bits]; `hi` kept in this.hi to avoid allocating. */
  hi = 0;
  varint(): number {
    const b = this.buf;
    let lo = 0;
    let hi = 0;
    let shift = 0;
    let byte: number;
    // low 28 bits
    for (; shift < 28; shift += 7) {
      if (this.pos >= this.end) throw new RangeError('truncated varint');
      byte = b[this.pos++];
      lo |= (byte & 0x7f) << shift;
      if (byte < 0x80) {
        this.hi = 0;
        return lo >>> 0;
      }
    }
    if (this.pos >= this.end) throw new RangeError('truncated varint');
    byte = b[this.pos++];
    lo |= (byte & 0x0f) << 28;
    hi = (byte & 0x7f) >> 4;
    if (byte >= 0x80) {
      for (shift = 3; shift < 32; shift += 7) {
        if (this.pos >= this.end) throw new RangeError('truncated varint');
        byte = b[this.pos++];
        hi |= (byte & 0x7f) << shift;
        if (byte < 0x80) break;
      }
      if (byte! >= 0x80) throw new RangeError('varint longer than 10 bytes');
    }
    this.hi = hi >>> 0;
    return lo >>> 0;
  }

  len(): number {
    const n = this.varint();
    if (this.hi !== 0 || this.pos + n > this.end) throw new RangeError(`length ${n} runs past the end of the message`);
    return n;
  }

  string(): string {
    const n = this.len();
    const b = this.buf;
    const start = this.pos;
    const stop = start + n;
    this.pos = stop;
    if (n === 0) return '';
    if (n > INTERN_MAX_BYTES) return utf8Text(b, start, stop);
    // Short ASCII strings: segment names, endpoints and keys repeat across a reply, so one
    // string object is shared per distinct value (no per-handle allocation). The slot comes from
    // the length, the first, quarter and middle bytes and the last 8 (where counters in keys and
    // ports in endpoints differ), so a hit reads most bytes once, in the comparison; a cached
    // string is all ASCII, so a full match is too. A string differing only elsewhere takes the slot.
    let h = Math.imul(n, 0x9e3779b1) ^ b[start];
    h = Math.imul(h ^ b[start + (n >>> 2)], 31) ^ b[start + (n >>> 1)];
    for (let i = n > 8 ? stop - 8 : start; i < stop; i++) h = (Math.imul(h, 31) + b[i]) | 0;
    const slot = (h ^ (h >>> 11)) & INTERN_MASK;
    const cached = internTable[slot];
    if (cached.length === n) {
      let j = 0;
      while (j < n && cached.charCodeAt(j) === b[start + j]) j++;
      if (j === n) return cached;
    }
    for (let i = start; i < stop; i++) if (b[i] >= 0x80) return utf8Text(b, start, stop);
    const s = asciiOfLength[n](b, start);
    internTable[slot] = s;
    return s;
  }

  skip(wire: number): void {
    switch (wire) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_64:
        this.pos += 8;
        break;
      case WIRE_LEN:
        this.pos += this.len();
        return;
      case WIRE_32:
        this.pos += 4;
        break;
      default:
        throw new RangeError(`unsupported wire type ${wire}`);
    }
    if (this.pos > this.end) throw new RangeError('truncated field');
  }
}

function scalarDefault(kind: ScalarKind): unknown {
  if (kind === 'string') return '';
  if (kind === 'bool') return false;
  if (kind === 'bytes') return Buffer.alloc(0);
  return 0;
}

function toInteger(v: unknown, field: string, signed: boolean): number {
  if (typeof v === 'number') {
    if (Number.isInteger(v) && (signed || v >= 0)) return v;
  } else if (typeof v === 'string' && /^-?\d+$/.test(v)) {
    return toInteger(Number(v), field, signed);
  } else if (typeof v === 'bigint') {
    return toInteger(Number(v), field, signed);
  } else if (v !== null && typeof v === 'object' && typeof (v as { low?: unknown }).low === 'number') {
    const l = v as { low: number; high: number; unsigned?: boolean };
    const n = (l.unsigned || !signed ? l.high >>> 0 : l.high) * 4294967296 + (l.low >>> 0);
    return toInteger(n, field, signed);
  }
  throw new TypeError(`field ${field}: expected ${signed ? 'an integer' : 'a non-negative integer'}, got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`);
}

export class MessageCodec {
  readonly fields: FieldPlan[] = [];
  private byId: (FieldPlan | undefined)[] = [];
  private template: Record<string, unknown> = {};

  constructor(readonly type: protobuf.Type) {}

  /** Fills the plan; called once every codec of the schema exists (messages refer to each other). */
  init(codecFor: (t: protobuf.Type) => MessageCodec): void {
    for (const f of this.type.fieldsArray) {
      f.resolve();
      let kind: FieldPlan['kind'];
      let sub: MessageCodec | undefined;
      let keyKind: ScalarKind | undefined;
      let valueKind: ScalarKind | 'message' | undefined;
      if (f instanceof protobuf.MapField) {
        kind = 'map';
        keyKind = f.keyType as ScalarKind;
        if (f.resolvedType instanceof protobuf.Type) {
          valueKind = 'message';
          sub = codecFor(f.resolvedType);
        } else valueKind = f.resolvedType instanceof protobuf.Enum ? 'enum' : (f.type as ScalarKind);
      } else if (f.resolvedType instanceof protobuf.Type) {
        kind = 'message';
        sub = codecFor(f.resolvedType);
      } else if (f.resolvedType instanceof protobuf.Enum) kind = 'enum';
      else kind = f.type as ScalarKind;
      const packed = f.repeated && wireType(kind) !== WIRE_LEN;
      const tag = varintBytes(f.id * 8 + (packed ? WIRE_LEN : wireType(kind)));
      const plan: FieldPlan = { id: f.id, name: f.name, kind, repeated: f.repeated, sub, keyKind, valueKind, tagBytes: tag };
      this.fields.push(plan);
      this.byId[f.id] = plan;
      this.template[f.name] = kind === 'map' ? undefined : f.repeated ? undefined : kind === 'message' ? null : scalarDefault(kind);
    }
    this.compileBlank();
  }

  /** A fresh object with every field at its default, fields in declaration order. */
  private blank: () => Record<string, unknown> = () => ({});

  /** Builds `blank` as one object literal, so every decoded object of a type shares one shape. */
  private compileBlank(): void {
    const parts = this.fields.map((f) => {
      const d = f.kind === 'map' ? '{}' : f.repeated ? '[]' : f.kind === 'message' ? 'null' : f.kind === 'bytes' ? 'Buffer.alloc(0)' : JSON.stringify(this.template[f.name]);
      return `${JSON.stringify(f.name)}: ${d}`;
    });
    // The source is built only from field names of the compiled schema, quoted by JSON.stringify.
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- see the line above
    this.blank = new Function('Buffer', `return () => ({ ${parts.join(', ')} });`)(Buffer) as () => Record<string, unknown>;
  }

  /** The reference encoder: field by field through the plan, naming the exact path in errors. */
  write(w: Writer, obj: Record<string, unknown>, path: string): void {
    if ((obj as Partial<SelfEncoding>)[WIRE_BODY] !== undefined) return this.selfEncode(w, obj as unknown as SelfEncoding);
    for (let i = 0; i < this.fields.length; i++) {
      const f = this.fields[i];
      const v = obj[f.name];
      if (v === undefined || v === null) continue;
      this.writeField(w, f, v, path + f.name);
    }
  }

  /** Writes a SelfEncoding value standing for a message of this type; refuses one of another type. */
  selfEncode(w: Writer, v: SelfEncoding): void {
    if (v[WIRE_TYPE] !== this.type.name) throw new TypeError(`a ${String(v[WIRE_TYPE])} encoding itself where a ${this.type.name} is expected`);
    v[WIRE_BODY](w);
  }

  /** One present field (v neither undefined nor null). */
  writeField(w: Writer, f: FieldPlan, v: unknown, name: string): void {
    if (f.kind === 'map') {
      if (typeof v !== 'object') throw new TypeError(`field ${name}: expected an object map`);
      for (const key of Object.keys(v as object)) {
        w.tag(f.tagBytes);
        const start = w.beginLen();
        writeScalarField(w, 1, f.keyKind!, key, `${name}.key`);
        const val = (v as Record<string, unknown>)[key];
        if (f.valueKind === 'message') {
          w.tag([0x12]);
          const s2 = w.beginLen();
          f.sub!.write(w, val as Record<string, unknown>, `${name}[${key}].`);
          w.endLen(s2);
        } else writeScalarField(w, 2, f.valueKind as ScalarKind, val, `${name}[${key}]`);
        w.endLen(start);
      }
    } else if (f.repeated) {
      if (!Array.isArray(v)) throw new TypeError(`field ${name}: expected an array`);
      if (v.length === 0) return;
      if (f.kind === 'message') {
        for (let j = 0; j < v.length; j++) {
          w.tag(f.tagBytes);
          const start = w.beginLen();
          f.sub!.write(w, v[j] as Record<string, unknown>, `${name}[${j}].`);
          w.endLen(start);
        }
      } else if (f.kind === 'string' || f.kind === 'bytes') {
        for (let j = 0; j < v.length; j++) {
          w.tag(f.tagBytes);
          writeScalar(w, f.kind, v[j], `${name}[${j}]`);
        }
      } else {
        w.tag(f.tagBytes); // packed
        const start = w.beginLen();
        for (let j = 0; j < v.length; j++) writeScalar(w, f.kind, v[j], `${name}[${j}]`);
        w.endLen(start);
      }
    } else if (f.kind === 'message') {
      if (typeof v !== 'object') throw new TypeError(`field ${name}: expected an object`);
      w.tag(f.tagBytes);
      const start = w.beginLen();
      f.sub!.write(w, v as Record<string, unknown>, `${name}.`);
      w.endLen(start);
    } else {
      // proto3: a scalar at its default value is not written
      if (v === 0 || v === '' || v === false) return;
      w.tag(f.tagBytes);
      writeScalar(w, f.kind, v, name);
    }
  }

  /** The reference decoder (the compiled one falls back to readField for anything unusual). */
  read(r: Reader, end: number): Record<string, unknown> {
    const o = this.blank();
    while (r.pos < end) this.readField(r, o, r.varint());
    if (r.pos !== end) throw new RangeError('message overruns its length');
    return o;
  }

  /** Reads the field whose key (tag) was just read into `o`; unknown fields are skipped. */
  readField(r: Reader, o: Record<string, unknown>, key: number): void {
    const id = key >>> 3;
    const wire = key & 7;
    const f = this.byId[id];
    if (f === undefined) {
      r.skip(wire);
      return;
    }
    if (f.kind === 'map') {
      const n = r.len();
      const stop = r.pos + n;
      let k: unknown = scalarDefault(f.keyKind!);
      let val: unknown = f.valueKind === 'message' ? null : scalarDefault(f.valueKind as ScalarKind);
      while (r.pos < stop) {
        const kk = r.varint();
        if (kk >>> 3 === 1) k = readScalar(r, f.keyKind!);
        else if (kk >>> 3 === 2) {
          if (f.valueKind === 'message') {
            const m = r.len();
            val = f.sub!.read(r, r.pos + m);
          } else val = readScalar(r, f.valueKind as ScalarKind);
        } else r.skip(kk & 7);
      }
      const map = o[f.name] as Record<string, unknown>;
      const mapKey = String(k);
      const mapVal = val ?? f.sub?.read(r, r.pos);
      // A plain assignment of "__proto__" would replace the map's prototype instead of adding a key.
      if (mapKey === '__proto__') Object.defineProperty(map, mapKey, { value: mapVal, enumerable: true, writable: true, configurable: true });
      else map[mapKey] = mapVal;
    } else if (f.kind === 'message') {
      const n = r.len();
      const m = f.sub!.read(r, r.pos + n);
      if (f.repeated) (o[f.name] as unknown[]).push(m);
      else o[f.name] = m;
    } else if (f.repeated) {
      const arr = o[f.name] as unknown[];
      if (wire === WIRE_LEN && f.kind !== 'string' && f.kind !== 'bytes') {
        const n = r.len();
        const stop = r.pos + n;
        while (r.pos < stop) arr.push(readScalar(r, f.kind));
      } else arr.push(readScalar(r, f.kind));
    } else {
      if (wire !== wireType(f.kind)) throw new RangeError(`field ${f.name}: wire type ${wire} where ${wireType(f.kind)} was expected`);
      o[f.name] = readScalar(r, f.kind);
    }
  }

  /**
   * Generated encoder: the same bytes as `write`, with direct property reads (one hidden class
   * per message, not a keyed lookup per field) and no path strings. Anything it cannot take on
   * its fast paths goes through writeScalar/writeField, which throw on bad input; encodeWith then
   * re-runs `write` to report the exact field path.
   */
  fastWrite: (w: Writer, o: Record<string, unknown>) => void = (w, o) => this.write(w, o, '');

  /** Generated decoder: the common tags inline, everything else through readField. */
  fastRead: (r: Reader, end: number) => Record<string, unknown> = (r, end) => this.read(r, end);

  /** Builds fastWrite/fastRead; called once every codec of the schema is initialised. */
  compile(): void {
    const q = (x: string): string => JSON.stringify(x);
    const wr: string[] = ['if (o[WB] !== undefined) return C.selfEncode(w, o);', 'let v, s, b;'];
    const cases: string[] = [];
    this.fields.forEach((f, i) => {
      const prop = `o[${q(f.name)}]`;
      const F = `F[${i}]`;
      const tag = f.tagBytes.length === 1 ? `w.ensure(1); w.buf[w.pos++] = ${f.tagBytes[0]};` : `w.tag(${F}.tagBytes);`;
      wr.push(`v = ${prop};`);
      if (f.kind === 'map' || (f.repeated && f.kind !== 'message' && f.kind !== 'string')) {
        wr.push(`if (v !== undefined && v !== null) C.writeField(w, ${F}, v, ${q(f.name)});`);
      } else if (f.repeated) {
        const one =
          f.kind === 'message'
            ? `${tag} s = w.beginLen(); ${F}.sub.fastWrite(w, v[j]); w.endLen(s);`
            : `${tag} if (typeof v[j] === 'string') w.string(v[j]); else writeScalar(w, 'string', v[j], '');`;
        wr.push(`if (v !== undefined && v !== null) { if (!Array.isArray(v)) C.writeField(w, ${F}, v, ''); for (let j = 0; j < v.length; j++) { ${one} } }`);
      } else if (f.kind === 'message') {
        wr.push(`if (v !== undefined && v !== null) { if (typeof v !== 'object') C.writeField(w, ${F}, v, ''); ${tag} s = w.beginLen(); ${F}.sub.fastWrite(w, v); w.endLen(s); }`);
      } else {
        let fast = `writeScalar(w, ${q(f.kind)}, v, '');`;
        if (f.kind === 'string') fast = `if (typeof v === 'string') w.string(v); else ${fast}`;
        else if (f.kind === 'bool') fast = `if (v === true) w.buf[w.pos++] = 1; else ${fast}`;
        else if (f.kind === 'uint32') fast = `if (typeof v === 'number' && (v >>> 0) === v) w.varint(v); else ${fast}`;
        else if (f.kind === 'int32' || f.kind === 'enum' || f.kind === 'int64' || f.kind === 'uint64') {
          fast = `if (typeof v === 'number' && v > 0 && v <= 9007199254740991 && Math.floor(v) === v) w.varint(v); else ${fast}`;
        }
        wr.push(`if (v !== undefined && v !== null && v !== 0 && v !== '' && v !== false) { ${tag} w.ensure(1); ${fast} }`);
      }
      // decoding: the tag of the expected wire type inline
      const expected = f.id * 8 + (f.repeated && wireType(f.kind) !== WIRE_LEN && f.kind !== 'map' ? WIRE_LEN : wireType(f.kind));
      if (f.kind === 'message') {
        // a first element goes in as a one-element literal: push() on [] reserves room for 17
        const store = f.repeated ? `if (${prop}.length === 0) ${prop} = [m]; else ${prop}.push(m)` : `${prop} = m`;
        cases.push(`case ${expected}: { const n = r.len(); const m = ${F}.sub.fastRead(r, r.pos + n); ${store}; break; }`);
      } else if (f.kind === 'string') {
        cases.push(`case ${expected}: ${f.repeated ? `{ const x = r.string(); if (${prop}.length === 0) ${prop} = [x]; else ${prop}.push(x); }` : `${prop} = r.string()`}; break;`);
      } else if (!f.repeated && f.kind !== 'map') {
        let expr = `readScalar(r, ${q(f.kind)})`;
        if (f.kind === 'int32' || f.kind === 'enum') expr = 'r.varint() | 0';
        else if (f.kind === 'uint32') expr = 'r.varint()';
        else if (f.kind === 'bool') expr = '(r.varint() !== 0 || r.hi !== 0)';
        else if (f.kind === 'uint64') expr = '(lo = r.varint(), r.hi * 4294967296 + lo)';
        cases.push(`case ${expected}: ${prop} = ${expr}; break;`);
      }
    });
    const blank = this.fields.map((f) => {
      const d = f.kind === 'map' ? '{}' : f.repeated ? '[]' : f.kind === 'message' ? 'null' : f.kind === 'bytes' ? 'Buffer.alloc(0)' : JSON.stringify(this.template[f.name]);
      return `${q(f.name)}: ${d}`;
    });
    const rd = `let lo; const o = { ${blank.join(', ')} };
      while (r.pos < end) { const key = r.varint(); switch (key) { ${cases.join('\n')} default: C.readField(r, o, key); } }
      if (r.pos !== end) throw new RangeError('message overruns its length');
      return o;`;
    // The sources are built only from field names and numbers of the compiled schema (quoted by JSON.stringify).
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- see the line above
    const make = new Function('C', 'F', 'writeScalar', 'readScalar', 'Buffer', 'WB', `return [function (w, o) { ${wr.join('\n')} }, function (r, end) { ${rd} }];`);
    const [fw, fr] = make(this, this.fields, writeScalar, readScalar, Buffer, WIRE_BODY) as [MessageCodec['fastWrite'], MessageCodec['fastRead']];
    this.fastWrite = fw;
    this.fastRead = fr;
  }
}

function writeScalarField(w: Writer, id: number, kind: ScalarKind, v: unknown, name: string): void {
  if (v === undefined || v === null || v === 0 || v === '' || v === false) return;
  w.varint(id * 8 + wireType(kind));
  writeScalar(w, kind, v, name);
}

function writeScalar(w: Writer, kind: ScalarKind, v: unknown, name: string): void {
  switch (kind) {
    case 'string':
      if (typeof v !== 'string') throw new TypeError(`field ${name}: expected a string, got ${typeof v}`);
      w.string(v);
      return;
    case 'bool':
      if (typeof v !== 'boolean') throw new TypeError(`field ${name}: expected a boolean, got ${typeof v}`);
      w.varint(v ? 1 : 0);
      return;
    case 'uint32':
    case 'uint64': {
      const n = typeof v === 'number' && v >= 0 && Number.isInteger(v) ? v : toInteger(v, name, false);
      if (kind === 'uint32' && n > 0xffffffff) throw new TypeError(`field ${name}: ${n} does not fit uint32`);
      w.varint(n);
      return;
    }
    case 'int32':
    case 'enum':
    case 'int64': {
      const n = typeof v === 'number' && Number.isInteger(v) ? v : toInteger(v, name, true);
      if (n < 0) w.negative(n);
      else w.varint(n);
      return;
    }
    case 'sint32': {
      const n = toInteger(v, name, true);
      w.varint(((n << 1) ^ (n >> 31)) >>> 0);
      return;
    }
    case 'bytes':
      if (!(v instanceof Uint8Array)) throw new TypeError(`field ${name}: expected bytes`);
      w.bytes(v);
      return;
    case 'double': {
      if (typeof v !== 'number') throw new TypeError(`field ${name}: expected a number`);
      w.ensure(8);
      w.buf.writeDoubleLE(v, w.pos);
      w.pos += 8;
      return;
    }
    case 'float': {
      if (typeof v !== 'number') throw new TypeError(`field ${name}: expected a number`);
      w.ensure(4);
      w.buf.writeFloatLE(v, w.pos);
      w.pos += 4;
      return;
    }
  }
}

function readScalar(r: Reader, kind: ScalarKind): unknown {
  switch (kind) {
    case 'string':
      return r.string();
    case 'bool':
      return r.varint() !== 0 || r.hi !== 0;
    case 'int32':
    case 'enum':
      return r.varint() | 0;
    case 'uint32':
      return r.varint();
    case 'uint64': {
      const lo = r.varint();
      return r.hi * 4294967296 + lo;
    }
    case 'int64': {
      const lo = r.varint();
      const hi = r.hi;
      if (hi & 0x80000000) return Number(BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)));
      return hi * 4294967296 + lo;
    }
    case 'sint32': {
      const n = r.varint();
      return (n >>> 1) ^ -(n & 1);
    }
    case 'bytes': {
      const n = r.len();
      const out = Buffer.from(r.buf.subarray(r.pos, r.pos + n));
      r.pos += n;
      return out;
    }
    case 'double': {
      const v = r.buf.readDoubleLE(r.pos);
      r.pos += 8;
      return v;
    }
    case 'float': {
      const v = r.buf.readFloatLE(r.pos);
      r.pos += 4;
      return v;
    }
  }
}

const writer = new Writer();

/** Compiles codecs for every message type reachable from `types`. */
export function compileCodecs(types: protobuf.Type[]): (type: protobuf.Type) => MessageCodec {
  const codecs = new Map<protobuf.Type, MessageCodec>();
  const pending: MessageCodec[] = [];
  const codecFor = (t: protobuf.Type): MessageCodec => {
    let c = codecs.get(t);
    if (!c) {
      c = new MessageCodec(t);
      codecs.set(t, c);
      pending.push(c);
    }
    return c;
  };
  for (const t of types) codecFor(t);
  const all: MessageCodec[] = [];
  while (pending.length > 0) {
    const c = pending.pop()!;
    c.init(codecFor);
    all.push(c);
  }
  for (const c of all) c.compile();
  return codecFor;
}

/**
 * Encodes `obj` after `reserve` bytes left for the caller (a frame header); returns a new
 * buffer holding the reserved bytes then the message. Throws TypeError on a wrong-typed field.
 */
export function encodeWith(codec: MessageCodec, obj: object, reserve = 0): Buffer {
  writer.pos = 0;
  writer.ensure(reserve);
  writer.pos = reserve;
  encodeInto(codec, writer, obj);
  const out = Buffer.allocUnsafe(writer.pos);
  writer.buf.copy(out, 0, 0, writer.pos);
  // one huge reply (a regex query over many keys) must not pin its scratch space forever
  if (writer.buf.length > 4 * 1024 * 1024) writer.buf = Buffer.allocUnsafe(64 * 1024);
  return out;
}

/**
 * Appends the encoding of `obj` to `w` at w.pos. Throws TypeError on a wrong-typed field, naming
 * its path; w.pos is then back where it was (bytes past it may have been written).
 */
export function encodeInto(codec: MessageCodec, w: Writer, obj: object): void {
  const start = w.pos;
  try {
    codec.fastWrite(w, obj as Record<string, unknown>);
  } catch (e) {
    // the reference encoder names the offending field path
    w.pos = start;
    try {
      codec.write(w, obj as Record<string, unknown>, '');
    } finally {
      w.pos = start;
    }
    throw e;
  }
}

/** Decodes bytes into a plain object of the __Output shape. Throws RangeError on malformed input. */
export function decodeWith<T>(codec: MessageCodec, bytes: Uint8Array): T {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const r = new Reader(buf, 0, buf.length);
  return codec.fastRead(r, buf.length) as T;
}
