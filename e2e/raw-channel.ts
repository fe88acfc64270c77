// A raw fast-channel connection for tests: send frames as bytes, await the reply to an id or the
// close. No client library in between, so a test can send what MasterClient never would.
import { connect, type Socket } from 'node:net';
import { CHANNEL_MAGIC, FrameDecoder } from '../common/channel-frame.js';

export interface Reply {
  kind: number;
  id: number;
  method: number;
  payload: Buffer;
}

/** A raw fast-channel connection: send frames, await the reply to an id, or the close. */
export class RawChannel {
  readonly socket: Socket;
  private readonly replies = new Map<number, Reply>();
  private readonly waiters = new Map<number, (r: Reply) => void>();
  readonly closed: Promise<void>;

  constructor(host: string, port: number) {
    this.socket = connect(port, host);
    this.socket.write(CHANNEL_MAGIC);
    const dec = new FrameDecoder((kind, id, method, payload) => {
      const r = { kind, id, method, payload: Buffer.from(payload) };
      const w = this.waiters.get(id);
      if (w) {
        this.waiters.delete(id);
        w(r);
      } else this.replies.set(id, r);
    });
    this.socket.on('data', (d: Buffer) => dec.push(d));
    this.socket.on('error', () => undefined); // a reset after the master closes; `closed` reports it
    this.closed = new Promise((r) => this.socket.once('close', () => r()));
  }

  static of(address: string): RawChannel {
    const [host, port] = address.split(':');
    return new RawChannel(host, Number(port));
  }

  send(frame: Buffer): void {
    this.socket.write(frame);
  }

  reply(id: number): Promise<Reply> {
    const r = this.replies.get(id);
    if (r) return Promise.resolve(r);
    return new Promise((resolve, reject) => {
      this.waiters.set(id, resolve);
      void this.closed.then(() => reject(new Error(`connection closed before the reply to ${id}`)));
    });
  }

  get destroyed(): boolean {
    return this.socket.destroyed;
  }

  close(): void {
    this.socket.destroy();
  }
}
