// The least CPU that a Node.js master and client can spend per key of a batched put
// (BatchPutStart + BatchPutEnd, 128 keys per call): `npm run bench:put-floor`, not a test, and not
// the product. It runs only the work no design can skip, and takes every shortcut a real master
// could not take. Master side: hash each key's bytes, probe an open-addressing table of integer
// arrays, write the record into typed-array columns and the key into a byte arena (no object per
// key, so nothing for the garbage collector), bump-allocate, and write a reply of the real one's
// size; PutEnd finds the record again. Client side: encode the requests, and read each reply into
// the (segment, address, size) a caller needs to write its bytes. There is no framing, socket,
// validation, allocator bins, eviction or in-flight list, lease or pin. The difference between
// this floor and bench:master's put pair (where client and master share two cores) is what
// framing, I/O and the master's real bookkeeping cost.
import { asciiString, Reader, Writer } from '../common/proto-codec.js';

const BATCH = 128;
const KEYS = Number(process.argv.find((a) => a.startsWith('--keys='))?.slice(7) ?? 1_000_000);
const ROUNDS = 3;
const VALUE = 4096;
const SEED = 0x2545f491;
const KEY_BYTES_MAX = 64;
const SEGMENT = 'bench-seg-0';
const ENDPOINT = '127.0.0.1:20000';
/** Base of the fake segment: addresses past 2^32, as real ones are. */
const BASE = 2 ** 41;

function key(i: number): string {
  return `model/layer/block-${String(i).padStart(9, '0')}`;
}

/** The codec's Writer over other buffers: writeVarint is Writer.varint, the one varint encoder the master writes with. */
const writer = new Writer(0);

/** Writes the varint of `v` at buf[pos..]; returns the position after it. */
function writeVarint(buf: Buffer, pos: number, v: number): number {
  writer.buf = buf;
  writer.pos = pos;
  writer.varint(v);
  return writer.pos;
}

/** A varint of up to 53 bits read by the codec's Reader (low 32 bits returned, the rest in `hi`). */
function readUint(r: Reader): number {
  const lo = r.varint();
  return r.hi * 4294967296 + lo;
}

function writeAscii(buf: Buffer, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) buf[at++] = s.charCodeAt(i);
  return at;
}

