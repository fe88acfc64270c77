// How many request bytes a gRPC connection makes the master hold, read from the HTTP/2 frames
// passing through it (RFC 9113 section 4.1: a 9-byte header of length, type, flags and stream
// id). grpc-js reads every DATA frame at once and keeps a request message until it is whole (up
// to the 16 MiB receive limit) and offers no hook before that, so the master counts for itself:
// a request stream is open from the client's HEADERS until its END_STREAM, a RST_STREAM either
// way, or the server's final HEADERS (the call was answered); its DATA payload bytes are held
// meanwhile. Pure: the socket wrapper (metered-socket.ts) feeds the bytes of both directions.

const PREFACE_BYTES = 24; // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", client to server only
const HEADER_BYTES = 9;
const DATA = 0x0;
const HEADERS = 0x1;
const RST_STREAM = 0x3;
const END_STREAM = 0x1;

/** Walks one direction's frame headers across any chunking; payloads are skipped, not kept. */
class FrameHeaderReader {
  private skip: number;
  private readonly head = Buffer.alloc(HEADER_BYTES);
  private have = 0;

  constructor(
    prefaceBytes: number,
    private readonly onFrame: (type: number, flags: number, stream: number, length: number) => void,
  ) {
    this.skip = prefaceBytes;
  }

  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - at);
        this.skip -= n;
        at += n;
        continue;
      }
      const n = Math.min(HEADER_BYTES - this.have, chunk.length - at);
      this.head.set(chunk.subarray(at, at + n), this.have);
      this.have += n;
      at += n;
      if (this.have < HEADER_BYTES) return;
      this.have = 0;
      const h = this.head;
      const length = (h[0] << 16) | (h[1] << 8) | h[2];
      const stream = h.readUInt32BE(5) & 0x7fffffff;
      this.skip = length;
      this.onFrame(h[3], h[4], stream, length);
    }
  }
}

export class Http2RequestMeter {
  /** Open request streams: DATA bytes received so far, and when the stream began (ms). */
  private readonly streams = new Map<number, { bytes: number; since: number }>();
  private total = 0;
  private readonly inbound: FrameHeaderReader;
  private readonly outbound: FrameHeaderReader;
  private now = 0;

  constructor() {
    this.inbound = new FrameHeaderReader(PREFACE_BYTES, (type, flags, stream, length) => this.fromClient(type, flags, stream, length));
    this.outbound = new FrameHeaderReader(0, (type, flags, stream) => this.fromServer(type, flags, stream));
  }

  /** Bytes the client sent, received at monotonic ms `now`. */
  received(chunk: Uint8Array, now: number): void {
    this.now = now;
    this.inbound.push(chunk);
  }

  /** Bytes the server sent. */
  sent(chunk: Uint8Array): void {
    this.outbound.push(chunk);
  }

  /** Request bytes held for open streams. */
  get bytes(): number {
    return this.total;
  }

  /** When the oldest open request stream began, or -1 when none is open. */
  get oldestSince(): number {
    let oldest = -1;
    for (const s of this.streams.values()) if (oldest < 0 || s.since < oldest) oldest = s.since;
    return oldest;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  private fromClient(type: number, flags: number, stream: number, length: number): void {
    if (stream === 0) return;
    if (type === HEADERS) {
      if (!this.streams.has(stream)) this.streams.set(stream, { bytes: 0, since: this.now });
      if (flags & END_STREAM) this.close(stream);
    } else if (type === DATA) {
      const s = this.streams.get(stream);
      if (s === undefined) return; // answered already: the server drops what follows
      s.bytes += length;
      this.total += length;
      if (flags & END_STREAM) this.close(stream);
    } else if (type === RST_STREAM) this.close(stream);
  }

  private fromServer(type: number, flags: number, stream: number): void {
    if (stream === 0) return;
    // the call's status (trailers) or a reset: grpc-js no longer holds the request
    if ((type === HEADERS && flags & END_STREAM) || type === RST_STREAM) this.close(stream);
  }

  private close(stream: number): void {
    const s = this.streams.get(stream);
    if (s === undefined) return;
    this.total -= s.bytes;
    this.streams.delete(stream);
  }
}
