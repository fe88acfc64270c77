// Codecs of the master's state records (proto/master_state.proto): snapshots, the change log and
// the leader-to-standby stream all carry them, compiled by common/proto-codec.ts like the RPC
// messages. Also the frame of the snapshot and log files: [u32 length][u32 CRC-32][message], so a
// torn or corrupt frame is recognised and the file read up to it.
import { crc32 } from 'node:zlib';
import protobuf from 'protobufjs';
import { compileCodecs, decodeWith, encodeWith, type MessageCodec } from './proto-codec.js';
import { protoPath } from './service-proto.js';

const root = new protobuf.Root().loadSync(protoPath('master_state.proto'), { keepCase: true });
const TYPES = ['SegmentRecord', 'HandleRecord', 'ObjectRecord', 'ChangeRecord', 'SnapshotHeader', 'SnapshotTrailer', 'SnapshotFrame', 'LeaderMessage', 'FollowerMessage'] as const;
const codecFor = compileCodecs(TYPES.map((t) => root.lookupType(`store.${t}`)));

export type StateMessage = (typeof TYPES)[number];

export function stateCodec(name: StateMessage): MessageCodec {
  return codecFor(root.lookupType(`store.${name}`));
}

export { decodeWith, encodeWith };

/** Bytes before each file frame's message: its length and CRC-32 (both u32 little-endian). */
export const FILE_FRAME_HEADER = 8;
/** Largest message a file frame may hold (a 4,096-byte key with many handles is far below it). */
export const MAX_FILE_FRAME = 64 * 1024 * 1024;

/** `body` as one file frame. */
export function fileFrame(body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(FILE_FRAME_HEADER + body.length);
  out.writeUInt32LE(body.length, 0);
  out.writeUInt32LE(crc32(body), 4);
  out.set(body, FILE_FRAME_HEADER);
  return out;
}

/**
 * The messages of the whole frames at the start of `buf`, in order, and where the first frame
 * that is torn (runs past the end) or corrupt (CRC mismatch, absurd length) begins: `end`
 * equals buf.length when every byte belonged to a whole frame.
 */
export function readFileFrames(buf: Buffer): { bodies: Buffer[]; end: number } {
  const bodies: Buffer[] = [];
  let at = 0;
  while (at + FILE_FRAME_HEADER <= buf.length) {
    const len = buf.readUInt32LE(at);
    if (len > MAX_FILE_FRAME || at + FILE_FRAME_HEADER + len > buf.length) break;
    const body = buf.subarray(at + FILE_FRAME_HEADER, at + FILE_FRAME_HEADER + len);
    if (crc32(body) !== buf.readUInt32LE(at + 4)) break;
    bodies.push(body);
    at += FILE_FRAME_HEADER + len;
  }
  return { bodies, end: at };
}