/** A 32-bit hash of n key bytes at buf[at..] (multiply-xorshift per byte, as the real table's); odd. */
function bytesHash(buf: Buffer, at: number, n: number): number {
  let h = SEED ^ n;
  for (let i = 0; i < n; i++) h = Math.imul(h ^ buf[at + i], 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h | 1;
}

/** The master's share: a table of record numbers, records in typed-array columns, keys in a byte arena. */
class FloorMaster {
  private readonly bits: number;
  private readonly hashes: Int32Array;
  private readonly records: Int32Array;
  private readonly keyBytes: Buffer;
  private readonly keyLen: Uint8Array;
  private readonly status: Uint8Array;
  private readonly address: Float64Array;
  private readonly size: Int32Array;
  private readonly since: Int32Array;
  private next = 1;
  private bump = 0;
  /** segment_name and te_endpoint fields of every handle, encoded once. */
  private readonly segmentFields = Buffer.from(`\x0a${String.fromCharCode(SEGMENT.length)}${SEGMENT}\x2a${String.fromCharCode(ENDPOINT.length)}${ENDPOINT}`, 'latin1');

  constructor(capacity: number) {
    this.bits = Math.ceil(Math.log2(capacity * 2));
    this.hashes = new Int32Array(1 << this.bits);
    this.records = new Int32Array(1 << this.bits);
    this.keyBytes = Buffer.alloc((capacity + 1) * KEY_BYTES_MAX);
    this.keyLen = new Uint8Array(capacity + 1);
    this.status = new Uint8Array(capacity + 1);
    this.address = new Float64Array(capacity + 1);
    this.size = new Int32Array(capacity + 1);
    this.since = new Int32Array(capacity + 1);
  }

  private sameKey(r: number, buf: Buffer, at: number, n: number): boolean {
    if (this.keyLen[r] !== n) return false;
    const base = r * KEY_BYTES_MAX;
    for (let i = 0; i < n; i++) if (this.keyBytes[base + i] !== buf[at + i]) return false;
    return true;
  }

  /** Record of the n key bytes at buf[at..] (hash h), or -(table position to insert at) - 1. */
  private find(buf: Buffer, at: number, n: number, h: number): number {
    const mask = this.hashes.length - 1;
    for (let i = Math.imul(h, 0x9e3779b1) >>> (32 - this.bits); ; i = (i + 1) & mask) {
      const w = this.hashes[i];
      if (w === 0) return -i - 1;
      if (w === h && this.sameKey(this.records[i], buf, at, n)) return this.records[i];
    }
  }

  /** PutStart of every key in `req` ([len][key][value_length][slice length] each); reply bytes into `out`. */
  putStart(req: Buffer, out: Buffer, now: number): number {
    const r = new Reader(req, 0, req.length);
    let p = 0;
    let o = 0;
    while (p < req.length) {
      const len = req[p++];
      const h = bytesHash(req, p, len);
      const at = this.find(req, p, len, h);
      if (at >= 0) throw new Error(`key at byte ${p} exists`);
      const rec = this.next++;
      this.hashes[-at - 1] = h;
      this.records[-at - 1] = rec;
      req.copy(this.keyBytes, rec * KEY_BYTES_MAX, p, p + len);
      this.keyLen[rec] = len;
      r.pos = p + len;
      const size = readUint(r); // value_length, then the slice length
      readUint(r);
      p = r.pos;
      this.status[rec] = 1;
      this.address[rec] = BASE + this.bump;
      this.size[rec] = size;
      this.since[rec] = now;
      this.bump += size;
      // result { replica_list { handles { segment_name, size, buffer, status, te_endpoint } status } }
      out[o++] = 0x12;
      const lenAt = o++;
      out[o++] = 0x0a;
      const handleLenAt = o++;
      const handleStart = o;
      o += this.segmentFields.copy(out, o);
      out[o++] = 0x10;
      o = writeVarint(out, o, size);
      out[o++] = 0x18;
      o = writeVarint(out, o, this.address[rec]);
      out[o++] = 0x20;
      out[o++] = 1;
      out[handleLenAt] = o - handleStart;
      out[o++] = 0x10;
      out[o++] = 1;
      out[lenAt] = o - lenAt - 1;
    }
    return o;
  }

  /** PutEnd of every key in `req` ([len][key] each). */
  putEnd(req: Buffer): void {
    let p = 0;
    while (p < req.length) {
      const len = req[p++];
      const r = this.find(req, p, len, bytesHash(req, p, len));
      if (r < 0) throw new Error(`key at byte ${p} missing`);
      this.status[r] = 2;
      p += len;
    }
  }
}

/** What a caller needs per key to write its bytes. */
interface Placement {
  segment: string;
  address: number;
  size: number;
}

/** The client's share: requests out, replies read into Placements. */
class FloorClient {
  private segmentName = '';

  encodeStart(keys: readonly string[], out: Buffer): number {
    let o = 0;
    for (const k of keys) {
      out[o++] = k.length;
      o = writeAscii(out, o, k);
      o = writeVarint(out, o, VALUE);
      o = writeVarint(out, o, VALUE);
    }
    return o;
  }

  encodeEnd(keys: readonly string[], out: Buffer): number {
    let o = 0;
    for (const k of keys) {
      out[o++] = k.length;
      o = writeAscii(out, o, k);
    }
    return o;
  }

  readReply(reply: Buffer, end: number, into: Placement[]): void {
    const r = new Reader(reply, 0, end);
    let p = 0;
    while (p < end) {
      const resultEnd = p + 2 + reply[p + 1];
      p += 4; // result tag and length, handle tag and length
      const nameLen = reply[p + 1];
      // the same segment every time: compare the bytes, keep one string
      if (!sameAscii(reply, p + 2, nameLen, this.segmentName)) this.segmentName = asciiString(reply, p + 2, nameLen);
      p += 2 + nameLen;
      p += 2 + reply[p + 1]; // te_endpoint
      r.pos = p + 1;
      const size = readUint(r);
      r.pos++; // the buffer tag
      const address = readUint(r);
      into.push({ segment: this.segmentName, address, size });
      p = resultEnd;
    }
  }
}

function sameAscii(buf: Buffer, at: number, n: number, s: string): boolean {
  if (s.length !== n) return false;
  for (let i = 0; i < n; i++) if (buf[at + i] !== s.charCodeAt(i)) return false;
  return true;
}

function cpuNs(f: () => void): number {
  const t = process.cpuUsage();
  f();
  const d = process.cpuUsage(t);
  return (d.user + d.system) * 1000;
}

function round(): { master: number; client: number } {
  const batches = Math.floor(KEYS / BATCH);
  const keys: string[][] = [];
  for (let b = 0; b < batches; b++) keys.push(Array.from({ length: BATCH }, (_, j) => key(b * BATCH + j)));
  const client = new FloorClient();
  const master = new FloorMaster(batches * BATCH);
  const startReqs: Buffer[] = [];
  const endReqs: Buffer[] = [];
  const replies: Buffer[] = [];
  const replyEnds: number[] = [];
  const scratch = Buffer.alloc(64 * 1024);
  let clientNs = cpuNs(() => {
    for (let b = 0; b < batches; b++) {
      startReqs.push(Buffer.from(scratch.subarray(0, client.encodeStart(keys[b], scratch))));
      endReqs.push(Buffer.from(scratch.subarray(0, client.encodeEnd(keys[b], scratch))));
    }
  });
  const masterNs = cpuNs(() => {
    for (let b = 0; b < batches; b++) {
      const out = Buffer.allocUnsafe(BATCH * 64);
      replyEnds.push(master.putStart(startReqs[b], out, b));
      replies.push(out);
      master.putEnd(endReqs[b]);
    }
  });
  clientNs += cpuNs(() => {
    for (let b = 0; b < batches; b++) {
      const placements: Placement[] = [];
      client.readReply(replies[b], replyEnds[b], placements);
      if (placements.length !== BATCH || placements[BATCH - 1].size !== VALUE) throw new Error('bad reply');
    }
  });
  const n = batches * BATCH;
  return { master: masterNs / n, client: clientNs / n };
}

console.log(`put floor: ${KEYS.toLocaleString('en-US')} keys, ${BATCH} per batch, CPU ns per key (BatchPutStart + BatchPutEnd); node ${process.version}`);
for (let i = 1; i <= ROUNDS; i++) {
  const r = round();
  console.log(
    `round ${i}: master ${r.master.toFixed(0)} ns/key, client ${r.client.toFixed(0)} ns/key; ` +
      `at most ${Math.round(1e9 / Math.max(r.master, r.client)).toLocaleString('en-US')} keys/s with a core for each and nothing else running`,
  );
}
