// File frames (common/state-proto.ts: [u32 length][u32 CRC-32][message]) read from a stream: the
// replication connection between a leader and its standbys (replication-leader.ts,
// replication-follower.ts). Whole frames are handed on in order; a corrupt one stops the reader.
import { crc32 } from 'node:zlib';
import { FILE_FRAME_HEADER, MAX_FILE_FRAME } from '../../common/state-proto.js';

export class FrameReader {
  private buf: Buffer = Buffer.alloc(0);
  private broken = false;

  constructor(private readonly onFrame: (body: Buffer) => void) {}

  /** Takes bytes; false once a frame was corrupt (the connection must be closed). */
  push(chunk: Buffer): boolean {
    if (this.broken) return false;
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let at = 0;
    while (this.buf.length - at >= FILE_FRAME_HEADER) {
      const len = this.buf.readUInt32LE(at);
      if (len > MAX_FILE_FRAME) return this.fail();
      if (this.buf.length - at < FILE_FRAME_HEADER + len) break;
      const body = this.buf.subarray(at + FILE_FRAME_HEADER, at + FILE_FRAME_HEADER + len);
      if (crc32(body) !== this.buf.readUInt32LE(at + 4)) return this.fail();
      at += FILE_FRAME_HEADER + len;
      this.onFrame(body);
    }
    this.buf = at === this.buf.length ? Buffer.alloc(0) : this.buf.subarray(at);
    return true;
  }

  private fail(): false {
    this.broken = true;
    this.buf = Buffer.alloc(0);
    return false;
  }
}
