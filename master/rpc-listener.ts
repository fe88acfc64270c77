// The RPC port: one TCP listener shared by gRPC and the fast channel. The first bytes of each
// connection pick the protocol: the HTTP/2 preface ("PRI * HTTP/2.0") goes to grpc-js through
// its connection injector (wrapped in a MeteredSocket that counts the request bytes grpc-js
// holds), the channel magic "KVC1" to a ChannelConnection, "KVR1" (a standby following this
// leader, master/state/replication-leader.ts) to its handler; anything else is closed. Applies
// TCP_NODELAY and the idle timeout to both, and bounds what connections can make the master hold:
// at most `maxConnections` at once (more are closed on accept; an accept that fails for want of
// file descriptors is counted, never fatal), and the request bytes of incomplete requests within
// a time limit per request and a total across connections (request-budget.ts). With a cluster
// secret, channel and replication connections pass the challenge-response of
// common/cluster-secret.ts right after their magic, before any frame is served. With --tls_cert a
// connection opening with a TLS handshake is gRPC over TLS (common/tls-server.ts) and plain gRPC
// (h2c) is refused; the fast channel and replication stay plain TCP (docs/threat-model.md).
import { createServer, type Server, type Socket } from 'node:net';
import type { ConnectionInjector } from '@grpc/grpc-js';
import { CHANNEL_MAGIC } from '../common/channel-frame.js';
import { acceptAuthenticated, type FramedInterface } from '../common/cluster-secret.js';
import type { Logger } from '../common/logger.js';
import type { MethodInfo } from '../common/master-proto.js';
import type { CopierPush } from './copier-push.js';
import { ChannelConnection } from './channel-server.js';
import { MeteredSocket } from './metered-socket.js';
import { RequestBudget } from './request-budget.js';
import { startsTls, TlsTerminator } from '../common/tls-server.js';
import type { TlsMaterial } from '../common/tls-material.js';
import type { RpcDispatcher } from './rpc-dispatcher.js';

const HTTP2_PREFACE = Buffer.from('PRI ', 'latin1');
const SNIFF_BYTES = 4;
/** A connection that has not sent its first 4 bytes by then is closed. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Longest interval between two checks of the request timeout. */
const CHECK_INTERVAL_MS = 1000;
/** Lines about refused or closed connections logged per second at most (a flood is summed up). */
const LOG_LINES_PER_SECOND = 10;

export interface RpcListenerOptions {
  host: string;
  port: number;
  noDelay: boolean;
  /** Close connections idle this long (ms); 0 disables. */
  idleTimeoutMs: number;
  /** Connections served at once; more are closed on accept. */
  maxConnections: number;
  /** Close a connection whose request has not fully arrived this long after it began (ms); 0 disables. */
  requestTimeoutMs: number;
  /** Incomplete request bytes held across all connections; past it the largest holders are closed. */
  maxBufferedRequestBytes: number;
  /** Connections opened with the replication magic "KVR1" (a standby following this leader). */
  replication?: { magic: Buffer; accept: (socket: Socket, rest: Buffer) => void };
  /** The cluster secret channel and replication peers must prove; undefined: no handshake (--allow_unauthenticated). */
  secret?: Buffer;
  /** Counts a peer refused by the handshake, by interface (store_master_auth_refused_total). */
  authRefused?: (iface: string) => void;
  /** gRPC over TLS only (--tls_cert/--tls_key; --tls_ca: clients must present a certificate of that CA). */
  tls?: TlsMaterial;
  /** Copy notices to channel clients that ask (copier-push.ts). */
  copierPush?: CopierPush;
}

/** Why a connection was refused at accept. */
export type RefusalReason = 'limit' | 'accept_error';
/** Why the master closed a connection. */
export type CloseReason = 'request_timeout' | 'request_budget' | 'handshake_timeout' | 'idle' | 'unknown_protocol' | 'protocol_error' | 'tls_required' | 'tls_refused';

/** Where the listener reports refusals and closes (the master's metrics). */
export interface ConnectionEvents {
  refused(reason: RefusalReason): void;
  closed(reason: CloseReason): void;
}

