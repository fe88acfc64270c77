// Framing of the fast master channel (docs/master-channel.md): after the 4-byte magic "KVC1",
// each frame is a 12-byte little-endian header (payload length u32, request id u32, method u16,
// kind u8, reserved u8) followed by the protobuf payload. The decoder accepts any chunking.

export const CHANNEL_MAGIC = Buffer.from('KVC1', 'latin1');
export const HEADER_BYTES = 12;
/** Larger payloads are a protocol error (the biggest master messages are batch replies). */
export const MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;

export const FrameKind = {
  /** client -> master: a request message of `method`. */
  REQUEST: 0,
  /** master -> client: the response message of `method` for request `id`. */
  RESPONSE: 1,
  /** master -> client: request `id` failed before the method ran; payload is a UTF-8 reason. */
  ERROR: 2,
} as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

export interface Frame {
  kind: number;
  id: number;
  method: number;
  payload: Buffer;
}

/** One frame as a single buffer (header + payload). */
export function encodeFrame(kind: FrameKind, id: number, method: number, payload: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  buf.set(payload, HEADER_BYTES);
  return writeFrameHeader(buf, kind, id, method);
}

/** Fills the header of `buf`, whose payload was already written after HEADER_BYTES reserved bytes. */
export function writeFrameHeader(buf: Buffer, kind: FrameKind, id: number, method: number): Buffer {
  buf.writeUInt32LE(buf.length - HEADER_BYTES, 0);
  buf.writeUInt32LE(id >>> 0, 4);
  buf.writeUInt16LE(method, 8);
  buf[10] = kind;
  buf[11] = 0;
  return buf;
}

export class FrameError extends Error {
  override readonly name = 'FrameError';
}

/**
 * Reassembles frames from arbitrary chunks. `push` calls `onFrame` for every complete frame, in
 * order; payloads are views into the received chunks when a frame lies in one chunk (no copy).
 * Throws FrameError on an oversize frame; the connection must then be closed.
 */
export class FrameDecoder {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(
    private readonly onFrame: (kind: number, id: number, method: number, payload: Buffer) => void,
    private readonly maxPayload = MAX_PAYLOAD_BYTES,
  ) {}

  /** Bytes held waiting for the rest of a frame. */
  get buffered(): number {
    return this.pendingBytes;
  }

  push(chunk: Buffer): void {
    let buf = chunk;
    if (this.pendingBytes > 0) {
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
      if (this.pendingBytes < 4) return;
      const len = this.peekLength();
      if (this.pendingBytes < HEADER_BYTES + len) return;
      buf = Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
    }
    let off = 0;
    while (buf.length - off >= HEADER_BYTES) {
      const len = buf.readUInt32LE(off);
      if (len > this.maxPayload) throw new FrameError(`frame payload of ${len} bytes exceeds the ${this.maxPayload}-byte limit`);
      if (buf.length - off < HEADER_BYTES + len) break;
      const id = buf.readUInt32LE(off + 4);
      const method = buf.readUInt16LE(off + 8);
      const kind = buf[off + 10];
      const start = off + HEADER_BYTES;
      off = start + len;
      this.onFrame(kind, id, method, buf.subarray(start, off));
    }
    if (off < buf.length) {
      const rest = buf.subarray(off);
      if (rest.length >= 4) {
        const len = rest.readUInt32LE(0);
        if (len > this.maxPayload) throw new FrameError(`frame payload of ${len} bytes exceeds the ${this.maxPayload}-byte limit`);
      }
      this.pending = [rest];
      this.pendingBytes = rest.length;
    }
  }

  private peekLength(): number {
    const head = this.pending[0].length >= 4 ? this.pending[0] : Buffer.concat(this.pending);
    if (head.length < 4) return 0;
    const len = head.readUInt32LE(0);
    if (len > this.maxPayload) throw new FrameError(`frame payload of ${len} bytes exceeds the ${this.maxPayload}-byte limit`);
    return len;
  }
}

/**
 * Batches outgoing frames: every frame queued during one turn of the event loop goes out in a
 * single socket write on the next tick (many requests or replies per syscall).
 */
export class FrameWriter {
  private queue: Buffer[] = [];
  private queuedBytes = 0;
  private scheduled = false;

  constructor(private readonly write: (data: Buffer) => void) {}

  /** Frames and bytes queued for the next write. */
  get queuedFrames(): number {
    return this.queue.length;
  }

  get queued(): number {
    return this.queuedBytes;
  }

  push(frame: Buffer): void {
    this.queue.push(frame);
    this.queuedBytes += frame.length;
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(this.flush);
    }
  }

  readonly flush = (): void => {
    this.scheduled = false;
    if (this.queue.length === 0) return;
    const data = this.queue.length === 1 ? this.queue[0] : Buffer.concat(this.queue, this.queuedBytes);
    this.queue = [];
    this.queuedBytes = 0;
    this.write(data);
  };
}
