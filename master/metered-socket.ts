// A gRPC connection as grpc-js receives it: a Duplex around the TCP socket that passes every byte
// through unchanged and shows both directions to an Http2RequestMeter, so the RPC listener knows
// how many request bytes the connection makes grpc-js hold (Node's HTTP/2 session would otherwise
// read the socket natively, out of JavaScript's sight). Reading follows the session's demand:
// the socket pauses while the session's buffer is full.
import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { Http2RequestMeter } from './http2-request-meter.js';

export class MeteredSocket extends Duplex {
  readonly meter = new Http2RequestMeter();

  constructor(
    readonly socket: Socket,
    private readonly now: () => number,
    /** Called after each chunk received or sent (the meter has counted it). */
    private readonly onChange: () => void,
  ) {
    super({ allowHalfOpen: false });
    socket.on('data', (chunk: Buffer) => {
      this.meter.received(chunk, this.now());
      this.onChange();
      if (!this.push(chunk)) socket.pause();
    });
    socket.on('end', () => this.push(null));
    socket.on('close', () => this.destroy());
    socket.on('error', (e) => this.destroy(e));
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.meter.sent(chunk);
    this.onChange();
    this.socket.write(chunk, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.socket.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy();
    callback(error);
  }

  // what grpc-js and Node's HTTP/2 session read of a connection
  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.socket.remotePort;
  }

  get remoteFamily(): string | undefined {
    return this.socket.remoteFamily;
  }

  get localAddress(): string | undefined {
    return this.socket.localAddress;
  }

  get localPort(): number | undefined {
    return this.socket.localPort;
  }

  setNoDelay(noDelay?: boolean): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable?: boolean, delay?: number): this {
    this.socket.setKeepAlive(enable, delay);
    return this;
  }
}
