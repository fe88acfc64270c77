// The header of a file-tier file (docs/tiers.md "File tier"): what a reader checks before it
// serves a byte of the value that follows it. Little-endian:
//   0  magic "KVFT"            4  version (u16) 6 reserved (u16)   8  header length (u32, all of it)
//   12 slice count (u32)       16 value length (u64)               24 key length (u32)
//   28 slice lengths (u64 each), CRC-32C of each slice (u32 each), the key (UTF-8),
//   and last the CRC-32C of every header byte before it (u32).
// The value (the slices, in order) starts right after the header. Pure: the CRC function is passed in.

export const HEADER_MAGIC = 0x5446564b; // "KVFT" read as a little-endian u32
export const HEADER_VERSION = 1;
const FIXED = 28;
/** A header larger than this is refused (slices and key are bounded far below it). */
export const MAX_HEADER_BYTES = 1 << 20;
/** Bytes a reader fetches first: the whole header of any usual object. */
export const HEADER_PROBE_BYTES = 4096;

export interface FileHeader {
  key: string;
  sliceLengths: number[];
  /** CRC-32C of each slice (unsigned). */
  checksums: number[];
  /** Sum of sliceLengths. */
  valueLength: number;
  /** Bytes of the header: the value starts here. */
  headerLength: number;
}

export type Crc = (data: Uint8Array) => number;

export type HeaderDecode = { ok: true; header: FileHeader } | { ok: false; need: number } | { ok: false; bad: string };

/** The header bytes of an object (`checksums` one per slice). */
export function encodeHeader(key: string, sliceLengths: readonly number[], checksums: readonly number[], crc: Crc): Buffer {
  if (sliceLengths.length !== checksums.length) throw new RangeError('encodeHeader: one checksum per slice');
  const keyBytes = Buffer.from(key, 'utf8');
  const n = sliceLengths.length;
  const length = FIXED + n * 12 + keyBytes.length + 4;
  if (length > MAX_HEADER_BYTES) throw new RangeError(`encodeHeader: a header of ${length} B passes ${MAX_HEADER_BYTES} B`);
  const b = Buffer.alloc(length);
  b.writeUInt32LE(HEADER_MAGIC, 0);
  b.writeUInt16LE(HEADER_VERSION, 4);
  b.writeUInt32LE(length, 8);
  b.writeUInt32LE(n, 12);
  let total = 0;
  for (const l of sliceLengths) total += l;
  b.writeBigUInt64LE(BigInt(total), 16);
  b.writeUInt32LE(keyBytes.length, 24);
  let at = FIXED;
  for (const l of sliceLengths) {
    b.writeBigUInt64LE(BigInt(l), at);
    at += 8;
  }
  for (const c of checksums) {
    b.writeUInt32LE(c >>> 0, at);
    at += 4;
  }
  keyBytes.copy(b, at);
  at += keyBytes.length;
  b.writeUInt32LE(crc(b.subarray(0, at)) >>> 0, at);
  return b;
}

/**
 * Reads a header from the start of `b`: the header, or how many bytes are needed to decide
 * (`need`), or why the bytes are no header of this format (`bad`).
 */
export function decodeHeader(b: Uint8Array, crc: Crc): HeaderDecode {
  if (b.length < FIXED) return { ok: false, need: FIXED };
  const v = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (v.readUInt32LE(0) !== HEADER_MAGIC) return { ok: false, bad: 'no file-tier magic' };
  const version = v.readUInt16LE(4);
  if (version !== HEADER_VERSION) return { ok: false, bad: `header version ${version} (this build reads ${HEADER_VERSION})` };
  const length = v.readUInt32LE(8);
  const n = v.readUInt32LE(12);
  const keyLength = v.readUInt32LE(24);
  if (length > MAX_HEADER_BYTES || length !== FIXED + n * 12 + keyLength + 4) return { ok: false, bad: 'inconsistent header length' };
  if (b.length < length) return { ok: false, need: length };
  const end = length - 4;
  if (crc(b.subarray(0, end)) >>> 0 !== v.readUInt32LE(end)) return { ok: false, bad: 'header checksum mismatch' };
  const valueLength = Number(v.readBigUInt64LE(16));
  const sliceLengths: number[] = [];
  let at = FIXED;
  let total = 0;
  for (let i = 0; i < n; i++, at += 8) {
    const l = Number(v.readBigUInt64LE(at));
    sliceLengths.push(l);
    total += l;
  }
  if (total !== valueLength || !Number.isSafeInteger(valueLength)) return { ok: false, bad: 'slice lengths do not add up to the value length' };
  const checksums: number[] = [];
  for (let i = 0; i < n; i++, at += 4) checksums.push(v.readUInt32LE(at));
  const keyBytes = v.subarray(at, at + keyLength);
  const key = keyBytes.toString('utf8');
  if (!Buffer.from(key, 'utf8').equals(keyBytes)) return { ok: false, bad: 'key is not UTF-8' };
  return { ok: true, header: { key, sliceLengths, checksums, valueLength, headerLength: length } };
}

/** What readHeader needs of a file: a positioned read (a fs/promises FileHandle has it). */
export interface PositionedReader {
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
}

/**
 * Reads and decodes the header at the start of a file: one probe of HEADER_PROBE_BYTES, and a
 * second read only for a header larger than that. A file shorter than its header decodes as
 * `need` (torn).
 */
export async function readHeader(file: PositionedReader, crc: Crc): Promise<HeaderDecode> {
  let probe = Buffer.allocUnsafe(HEADER_PROBE_BYTES);
  let got = (await file.read(probe, 0, probe.length, 0)).bytesRead;
  let d = decodeHeader(probe.subarray(0, got), crc);
  if (!d.ok && 'need' in d && d.need > got && got === probe.length) {
    probe = Buffer.allocUnsafe(d.need);
    got = (await file.read(probe, 0, probe.length, 0)).bytesRead;
    d = decodeHeader(probe.subarray(0, got), crc);
  }
  return d;
}
