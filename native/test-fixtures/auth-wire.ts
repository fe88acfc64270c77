// Test helper: the transfer engine's connection handshake (src/auth_handshake.h) spoken by hand
// with node:crypto, an implementation independent of the engine's, over raw TCP or the shm
// control socket; and a byte reader that reports what arrived before the engine closed.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { connect, Socket } from 'node:net';
import { resolve } from 'node:path';
import { nativeDir } from './ensure-addon.js';

export const TCP_HELLO = 0x3141564b; // "KVA1"
export const SHM_HELLO = 0x3148534b; // "KSH1"
export const SHM_REQUEST_MAGIC = 0x3251534b; // "KSQ2"
export const SHM_RESPONSE_MAGIC = 0x3241534b; // "KSA2"
export const TCP_RESPONSE_MAGIC = 0x3250564b; // "KVP2"
export const TCP_UNAUTHENTICATED = 5;
export const SHM_UNAUTHENTICATED = 4;

export function proof(secret: Buffer, role: 'client' | 'server', iface: string, ns: Buffer, nc: Buffer): Buffer {
  return createHmac('sha256', secret).update(`kvstore-auth-v1 ${role} ${iface}`).update(ns).update(nc).digest();
}

export function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

/** The 8-byte refusal frame of a handshake: response magic, then status UNAUTHENTICATED. */
export function refusalFrame(responseMagic: number, status: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32LE(responseMagic, 0);
  b.writeInt32LE(status, 4);
  return b;
}

/** A byte stream: a socket, or a relay process's stdout + stdin. */
export interface ByteStream {
  readable: NodeJS.EventEmitter;
  write(b: Buffer): void;
  destroy(): void;
}

/** Collects a stream's bytes; read(n) resolves with n bytes, or with fewer once the stream closed. */
export class ByteReader {
  #buf = Buffer.alloc(0);
  #closed = false;
  #wake: (() => void) | undefined;
  readonly closed: Promise<void>;
  readonly sock: ByteStream;
  constructor(sock: ByteStream | Socket) {
    this.sock = sock instanceof Socket ? { readable: sock, write: (b) => sock.write(b), destroy: () => sock.destroy() } : sock;
    const readable = this.sock.readable;
    readable.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#wake?.();
    });
    readable.on('error', () => {}); // a reset is one way of being closed; `closed` reports it
    this.closed = new Promise((res) =>
      readable.once('close', () => {
        this.#closed = true;
        this.#wake?.();
        res();
      }),
    );
  }
  async read(n: number): Promise<Buffer> {
    while (this.#buf.length < n && !this.#closed) await new Promise<void>((res) => (this.#wake = res));
    const out = this.#buf.subarray(0, Math.min(n, this.#buf.length));
    this.#buf = this.#buf.subarray(out.length);
    return out;
  }
  /** Everything until the peer closes. */
  async rest(): Promise<Buffer> {
    await this.closed;
    return this.read(this.#buf.length);
  }
}

/** A raw TCP connection to an engine's endpoint. */
export async function rawSocket(endpoint: string): Promise<ByteReader> {
  const i = endpoint.lastIndexOf(':');
  const sock = connect({ host: endpoint.slice(0, i), port: Number(endpoint.slice(i + 1)) });
  await new Promise<void>((res, rej) => {
    sock.once('connect', () => res());
    sock.once('error', rej);
  });
  return new ByteReader(sock);
}

/**
 * A raw connection to an engine's shm control socket (the abstract Unix socket named after its
 * endpoint), through a python3 relay (abstract-relay.py: node:net cannot name it exactly).
 * Closed when the engine closes it; kill() ends the relay.
 */
export function rawShmSocket(endpoint: string): ByteReader & { kill(): void } {
  const child = spawn('python3', [resolve(nativeDir, 'test-fixtures/abstract-relay.py'), `kvstore-te/${endpoint}`], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.on('error', () => {});
  const r = new ByteReader({ readable: child.stdout, write: (b) => child.stdin.write(b), destroy: () => child.kill('SIGKILL') });
  return Object.assign(r, { kill: () => child.kill('SIGKILL') });
}

/** The client side of the handshake; resolves with the server's proof as sent (or what came before the close). */
export async function clientHandshake(r: ByteReader, secret: Buffer, iface: string, hello: number, nc: Buffer): Promise<{ ns: Buffer; reply: Buffer }> {
  r.sock.write(u32(hello));
  const ns = await r.read(32);
  if (ns.length < 32) return { ns, reply: Buffer.alloc(0) };
  r.sock.write(Buffer.concat([nc, proof(secret, 'client', iface, ns, nc)]));
  return { ns, reply: await r.read(32) };
}
