// Framing of the fast master channel (docs/master-channel.md): after the 4-byte magic "KVC1",
// each frame is a 12-byte little-endian header (payload length u32, request id u32, method u16,
// kind u8, reserved u8) followed by the protobuf payload. The decoder accepts any chunking.
import { encodeInto, Writer, type MessageCodec } from './proto-codec.js';

export const CHANNEL_MAGIC = Buffer.from('KVC1', 'latin1');
export const HEADER_BYTES = 12;
/** Larger payloads are a protocol error (the biggest master messages are batch replies). */
export const MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;
/**
 * The largest request payload the master accepts: requests are keys and sizes, far smaller than
 * the replies; a bigger frame closes the connection before it is buffered whole.
 */
export const MAX_REQUEST_PAYLOAD_BYTES = 16 * 1024 * 1024;

export const FrameKind = {
  /** client -> master: a request message of `method`. */
  REQUEST: 0,
  /** master -> client: the response message of `method` for request `id`. */
  RESPONSE: 1,
  /** master -> client: request `id` failed before the method ran; payload is a UTF-8 reason. */
  ERROR: 2,
  // 3 is AUTH, the cluster-secret handshake (common/cluster-secret.ts).
  /**
   * master -> client, id 0, unasked: `method` names what to do now (Ping: copies wait for this
   * client, ping at once); empty payload. Sent only on connections that asked (PingRequest.copy_push).
   */
  NOTICE: 4,
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
  putHeader(buf, 0, buf.length - HEADER_BYTES, kind, id, method);
  return buf;
}

function putHeader(buf: Buffer, at: number, length: number, kind: FrameKind, id: number, method: number): void {
  buf.writeUInt32LE(length, at);
  buf.writeUInt32LE(id >>> 0, at + 4);
  buf.writeUInt16LE(method, at + 8);
  buf[at + 10] = kind;
  buf[at + 11] = 0;
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

/** Size of the buffers frames are encoded into; a flush that leaves less than SLAB_LOW free starts a new one. */
const SLAB_BYTES = 256 * 1024;
const SLAB_LOW = 32 * 1024;

/**
 * Outgoing frames, encoded in place: a message is written by its codec straight into a shared
 * slab after a reserved header, and the header is filled in once the length is known. Every frame
 * queued during one turn of the event loop goes out in a single socket write on the next tick, as
 * a view of the slab (many requests or replies per syscall). A burst of replies so costs one
 * buffer per SLAB_BYTES, not a buffer per message plus copies into a joined buffer; handed-out
 * views are never written again (later frames go after them, or into a new slab).
 */
export class FrameWriter {
  private readonly w = new Writer(SLAB_BYTES);
  /** Start of the bytes not yet handed to `write`. */
  private start = 0;
  private frames = 0;
  private scheduled = false;
  /** Where the last frame queued by pushMessage begins, or -1 once it cannot be dropped. */
  private lastAt = -1;

  constructor(private readonly write: (data: Buffer) => void) {}

  /** Frames and bytes queued for the next write. */
  get queuedFrames(): number {
    return this.frames;
  }

  get queued(): number {
    return this.w.pos - this.start;
  }

  /**
   * Queues a frame carrying `msg` encoded by `codec` and returns its payload length (the caller
   * may `dropLast` a frame too big to send). Throws TypeError, queuing nothing, when `msg` does
   * not encode.
   */
  pushMessage(kind: FrameKind, id: number, method: number, codec: MessageCodec, msg: object): number {
    const w = this.w;
    this.room(SLAB_LOW); // most messages fit; a bigger one grows the slab as it is written
    const at = w.pos;
    w.pos = at + HEADER_BYTES;
    try {
      encodeInto(codec, w, msg);
    } catch (e) {
      w.pos = at;
      this.lastAt = -1;
      throw e;
    }
    const length = w.pos - at - HEADER_BYTES;
    putHeader(w.buf, at, length, kind, id, method);
    this.queuedOne();
    this.lastAt = at;
    return length;
  }

  /**
   * Takes back the frame the last pushMessage queued (before it is flushed; throws otherwise),
   * e.g. a reply too big for the peer to accept. A slab grown for it is given up.
   */
  dropLast(): void {
    const w = this.w;
    if (this.lastAt < 0) throw new Error('dropLast: no frame to drop (none pushed since the last flush or push of another kind)');
    w.pos = this.lastAt;
    this.lastAt = -1;
    this.frames--;
    if (w.buf.length > SLAB_BYTES) {
      const unsent = w.pos - this.start;
      const next = Buffer.allocUnsafe(Math.max(SLAB_BYTES, 2 * unsent));
      w.buf.copy(next, 0, this.start, w.pos);
      w.buf = next;
      w.pos = unsent;
      this.start = 0;
    }
  }

  /** Queues a frame whose payload is already encoded. */
  pushPayload(kind: FrameKind, id: number, method: number, payload: Uint8Array): void {
    const w = this.w;
    this.lastAt = -1;
    this.room(HEADER_BYTES + payload.length);
    const at = w.pos;
    putHeader(w.buf, at, payload.length, kind, id, method);
    w.buf.set(payload, at + HEADER_BYTES);
    w.pos = at + HEADER_BYTES + payload.length;
    this.queuedOne();
  }

  /** Queues bytes as they are (the connection's magic), not counted as a frame. */
  pushRaw(bytes: Uint8Array): void {
    const w = this.w;
    this.lastAt = -1;
    this.room(bytes.length);
    w.buf.set(bytes, w.pos);
    w.pos += bytes.length;
    this.schedule();
  }

  /** Makes `n` bytes free after w.pos: a new slab takes over the unsent bytes when the current one is short. */
  private room(n: number): void {
    const w = this.w;
    if (w.buf.length - w.pos >= n) return;
    const unsent = w.pos - this.start;
    const next = Buffer.allocUnsafe(Math.max(SLAB_BYTES, 2 * (unsent + n)));
    w.buf.copy(next, 0, this.start, w.pos);
    w.buf = next;
    w.pos = unsent;
    this.start = 0;
  }

  private queuedOne(): void {
    this.frames++;
    this.schedule();
  }

  private schedule(): void {
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(this.flush);
    }
  }

  readonly flush = (): void => {
    this.scheduled = false;
    this.lastAt = -1;
    const w = this.w;
    if (w.pos === this.start) return;
    const data = w.buf.subarray(this.start, w.pos);
    this.frames = 0;
    this.start = w.pos;
    // a slab grown for a huge message is left to the view handed out, not kept for small ones
    if (w.buf.length > SLAB_BYTES) {
      w.buf = Buffer.allocUnsafe(SLAB_BYTES);
      w.pos = this.start = 0;
    }
    this.write(data);
  };
}
