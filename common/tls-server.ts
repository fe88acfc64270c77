// TLS on a server's own accept loop: connections whose first byte opens a TLS handshake record
// (0x16) are handed to a tls.Server that never listens itself (so the RPC port can keep sniffing
// KVC1/KVR1 before it), and each one that completes the handshake (with a verified client
// certificate when a CA is given: mTLS) is passed on as a TLSSocket. A plain client on such a port
// is told so: an HTTP/1 client gets a 400 naming the fix, others are closed with one log line.
// setSecureContext swaps the certificate for new connections (TlsReloader); open ones keep theirs.
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { Server as HttpServer } from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from 'node:tls';
import type { TlsMaterial } from './tls-material.js';

/** The first byte of a TLS handshake record: what a TLS client sends first. */
export const TLS_HANDSHAKE_BYTE = 0x16;

export function startsTls(head: Buffer): boolean {
  return head.length > 0 && head[0] === TLS_HANDSHAKE_BYTE;
}

export interface TlsTerminatorOptions {
  /** ALPN protocols offered ("h2" for gRPC, "http/1.1" for HTTP). */
  alpn: string[];
  /** Each connection after a completed (and, with a CA, client-verified) handshake. */
  secure: (socket: TLSSocket) => void;
  /** A handshake that failed: bad client certificate, no common protocol, a plain client... */
  refused?: (why: string, peer: string) => void;
}

function secureOptions(m: TlsMaterial) {
  return { cert: m.cert, key: m.key, ca: m.ca, requestCert: m.ca !== undefined, rejectUnauthorized: m.ca !== undefined };
}

export class TlsTerminator {
  readonly server: TlsServer;

  constructor(
    material: TlsMaterial,
    private readonly o: TlsTerminatorOptions,
  ) {
    this.server = createTlsServer({ ...secureOptions(material), ALPNProtocols: o.alpn, handshakeTimeout: 10_000 }, (s) => o.secure(s));
    this.server.on('tlsClientError', (e: Error & { code?: string }, s: TLSSocket) => {
      o.refused?.(`TLS handshake failed: ${e.code ?? ''} ${e.message}`.trim(), `${s.remoteAddress}:${s.remotePort}`);
    });
  }

  /** Takes over an accepted socket; `head` is what was already read from it (put back first). */
  accept(socket: Socket, head?: Buffer): void {
    if (head && head.length > 0) socket.unshift(head);
    this.server.emit('connection', socket);
  }

  /** New certificate, key or CA for connections accepted from now on. */
  reload(m: TlsMaterial): void {
    this.server.setSecureContext(secureOptions(m));
  }
}

/** The answer to a plain-HTTP request on a TLS port. */
export function plainOnTlsPortResponse(what: string): string {
  const body = `${what} serves HTTPS only on this port (started with --tls_cert): use https:// and trust the cluster CA (STORE_TLS_CA_FILE)\n`;
  return `HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

const HTTP_METHOD = /^[A-Z]{3,7} /;

/**
 * An HTTP server behind TLS: returns the listening-side net.Server to call listen()/close() on;
 * `http` still handles the requests (and closeAllConnections reaches the TLS connections).
 * A plain HTTP request gets a 400 that says to use https.
 */
export function httpOverTls(http: HttpServer, material: TlsMaterial, what: string, log: { warn(m: string): void }): { server: NetServer; terminator: TlsTerminator } {
  const terminator = new TlsTerminator(material, {
    alpn: ['http/1.1'],
    secure: (s) => http.emit('connection', s),
    refused: (why, peer) => log.warn(`${what}: connection from ${peer} refused: ${why}`),
  });
  const server = createNetServer((socket) => {
    socket.on('error', () => socket.destroy());
    socket.once('data', (head: Buffer) => {
      socket.pause();
      if (startsTls(head)) return terminator.accept(socket, head);
      log.warn(`${what}: plain (non-TLS) connection from ${socket.remoteAddress}:${socket.remotePort} refused: this port serves TLS only`);
      if (HTTP_METHOD.test(head.subarray(0, 8).toString('latin1'))) socket.end(plainOnTlsPortResponse(what));
      else socket.destroy();
    });
  });
  // http.Server's close() would not stop this listener: closing it closes the pair.
  server.on('close', () => http.close());
  return { server, terminator };
}
