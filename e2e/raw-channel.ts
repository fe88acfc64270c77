// A raw fast-channel connection for tests: send frames as bytes, await the reply to an id or the
// close. No client library in between, so a test can send what MasterClient never would. With
// STORE_CLUSTER_SECRET_FILE set (the test run's secret) it passes the handshake first; frames
// sent before it completes are queued.
import { connect, type Socket } from 'node:net';
import { CHANNEL_MAGIC, FrameDecoder } from '../common/channel-frame.js';
import { clientHandshake, clientSecret } from '../common/cluster-secret.js';

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

  private queued: Buffer[] | undefined;

  /** `secret`: the run's (STORE_CLUSTER_SECRET_FILE) by default; null: none (an unauthenticated server, or a stranger). */
  constructor(host: string, port: number, secretOption?: Buffer | null) {
    const secret = secretOption === null ? undefined : (secretOption ?? clientSecret());
    this.socket = connect(port, host);
    const dec = new FrameDecoder((kind, id, method, payload) => {
      const r = { kind, id, method, payload: Buffer.from(payload) };
      const w = this.waiters.get(id);
      if (w) {
        this.waiters.delete(id);
        w(r);
      } else this.replies.set(id, r);
    });
    const read = (): void => {
      this.socket.on('data', (d: Buffer) => dec.push(d));
    };
    this.socket.on('error', () => undefined); // a reset after the master closes; `closed` reports it
    if (secret === undefined) {
      this.socket.write(CHANNEL_MAGIC);
      read();
    } else {
      this.queued = [];
      this.socket.once('connect', () => {
        clientHandshake(this.socket, secret, 'master-channel', CHANNEL_MAGIC).then(
          (rest) => {
            read();
            if (rest.length > 0) dec.push(rest);
            this.socket.resume();
            for (const f of this.queued ?? []) this.socket.write(f);
            this.queued = undefined;
          },
          () => this.socket.destroy(),
        );
      });
    }
    this.closed = new Promise((r) => this.socket.once('close', () => r()));
  }

  static of(address: string, secret?: Buffer | null): RawChannel {
    const [host, port] = address.split(':');
    return new RawChannel(host, Number(port), secret);
  }

  send(frame: Buffer): void {
    if (this.queued) this.queued.push(frame);
    else this.socket.write(frame);
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
