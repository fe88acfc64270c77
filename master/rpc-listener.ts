// The RPC port: one TCP listener shared by gRPC and the fast channel. The first bytes of each
// connection pick the protocol: the HTTP/2 preface ("PRI * HTTP/2.0") goes to grpc-js through
// its connection injector, the channel magic "KVC1" to a ChannelConnection; anything else is
// closed. Applies TCP_NODELAY and the idle timeout to both.
import { createServer, type Server, type Socket } from 'node:net';
import type { ConnectionInjector } from '@grpc/grpc-js';
import { CHANNEL_MAGIC } from '../common/channel-frame.js';
import type { Logger } from '../common/logger.js';
import type { MethodInfo } from '../common/master-proto.js';
import { ChannelConnection } from './channel-server.js';
import type { RpcDispatcher } from './rpc-dispatcher.js';

const HTTP2_PREFACE = Buffer.from('PRI ', 'latin1');
const SNIFF_BYTES = 4;
/** A connection that has not sent its first 4 bytes by then is closed. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

export interface RpcListenerOptions {
  host: string;
  port: number;
  noDelay: boolean;
  /** Close connections idle this long (ms); 0 disables. */
  idleTimeoutMs: number;
}

export class RpcListener {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly channelSockets = new Set<Socket>();

  constructor(
    private readonly opts: RpcListenerOptions,
    private readonly grpcInjector: ConnectionInjector,
    private readonly methods: readonly MethodInfo[],
    private readonly dispatcher: RpcDispatcher,
    private readonly log: Logger,
  ) {
    this.server = createServer({ noDelay: opts.noDelay }, (socket) => this.onConnection(socket));
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.removeListener('error', reject);
        this.server.on('error', (e) => this.log.error(`RPC listener: ${e.message}`));
        const addr = this.server.address();
        resolve(typeof addr === 'object' && addr ? addr.port : this.opts.port);
      });
    });
  }

  get connections(): number {
    return this.sockets.size;
  }

  /** Stops accepting, lets gRPC finish calls in flight for `graceMs`, then drops every socket. */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    // gRPC sends GOAWAY and closes when its calls finish; channel replies already queued leave
    // on the next tick, then those sockets end.
    this.grpcInjector.drain(graceMs);
    process.nextTick(() => {
      for (const s of this.channelSockets) s.end();
    });
    const timer = setTimeout(() => {
      for (const s of this.sockets) s.destroy();
    }, graceMs);
    timer.unref();
    await closed;
    clearTimeout(timer);
    this.grpcInjector.destroy();
  }

  private onConnection(socket: Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.setNoDelay(this.opts.noDelay);
    if (this.opts.idleTimeoutMs > 0) {
      socket.setTimeout(this.opts.idleTimeoutMs, () => {
        this.log.info(`closing idle RPC connection from ${socket.remoteAddress}:${socket.remotePort}`);
        socket.destroy();
      });
    }
    let head: Buffer = Buffer.alloc(0);
    const onError = (e: Error): void => this.log.debug(`RPC connection ${socket.remoteAddress}: ${e.message}`);
    socket.on('error', onError);
    const handshake = setTimeout(() => {
      this.log.info(`RPC connection from ${socket.remoteAddress}:${socket.remotePort} sent no protocol preface in ${HANDSHAKE_TIMEOUT_MS} ms; closing`);
      socket.destroy();
    }, HANDSHAKE_TIMEOUT_MS);
    handshake.unref();
    socket.once('close', () => clearTimeout(handshake));
    const sniff = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      if (head.length < SNIFF_BYTES) return;
      clearTimeout(handshake);
      socket.removeListener('data', sniff);
      socket.pause();
      const magic = head.subarray(0, SNIFF_BYTES);
      if (magic.equals(CHANNEL_MAGIC)) {
        this.channelSockets.add(socket);
        socket.once('close', () => this.channelSockets.delete(socket));
        const conn = new ChannelConnection(socket, this.methods, this.dispatcher, this.log);
        const rest = head.subarray(SNIFF_BYTES);
        if (rest.length > 0) conn.onData(rest);
        socket.resume();
      } else if (magic.equals(HTTP2_PREFACE)) {
        socket.removeListener('error', onError);
        socket.unshift(head);
        this.grpcInjector.injectConnection(socket);
      } else {
        this.log.warn(`RPC connection from ${socket.remoteAddress}:${socket.remotePort} speaks neither gRPC nor the channel; closing`);
        socket.destroy();
      }
    };
    socket.on('data', sniff);
  }
}
