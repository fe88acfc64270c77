// Where dummy clients reach the real client: a Unix socket in the shared directory (same pod or
// host: the fast path) and the TCP port --rpc_port. Both speak the KVD1 channel (the master
// channel's framing with ClientService's method numbers: many calls in flight on one connection,
// replies in any order); the TCP port also serves gRPC (HTTP/2 preface) for remote callers and
// other languages. One DummySession per channel connection holds its shared regions; they are
// released when the connection ends. gRPC calls share one session that refuses regions. The Unix
// socket admits only peers of an allowed uid (SO_PEERCRED, common/peer-uids.ts): the file's mode
// alone depends on the shared directory's permissions. With a cluster secret, channel
// connections (TCP and Unix) pass the "dummy-client" challenge-response after their magic and
// gRPC calls carry x-kvstore-auth (common/cluster-secret.ts); refusals are counted and logged.
// With --tls_cert, gRPC on the TCP port is TLS only (plain gRPC refused); KVD1 stays plain TCP
// (docs/threat-model.md).
import { createServer, type Server, type Socket } from 'node:net';
import { existsSync, unlinkSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { encodeFrame, FrameDecoder, FrameKind, FrameWriter } from '../common/channel-frame.js';
import { clientMethods } from '../common/client-proto.js';
import { decodeWith } from '../common/proto-codec.js';
import type { MethodInfo } from '../common/service-proto.js';
import { protoPath } from '../common/service-proto.js';
import { acceptAuthenticated, AUTH_FRAME_KIND, NonceCache, NOT_AUTHENTICATING, RefusalLog } from '../common/cluster-secret.js';
import { ErrorCode } from '../common/error-code.js';
import { grpcAuthProblem } from '../common/grpc-auth.js';
import type { Logger } from '../common/logger.js';
import { peerRefusal, peerUidAllowed, type PeerCredentials } from '../common/peer-uids.js';
import type { ClientService } from './client-service.js';
import { DummySession, type SessionHost } from './dummy-session.js';
import type { TlsMaterial } from '../common/tls-material.js';
import { startsTls, TlsTerminator } from '../common/tls-server.js';

export const DUMMY_CHANNEL_MAGIC = Buffer.from('KVD1', 'latin1');
const HTTP2_PREFACE = Buffer.from('PRI ', 'latin1');
/** Requests carry inline values up to the service's max_inline_bytes plus the message around them. */
export const MAX_DUMMY_REQUEST_BYTES = 64 * 1024 * 1024 + 4096;
/** A connection that has not sent its first 4 bytes by then is closed. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Replies queued in the kernel-bound buffer beyond which reading a connection's requests pauses. */
const MAX_UNSENT_BYTES = 64 * 1024 * 1024;

/** The Unix socket of the store service whose ClientService listens on TCP port `port`. */
export function dummySocketPath(shmDir: string, port: number): string {
  return `${shmDir.replace(/\/+$/, '')}/kvstore-${port}.sock`;
}

export interface ClientServiceServerOptions {
  host: string;
  port: number;
  /** The Unix socket's directory (the shared directory); no Unix socket when empty. */
  shmDir: string;
  log: Logger;
  /** uids admitted on the Unix socket (this process's own, root and --peer_uids). */
  peerUids: readonly number[];
  /** SO_PEERCRED of a Unix socket connection (native peerCredentials). */
  peerCredentials: (socket: Socket) => PeerCredentials | null;
  /** The cluster secret peers must prove; undefined: none (--allow_unauthenticated). */
  secret?: Buffer;
  /** Counts a refused peer by interface ("dummy-client", "dummy-client-grpc"). */
  authRefused?: (iface: string) => void;
  /** gRPC on the TCP port over TLS only (--tls_cert/--tls_key; --tls_ca: mTLS). */
  tls?: TlsMaterial;
}

/** One KVD1 connection: frames in, handler replies out (in completion order). */
class DummyChannelConnection {
  private readonly writer: FrameWriter;
  private readonly decoder: FrameDecoder;

  constructor(
    private readonly socket: Socket,
    private readonly service: () => ClientService | undefined,
    readonly session: DummySession,
    private readonly log: Logger,
    /** Counts each request received (ClientServiceServer.stats().calls). */
    private readonly served: () => void,
  ) {
    this.writer = new FrameWriter((data) => {
      if (socket.destroyed) return;
      socket.write(data);
      if (socket.writableLength > MAX_UNSENT_BYTES && !socket.isPaused()) {
        socket.pause();
        socket.once('drain', () => socket.resume());
      }
    });
    this.decoder = new FrameDecoder((kind, id, method, payload) => this.onFrame(kind, id, method, payload), MAX_DUMMY_REQUEST_BYTES);
    socket.on('data', this.onData);
  }

  readonly onData = (chunk: Buffer): void => {
    try {
      this.decoder.push(chunk);
    } catch (e) {
      this.log.warn(`dummy client ${this.session.peer}: ${(e as Error).message}; closing`);
      this.socket.destroy();
    }
  };

  private onFrame(kind: number, id: number, methodIndex: number, payload: Buffer): void {
    const m = clientMethods[methodIndex];
    if (kind !== FrameKind.REQUEST || !m) {
      // an AUTH frame: the dummy client has a cluster secret, this service runs without one
      const why = kind === AUTH_FRAME_KIND ? NOT_AUTHENTICATING : !m ? `unknown method ${methodIndex}` : `unexpected frame kind ${kind}`;
      this.writer.pushPayload(FrameKind.ERROR, id, methodIndex, Buffer.from(why));
      return;
    }
    let req: object;
    try {
      req = decodeWith<object>(m.requestCodec, payload);
    } catch (e) {
      this.reply(m, id, { status_code: ErrorCode.INVALID_PARAMS, error: `malformed ${m.name} request: ${(e as Error).message}` });
      return;
    }
    this.served();
    const service = this.service();
    if (!service) {
      this.reply(m, id, { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, error: 'the store service is starting (not mounted yet)' });
      return;
    }
    void service.invoke(m.call, req, this.session).then((res) => this.reply(m, id, res));
  }

  private reply(m: MethodInfo, id: number, res: object): void {
    if (this.socket.destroyed) return;
    try {
      this.writer.pushMessage(FrameKind.RESPONSE, id, m.index, m.responseCodec, res);
    } catch (e) {
      this.log.error(`${m.name}: cannot encode the reply: ${(e as Error).message}`);
      this.writer.pushMessage(FrameKind.RESPONSE, id, m.index, m.responseCodec, { status_code: ErrorCode.INTERNAL_ERROR, error: 'reply encoding failed' });
    }
  }
}

export class ClientServiceServer {
  private readonly tcp: Server;
  private unix: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly connections = new Set<DummyChannelConnection>();
  /** Requests received on channel connections since start (stats().calls). */
  private calls = 0;
  private readonly grpcServer: grpc.Server;
  private readonly injector: grpc.ConnectionInjector;
  private readonly grpcSession: DummySession;
  private socketPath = '';
  private boundPort = 0;
  private readonly refusals: RefusalLog;
  private readonly nonces = new NonceCache();
  private service: ClientService | undefined;
  private readonly tls: TlsTerminator | undefined;

  /** Listens at once; calls are answered UNAVAILABLE_IN_CURRENT_STATUS until serve() names the service. */
  constructor(
    private readonly host: SessionHost,
    private readonly opts: ClientServiceServerOptions,
  ) {
    this.tcp = createServer({ noDelay: true }, (s) => this.onConnection(s, `${s.remoteAddress}:${s.remotePort}`));
    this.grpcSession = new DummySession(host, 'grpc', false);
    this.refusals = new RefusalLog((line) => opts.log.warn(line));
    ({ server: this.grpcServer, injector: this.injector } = this.createGrpc());
    if (opts.tls) {
      this.tls = new TlsTerminator(opts.tls, {
        alpn: ['h2'],
        secure: (s) => this.injector.injectConnection(s),
        refused: (why, peer) => opts.log.warn(`dummy-client gRPC connection from ${peer} refused: ${why}`),
      });
    }
  }

  /** New TLS material for connections accepted from now on. */
  reloadTls(m: TlsMaterial): void {
    this.tls?.reload(m);
  }

  /** Binds the TCP port and the Unix socket; resolves with both. */
  async listen(): Promise<{ port: number; socketPath: string }> {
    this.boundPort = await new Promise<number>((resolve, reject) => {
      this.tcp.once('error', reject);
      this.tcp.listen(this.opts.port, this.opts.host, () => {
        this.tcp.removeListener('error', reject);
        this.tcp.on('error', (e) => this.opts.log.error(`ClientService listener: ${e.message}`));
        resolve((this.tcp.address() as { port: number }).port);
      });
    });
    if (this.opts.shmDir) {
      const path = dummySocketPath(this.opts.shmDir, this.boundPort);
      await clearStaleSocket(path);
      const unix = createServer((s) => {
        const cred = this.opts.peerCredentials(s);
        if (!peerUidAllowed(cred, this.opts.peerUids)) {
          this.opts.log.warn(peerRefusal(`dummy-client socket ${path}`, cred, this.opts.peerUids, '--peer_uids'));
          this.refuse(
            s,
            `uid ${cred?.uid ?? 'unknown'} may not use the dummy-client socket ${path} (the store service allows ${this.opts.peerUids.join(',')}; --peer_uids adds more)`,
          );
          return;
        }
        this.onConnection(s, cred ? `unix:${path} pid ${cred.pid}` : `unix:${path}`, true);
      });
      await new Promise<void>((resolve, reject) => {
        unix.once('error', reject);
        unix.listen(path, () => {
          unix.removeListener('error', reject);
          resolve();
        });
      });
      this.unix = unix;
      this.socketPath = path;
    }
    return { port: this.boundPort, socketPath: this.socketPath };
  }

  /** Starts answering calls with `service`. */
  serve(service: ClientService): void {
    this.service = service;
  }

  /**
   * Dummy clients connected now (channel connections), regions they hold, their bytes, and the
   * requests received on channel connections so far (reads a dummy served itself are not among them).
   */
  stats(): { connections: number; regions: number; regionBytes: number; calls: number } {
    let regions = 0;
    let regionBytes = 0;
    for (const c of this.connections) {
      regions += c.session.regionCount;
      regionBytes += c.session.regionBytes;
    }
    return { connections: this.connections.size, regions, regionBytes, calls: this.calls };
  }

  /** Stops accepting and ends every connection; their regions are released. */
  async close(): Promise<void> {
    const closing = [new Promise<void>((r) => this.tcp.close(() => r()))];
    if (this.unix) closing.push(new Promise<void>((r) => this.unix!.close(() => r())));
    for (const s of this.sockets) s.destroy();
    this.injector.destroy();
    this.grpcServer.forceShutdown();
    await Promise.all(closing);
    await Promise.all([...this.connections].map((c) => c.session.close()));
    if (this.socketPath) {
      try {
        unlinkSync(this.socketPath);
      } catch {
        // already gone
      }
    }
  }

  /**
   * A refused peer: its first request is answered with an ERROR frame saying why (so a dummy
   * client reports that, not a bare hang-up), then the connection is closed. Nothing else is
   * read or served; anything but the KVD1 channel, a frame over 64 KiB or no request within the
   * handshake time is closed at once.
   */
  private refuse(socket: Socket, reason: string): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => {}); // a reset is the peer's business
    const timer = setTimeout(() => socket.destroy(), HANDSHAKE_TIMEOUT_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
    let head = Buffer.alloc(0);
    let decoder: FrameDecoder | undefined;
    socket.on('data', (chunk: Buffer) => {
      if (!decoder) {
        head = Buffer.concat([head, chunk]);
        if (head.length < 4) return;
        if (!head.subarray(0, 4).equals(DUMMY_CHANNEL_MAGIC)) {
          socket.destroy();
          return;
        }
        decoder = new FrameDecoder((_kind, id, method) => {
          socket.removeAllListeners('data');
          socket.end(encodeFrame(FrameKind.ERROR, id, method, Buffer.from(reason)));
        }, 64 * 1024);
        chunk = head.subarray(4);
      }
      try {
        decoder.push(chunk);
      } catch {
        socket.destroy();
      }
    });
  }

  private onConnection(socket: Socket, peer: string, unix = false): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', (e) => this.opts.log.debug(`dummy client ${peer}: ${e.message}`));
    let head: Buffer = Buffer.alloc(0);
    const handshake = setTimeout(() => socket.destroy(), HANDSHAKE_TIMEOUT_MS);
    handshake.unref();
    socket.once('close', () => clearTimeout(handshake));
    const sniff = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      if (head.length < 4) return;
      clearTimeout(handshake);
      socket.removeListener('data', sniff);
      socket.pause();
      const magic = head.subarray(0, 4);
      if (magic.equals(DUMMY_CHANNEL_MAGIC)) {
        acceptAuthenticated(socket, this.opts.secret, 'dummy-client', head.subarray(4), {
          serve: (rest) => this.serveChannel(socket, peer, rest, unix),
          refused: (e) => {
            this.opts.authRefused?.('dummy-client');
            this.refusals.note(peer, `dummy client ${peer} refused: ${e.message}`);
          },
        });
      } else if (this.tls && startsTls(head)) {
        this.tls.accept(socket, head);
      } else if (this.tls && magic.equals(HTTP2_PREFACE)) {
        this.opts.log.warn(
          `dummy client ${peer}: plain gRPC on a TLS port refused: --rpc_port serves gRPC over TLS only (--tls_cert); the client needs the cluster CA (STORE_TLS_CA_FILE)`,
        );
        socket.destroy();
      } else if (magic.equals(HTTP2_PREFACE)) {
        socket.unshift(head);
        this.injector.injectConnection(socket);
      } else {
        this.opts.log.warn(`connection from ${peer} speaks neither gRPC nor the KVD1 channel; closing`);
        socket.destroy();
      }
    };
    socket.on('data', sniff);
  }

  /** Serves a KVD1 connection (past the handshake); `rest`: the bytes after it; `unix`: on the Unix socket. */
  private serveChannel(socket: Socket, peer: string, rest: Buffer, unix: boolean): void {
    const conn = new DummyChannelConnection(
      socket,
      () => this.service,
      new DummySession(this.host, peer, true, unix),
      this.opts.log,
      () => this.calls++,
    );
    this.connections.add(conn);
    this.opts.log.info(`dummy client connected: ${peer}`);
    socket.once('close', () => {
      this.connections.delete(conn);
      conn.session
        .close()
        .then(() => this.opts.log.info(`dummy client disconnected: ${conn.session.label}; its regions are released`))
        .catch((e: Error) => this.opts.log.error(`releasing the regions of ${conn.session.label}: ${e.message}`));
    });
    if (rest.length > 0) conn.onData(rest);
    socket.resume();
  }

  private createGrpc(): { server: grpc.Server; injector: grpc.ConnectionInjector } {
    const def = protoLoader.loadSync(protoPath('store_client.proto'), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true });
    const serviceDef = def['store.ClientService'] as grpc.ServiceDefinition;
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const m of clientMethods) {
      const path = `/store.ClientService/${m.name}`;
      handlers[m.name] = (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => {
        const secret = this.opts.secret;
        if (secret !== undefined) {
          const problem = grpcAuthProblem(secret, this.nonces, call.metadata, path);
          if (problem !== undefined) {
            this.opts.authRefused?.('dummy-client-grpc');
            this.refusals.note(call.getPeer(), `dummy-client gRPC call from ${call.getPeer()} refused: ${problem}`);
            callback({ code: grpc.status.UNAUTHENTICATED, details: problem });
            return;
          }
        }
        const service = this.service;
        if (!service) callback(null, { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, error: 'the store service is starting (not mounted yet)' });
        else void service.invoke(m.call, call.request, this.grpcSession).then((res) => callback(null, res));
      };
    }
    const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_DUMMY_REQUEST_BYTES, 'grpc.max_send_message_length': MAX_DUMMY_REQUEST_BYTES });
    server.addService(serviceDef, handlers);
    return { server, injector: server.createConnectionInjector(grpc.ServerCredentials.createInsecure()) };
  }
}

/** Removes a socket file left by a store service that died, refusing to steal a live one's. */
async function clearStaleSocket(path: string): Promise<void> {
  if (!existsSync(path)) return;
  const live = await new Promise<boolean>((resolve) => {
    const s = netConnect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
  if (live) throw new Error(`${path} is in use by another live store service`);
  unlinkSync(path);
}