export class RpcListener {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly channelSockets = new Set<Socket>();
  private readonly budget: RequestBudget<Socket>;
  private checker: NodeJS.Timeout | undefined;
  private logWindow = 0;
  private logged = 0;
  private suppressed = 0;
  private readonly tls: TlsTerminator | undefined;

  constructor(
    private readonly opts: RpcListenerOptions,
    private readonly grpcInjector: ConnectionInjector,
    private readonly methods: readonly MethodInfo[],
    private readonly dispatcher: RpcDispatcher,
    private readonly log: Logger,
    private readonly events: ConnectionEvents = { refused: () => {}, closed: () => {} },
    private readonly now: () => number = () => performance.now(),
  ) {
    this.server = createServer({ noDelay: opts.noDelay }, (socket) => this.onConnection(socket));
    this.server.maxConnections = opts.maxConnections;
    this.budget = new RequestBudget({ maxBytes: opts.maxBufferedRequestBytes, timeoutMs: opts.requestTimeoutMs });
    if (opts.tls) {
      this.tls = new TlsTerminator(opts.tls, {
        alpn: ['h2'],
        secure: (s) => {
          s.once('close', () => this.budget.forget(s));
          this.injectGrpc(s);
        },
        refused: (why, peer) => {
          this.events.closed('tls_refused');
          this.note(`closing RPC connection from ${peer}: ${why}`);
        },
      });
    }
  }

  /** New TLS material for connections accepted from now on (a renewed certificate). */
  reloadTls(m: TlsMaterial): void {
    this.tls?.reload(m);
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.removeListener('error', reject);
        this.server.on('error', (e: NodeJS.ErrnoException) => this.onServerError(e));
        this.server.on('drop', (d) => {
          this.events.refused('limit');
          this.note(`RPC connection from ${d?.remoteAddress}:${d?.remotePort} refused: ${this.opts.maxConnections} connections open (--rpc_max_connections)`);
        });
        if (this.opts.requestTimeoutMs > 0) {
          this.checker = setInterval(() => this.closeExpired(), Math.min(CHECK_INTERVAL_MS, Math.max(10, this.opts.requestTimeoutMs / 4)));
          this.checker.unref();
        }
        const addr = this.server.address();
        resolve(typeof addr === 'object' && addr ? addr.port : this.opts.port);
      });
    });
  }

  get connections(): number {
    return this.sockets.size;
  }

  /** Bytes of incomplete requests held across all connections. */
  get bufferedRequestBytes(): number {
    return this.budget.bytes;
  }

  /** Stops accepting, lets gRPC finish calls in flight for `graceMs`, then drops every socket. */
  async close(graceMs: number): Promise<void> {
    if (this.checker) clearInterval(this.checker);
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

  /** An accept that failed (EMFILE, ENFILE, ENOBUFS...): counted and logged; the listener goes on. */
  private onServerError(e: NodeJS.ErrnoException): void {
    if (e.syscall === 'accept') {
      this.events.refused('accept_error');
      this.note(`RPC listener: accept failed: ${e.code ?? e.message} (out of file descriptors? see ulimit -n and --rpc_max_connections)`);
    } else this.log.error(`RPC listener: ${e.message}`);
  }

  /** Logs a line about a refused or closed connection, at most LOG_LINES_PER_SECOND a second. */
  private note(line: string): void {
    const window = Math.floor(this.now() / 1000);
    if (window !== this.logWindow) {
      if (this.suppressed > 0) this.log.warn(`... and ${this.suppressed} more such lines in the last second`);
      this.logWindow = window;
      this.logged = 0;
      this.suppressed = 0;
    }
    if (this.logged++ < LOG_LINES_PER_SECOND) this.log.warn(line);
    else this.suppressed++;
  }

  private closeFor(socket: Socket, reason: CloseReason, why: string): void {
    if (socket.destroyed) return;
    this.events.closed(reason);
    this.note(`closing RPC connection from ${socket.remoteAddress}:${socket.remotePort}: ${why}`);
    socket.destroy();
  }

  /** Records what `socket` holds of incomplete requests; closes the largest holders past the budget. */
  private held(socket: Socket, bytes: number, since: number): void {
    for (const victim of this.budget.set(socket, bytes, since)) {
      this.closeFor(
        victim,
        'request_budget',
        `incomplete requests across connections passed --rpc_max_buffered_request_bytes=${this.opts.maxBufferedRequestBytes}; this one held the most`,
      );
    }
  }

  private closeExpired(): void {
    for (const s of this.budget.expired(this.now())) {
      this.closeFor(s, 'request_timeout', `a request did not fully arrive within --rpc_request_timeout_seconds=${this.opts.requestTimeoutMs / 1000}`);
    }
  }

  /** Runs `serve` once the peer proved the cluster secret (common/cluster-secret.ts acceptAuthenticated); a refused peer is counted and logged (rate-limited). */
  private authenticated(socket: Socket, iface: FramedInterface, rest: Buffer, serve: (rest: Buffer) => void): void {
    const from = `${socket.remoteAddress}:${socket.remotePort}`;
    acceptAuthenticated(socket, this.opts.secret, iface, rest, {
      serve,
      refused: (e) => {
        this.opts.authRefused?.(iface);
        this.note(`${iface} connection from ${from} refused: ${e.message}`);
      },
      gone: (e) => this.log.debug(`${iface} connection from ${from}: ${e.message}`),
    });
  }

  /** Hands a gRPC connection (the socket, or the TLS socket over it) to grpc-js, metered. */
  private injectGrpc(socket: Socket): void {
    const metered: MeteredSocket = new MeteredSocket(socket, this.now, () => this.held(socket, metered.meter.bytes, metered.meter.oldestSince));
    metered.on('error', (e: Error) => this.log.debug(`RPC connection ${socket.remoteAddress}: ${e.message}`));
    this.grpcInjector.injectConnection(metered);
  }

  private onConnection(socket: Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => {
      this.sockets.delete(socket);
      this.budget.forget(socket);
    });
    socket.setNoDelay(this.opts.noDelay);
    if (this.opts.idleTimeoutMs > 0) {
      socket.setTimeout(this.opts.idleTimeoutMs, () => this.closeFor(socket, 'idle', `idle for ${this.opts.idleTimeoutMs} ms (--rpc_conn_timeout_seconds)`));
    }
    let head: Buffer = Buffer.alloc(0);
    const onError = (e: Error): void => this.log.debug(`RPC connection ${socket.remoteAddress}: ${e.message}`);
    socket.on('error', onError);
    const handshake = setTimeout(() => this.closeFor(socket, 'handshake_timeout', `sent no protocol preface in ${HANDSHAKE_TIMEOUT_MS} ms`), HANDSHAKE_TIMEOUT_MS);
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
        this.authenticated(socket, 'master-channel', head.subarray(SNIFF_BYTES), (rest) => {
          const conn = new ChannelConnection(
            socket,
            this.methods,
            this.dispatcher,
            this.log,
            undefined,
            {
              now: this.now,
              held: (bytes, since) => this.held(socket, bytes, since),
              protocolError: () => this.events.closed('protocol_error'),
            },
            this.opts.copierPush,
          );
          if (rest.length > 0) conn.onData(rest);
          socket.resume();
        });
      } else if (this.opts.replication !== undefined && magic.equals(this.opts.replication.magic)) {
        const replication = this.opts.replication;
        this.authenticated(socket, 'master-replication', head.subarray(SNIFF_BYTES), (rest) => {
          // A standby: long-lived and quiet between changes, so no idle timeout.
          socket.setTimeout(0);
          socket.removeListener('error', onError);
          replication.accept(socket, rest);
          socket.resume();
        });
      } else if (this.tls && startsTls(head)) {
        this.tls.accept(socket, head);
      } else if (this.tls && magic.equals(HTTP2_PREFACE)) {
        this.closeFor(socket, 'tls_required', 'plain gRPC on a TLS port: this master serves gRPC over TLS only (--tls_cert); the client needs the cluster CA (STORE_TLS_CA_FILE)');
      } else if (magic.equals(HTTP2_PREFACE)) {
        socket.removeListener('error', onError);
        socket.unshift(head);
        this.injectGrpc(socket);
      } else {
        this.closeFor(socket, 'unknown_protocol', 'speaks neither gRPC nor the channel');
      }
    };
    socket.on('data', sniff);
  }
}
