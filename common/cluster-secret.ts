// The cluster secret (docs/threat-model.md): where it is loaded from (--cluster_secret_file or
// STORE_CLUSTER_SECRET_FILE, at least 32 bytes, trailing whitespace trimmed), the explicit
// --allow_unauthenticated switch, the once-per-connection challenge-response of our framed
// protocols (KVC1 master channel, KVD1 dummy-client channel) and the per-call header of gRPC and
// HTTP (x-kvstore-auth, a 60 s window, a bounded nonce cache). node:crypto does the HMACs and
// every comparison is timingSafeEqual.
//
// The framed handshake travels in frames of kind AUTH (id 0, method 0) so that a peer that does
// not expect it fails at once with a clear error instead of waiting:
//   client -> server  magic, AUTH frame with an empty payload ("I authenticate"; sent at once)
//   server -> client  AUTH frame: Ns (32 bytes), right after the client's magic
//   client -> server  AUTH frame: Nc (32 bytes) + HMAC(secret, "kvstore-auth-v1 client " + IF + Ns + Nc)
//   server -> client  AUTH frame: HMAC(secret, "kvstore-auth-v1 server " + IF + Ns + Nc)
// A refused client gets an ERROR frame saying why, then the connection closes.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import type { Duplex } from 'node:stream';
import { ErrorCode } from './error-code.js';

export const SECRET_ENV = 'STORE_CLUSTER_SECRET_FILE';
export const ALLOW_UNAUTHENTICATED_ENV = 'STORE_ALLOW_UNAUTHENTICATED';
export const MIN_SECRET_BYTES = 32;
export const AUTH_HEADER = 'x-kvstore-auth';
/** Per-call headers are accepted this far from the server's clock, either way. */
export const AUTH_WINDOW_MS = 60_000;
/** A framed handshake not completed in this time is closed. */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
const NONCE_BYTES = 32;
const MAC_BYTES = 32;
const PREFIX = 'kvstore-auth-v1';

/** The framed-protocol interface names that enter the MACs. */
export type FramedInterface = 'master-channel' | 'dummy-client' | 'master-replication';

/** An authentication failure: a wrong or missing secret on either side. */
export class AuthError extends Error {
  override readonly name = 'AuthError';
  readonly code = ErrorCode.UNAUTHENTICATED;
}

/** A secret that cannot be loaded (missing file, too short): a startup error. */
export class SecretFileError extends Error {
  override readonly name = 'SecretFileError';
}

/** Reads and checks a secret file: content with trailing whitespace trimmed, >= 32 bytes. */
export function readSecretFile(path: string): Buffer {
  let raw: Buffer;
  try {
    raw = readFileSync(path);
  } catch (e) {
    throw new SecretFileError(`cannot read the cluster secret file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let end = raw.length;
  while (end > 0 && (raw[end - 1] === 0x20 || raw[end - 1] === 0x0a || raw[end - 1] === 0x0d || raw[end - 1] === 0x09)) end--;
  const secret = raw.subarray(0, end);
  if (secret.length < MIN_SECRET_BYTES) {
    throw new SecretFileError(`the cluster secret in ${path} has ${secret.length} bytes; at least ${MIN_SECRET_BYTES} are needed (make one with: store secret new FILE)`);
  }
  return Buffer.from(secret);
}

/** Writes a new secret: 32 random bytes as 64 hex characters, mode 0600. */
export function writeNewSecret(path: string): void {
  writeFileSync(path, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
}

/** How a process authenticates: with a secret, or (only when explicitly allowed) without. */
export type AuthSetting = { secret: Buffer; allowUnauthenticated: false } | { secret: undefined; allowUnauthenticated: true };

/** Neither a secret nor --allow_unauthenticated: the one line a server prints before exit 2. */
export const NO_SECRET_MESSAGE =
  `no cluster secret: pass --cluster_secret_file=PATH (or set ${SECRET_ENV}); make one with "store secret new FILE"; ` +
  `or run without authentication with --allow_unauthenticated (${ALLOW_UNAUTHENTICATED_ENV}=1)`;

export const UNAUTHENTICATED_WARNING =
  'running WITHOUT authentication (--allow_unauthenticated): anyone who can reach a port can read, write and unmount; use --cluster_secret_file';

/**
 * The server's setting from its flags and the environment (the flag wins). Throws
 * SecretFileError when there is neither a secret nor the switch, or the file is bad.
 */
export function serverAuthSetting(flagFile: string, allowFlag: boolean, env: NodeJS.ProcessEnv = process.env): AuthSetting {
  const file = flagFile !== '' ? flagFile : (env[SECRET_ENV] ?? '');
  if (file !== '') return { secret: readSecretFile(file), allowUnauthenticated: false };
  if (allowFlag || env[ALLOW_UNAUTHENTICATED_ENV] === '1') return { secret: undefined, allowUnauthenticated: true };
  throw new SecretFileError(NO_SECRET_MESSAGE);
}

/**
 * A client's secret: the option, else STORE_CLUSTER_SECRET_FILE, else none (the client then
 * speaks without authentication, and an authenticating server refuses it with a clear error).
 */
export function clientSecret(optionFile?: string, env: NodeJS.ProcessEnv = process.env): Buffer | undefined {
  const file = optionFile !== undefined && optionFile !== '' ? optionFile : (env[SECRET_ENV] ?? '');
  return file === '' ? undefined : readSecretFile(file);
}

// ------------------------------------------------------------------ framed handshake (pure part)

function hmac(secret: Buffer, ...parts: Array<string | Buffer>): Buffer {
  const h = createHmac('sha256', secret);
  for (const p of parts) h.update(p);
  return h.digest();
}

export function clientProof(secret: Buffer, iface: string, ns: Buffer, nc: Buffer): Buffer {
  return hmac(secret, `${PREFIX} client ${iface}`, ns, nc);
}

export function serverProof(secret: Buffer, iface: string, ns: Buffer, nc: Buffer): Buffer {
  return hmac(secret, `${PREFIX} server ${iface}`, ns, nc);
}

/** Constant-time equality (false for different lengths). */
export function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

// ------------------------------------------------------------------ framed handshake (I/O)

/** The frame kind of handshake frames (common/channel-frame.ts kinds 0..2 are taken). */
export const AUTH_FRAME_KIND = 3;
const ERROR_FRAME_KIND = 2;
const HEADER = 12;

function frame(kind: number, payload: Buffer): Buffer {
  const b = Buffer.alloc(HEADER + payload.length);
  b.writeUInt32LE(payload.length, 0);
  b[10] = kind;
  payload.copy(b, HEADER);
  return b;
}

/** The client's opening: an empty AUTH frame, sent with the magic. */
export const AUTH_HELLO = frame(AUTH_FRAME_KIND, Buffer.alloc(0));

/** Reads whole frames off a stream during the handshake, with a deadline; gives back what follows. */
class FrameReader {
  private buf: Buffer;
  private waiter: (() => void) | undefined;
  private ended: Error | undefined;
  private readonly onData = (c: Buffer): void => {
    this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
    this.waiter?.();
  };
  private readonly onEnd = (): void => {
    this.ended ??= new Error('the connection closed during the authentication handshake');
    this.waiter?.();
  };
  private readonly onError = (e: Error): void => {
    this.ended ??= e;
    this.waiter?.();
  };

  constructor(
    private readonly stream: Duplex,
    initial: Buffer,
    private readonly deadline: number,
  ) {
    this.buf = initial;
    stream.on('data', this.onData);
    stream.on('end', this.onEnd);
    stream.on('close', this.onEnd);
    stream.on('error', this.onError);
  }

  /** The next frame; rejects on close, a frame over `max` bytes, or the deadline. */
  async next(max: number): Promise<{ kind: number; id: number; payload: Buffer }> {
    for (;;) {
      if (this.buf.length >= HEADER) {
        const len = this.buf.readUInt32LE(0);
        if (len > max) throw new AuthError(`authentication handshake: a frame of ${len} bytes where at most ${max} fit`);
        if (this.buf.length >= HEADER + len) {
          const kind = this.buf[10];
          const id = this.buf.readUInt32LE(4);
          const payload = this.buf.subarray(HEADER, HEADER + len);
          this.buf = this.buf.subarray(HEADER + len);
          return { kind, id, payload };
        }
      }
      if (this.ended) throw this.ended;
      const left = this.deadline - Date.now();
      if (left <= 0) throw new HandshakeTimeout();
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.waiter = undefined;
    }
  }

  /** Stops listening (pausing the stream: the caller resumes it with its own reader); the bytes read past the handshake. */
  release(): Buffer {
    this.stream.pause();
    this.stream.removeListener('data', this.onData);
    this.stream.removeListener('end', this.onEnd);
    this.stream.removeListener('close', this.onEnd);
    this.stream.removeListener('error', this.onError);
    return this.buf;
  }
}

export class HandshakeTimeout extends AuthError {
  constructor() {
    super(`authentication handshake not completed within ${HANDSHAKE_TIMEOUT_MS / 1000} s`);
  }
}

/** Why a server refused a connection (for its log line and counter). */
export class HandshakeRefused extends AuthError {}

/**
 * Server side, after the client's magic was read (`initial`: bytes received after it). Resolves
 * with the bytes that followed the handshake (the first request frames) once the client proved
 * the secret; rejects with HandshakeRefused / HandshakeTimeout / a stream error otherwise, having
 * sent an ERROR frame where it could. The caller keeps the stream paused-or-not as it likes: the
 * handshake reads through 'data' events and removes its listeners before resolving.
 */
export async function serverHandshake(stream: Duplex, secret: Buffer, iface: FramedInterface, initial: Buffer, timeoutMs = HANDSHAKE_TIMEOUT_MS): Promise<Buffer> {
  const reader = new FrameReader(stream, initial, Date.now() + timeoutMs);
  const ns = randomBytes(NONCE_BYTES);
  stream.write(frame(AUTH_FRAME_KIND, ns));
  const refuse = (id: number, why: string): never => {
    if (!stream.destroyed) stream.write(frameWithId(ERROR_FRAME_KIND, id, Buffer.from(`UNAUTHENTICATED: ${why}`)));
    throw new HandshakeRefused(why);
  };
  try {
    stream.resume();
    for (;;) {
      const f = await reader.next(NONCE_BYTES + MAC_BYTES);
      if (f.kind !== AUTH_FRAME_KIND) {
        refuse(f.id, `this ${iface} requires the cluster secret (set ${SECRET_ENV} or the clusterSecretFile option)`);
      }
      if (f.payload.length === 0) continue; // the client's hello
      if (f.payload.length !== NONCE_BYTES + MAC_BYTES) refuse(0, 'malformed authentication frame');
      const nc = f.payload.subarray(0, NONCE_BYTES);
      if (!safeEqual(f.payload.subarray(NONCE_BYTES), clientProof(secret, iface, ns, nc))) refuse(0, 'wrong cluster secret');
      stream.write(frame(AUTH_FRAME_KIND, serverProof(secret, iface, ns, Buffer.from(nc))));
      return reader.release();
    }
  } catch (e) {
    reader.release();
    throw e;
  }
}

function frameWithId(kind: number, id: number, payload: Buffer): Buffer {
  const b = frame(kind, payload);
  b.writeUInt32LE(id >>> 0, 4);
  return b;
}

/**
 * Client side, right after connecting: sends `magic` and the hello, answers the challenge and
 * checks the server's proof. Resolves with any bytes received after the handshake. Rejects with
 * AuthError when the server refuses, runs without authentication, or cannot prove the secret.
 */
export async function clientHandshake(stream: Duplex, secret: Buffer, iface: FramedInterface, magic: Buffer, timeoutMs = HANDSHAKE_TIMEOUT_MS): Promise<Buffer> {
  const reader = new FrameReader(stream, Buffer.alloc(0), Date.now() + timeoutMs);
  try {
    stream.write(Buffer.concat([magic, AUTH_HELLO]));
    const challenge = await reader.next(4096);
    if (challenge.kind === ERROR_FRAME_KIND) {
      const text = challenge.payload.toString('utf8');
      // an open server answers the hello with NOT_AUTHENTICATING; any other ERROR refuses the peer itself (its uid, say)
      throw new AuthError(
        text === NOT_AUTHENTICATING ? `${iface} server does not authenticate (it runs with --allow_unauthenticated?)` : `${iface} server refused the connection: ${text}`,
      );
    }
    if (challenge.kind !== AUTH_FRAME_KIND || challenge.payload.length !== NONCE_BYTES) throw new AuthError(`${iface} server sent no authentication challenge`);
    const ns = Buffer.from(challenge.payload);
    const nc = randomBytes(NONCE_BYTES);
    stream.write(frame(AUTH_FRAME_KIND, Buffer.concat([nc, clientProof(secret, iface, ns, nc)])));
    const answer = await reader.next(4096);
    if (answer.kind === ERROR_FRAME_KIND) throw new AuthError(`${iface} server refused: ${answer.payload.toString('utf8')}`);
    if (answer.kind !== AUTH_FRAME_KIND || !safeEqual(answer.payload, serverProof(secret, iface, ns, nc))) {
      throw new AuthError(`${iface} server failed to prove the cluster secret (a different secret?)`);
    }
    return reader.release();
  } catch (e) {
    reader.release();
    if (e instanceof AuthError) throw e;
    throw new AuthError(`${iface} authentication handshake failed: ${(e as Error).message}`, { cause: e });
  }
}

/** The text an unauthenticated server answers an AUTH frame with (ERROR frame payload). */
export const NOT_AUTHENTICATING = 'UNAUTHENTICATED: this server runs without authentication (--allow_unauthenticated); the client has a cluster secret';

/** True for an ERROR frame's text that reports an authentication refusal. */
export function isAuthRefusal(text: string): boolean {
  return text.startsWith('UNAUTHENTICATED:');
}

// ------------------------------------------------------------------ per-call header (gRPC, HTTP)

const EMPTY_SHA256 = createHash('sha256').update('').digest('hex');

/** hex(sha256(body)); the empty body's is precomputed (gRPC and most mutating HTTP calls). */
export function bodyDigest(body: Buffer | string | undefined): string {
  if (body === undefined || body.length === 0) return EMPTY_SHA256;
  return createHash('sha256').update(body).digest('hex');
}

function callMac(secret: Buffer, method: string, path: string, ms: number, nonce: string, digest: string): string {
  return hmac(secret, `${PREFIX} http ${method} ${path} ${ms} ${nonce} ${digest}`).toString('hex');
}

/** The x-kvstore-auth value for one call (path with its query; gRPC: "POST" and the method path). */
export function signCall(secret: Buffer, method: string, path: string, body?: Buffer | string, now = Date.now()): string {
  const nonce = randomBytes(8).toString('hex');
  return `v1.${now}.${nonce}.${callMac(secret, method, path, now, nonce, bodyDigest(body))}`;
}

/** The x-kvstore-auth value for `method` on a whole URL (signed over its path and query). */
export function signUrl(secret: Buffer, method: string, url: string, body?: Buffer | string): string {
  const u = new URL(url);
  return signCall(secret, method, u.pathname + u.search, body);
}

/**
 * Nonces seen within the window. Bounded: when full, the oldest entry is dropped and calls no
 * newer than it are refused from then on (a replay of a dropped nonce cannot pass).
 */
export class NonceCache {
  private readonly seen = new Map<string, number>();
  /** Calls stamped at or before this are refused (raised when entries are dropped for room). */
  private floor = -Infinity;

  constructor(
    readonly capacity = 100_000,
    private readonly windowMs = AUTH_WINDOW_MS,
  ) {}

  get size(): number {
    return this.seen.size;
  }

  /** Records the nonce; false when it was seen or is too old to be told from a dropped one. */
  admit(nonce: string, stampMs: number, now: number): boolean {
    if (stampMs <= this.floor) return false;
    if (this.seen.has(nonce)) return false;
    // entries past the window can no longer pass the clock check: drop them (oldest inserted first)
    for (const [n, t] of this.seen) {
      if (t >= now - this.windowMs) break;
      this.seen.delete(n);
    }
    while (this.seen.size >= this.capacity) {
      const [n, t] = this.seen.entries().next().value as [string, number];
      this.seen.delete(n);
      this.floor = Math.max(this.floor, t);
    }
    if (stampMs <= this.floor) return false;
    this.seen.set(nonce, stampMs);
    return true;
  }
}

const HEADER_RE = /^v1\.(\d{1,16})\.([0-9a-f]{16})\.([0-9a-f]{64})$/;

/** Checks an x-kvstore-auth value; returns undefined when accepted, else why it is refused. */
export function verifyCall(
  secret: Buffer,
  cache: NonceCache,
  header: string | undefined,
  method: string,
  path: string,
  body?: Buffer | string,
  now = Date.now(),
): string | undefined {
  if (header === undefined || header === '') return `missing ${AUTH_HEADER} header (the cluster secret is required)`;
  const m = HEADER_RE.exec(header);
  if (!m) return `malformed ${AUTH_HEADER} header`;
  const ms = Number(m[1]);
  if (Math.abs(now - ms) > AUTH_WINDOW_MS) return `${AUTH_HEADER} timestamp is ${Math.round((now - ms) / 1000)} s off the server's clock (at most ${AUTH_WINDOW_MS / 1000} s)`;
  const want = Buffer.from(callMac(secret, method, path, ms, m[2], bodyDigest(body)), 'hex');
  if (!safeEqual(Buffer.from(m[3], 'hex'), want)) return 'wrong cluster secret';
  // the nonce is recorded only for a valid MAC: a stranger cannot fill the cache
  if (!cache.admit(m[2], ms, now)) return `${AUTH_HEADER} replayed (nonce seen before)`;
  return undefined;
}

/**
 * Logs a refusal once per peer ("ip:port": once per connection); bounded, so a flood of new
 * connections cannot grow it (after `max` peers it starts over).
 */
export class RefusalLog {
  private readonly seen = new Set<string>();

  constructor(
    private readonly write: (line: string) => void,
    private readonly max = 1024,
  ) {}

  note(peer: string, line: string): void {
    if (this.seen.has(peer)) return;
    if (this.seen.size >= this.max) this.seen.clear();
    this.seen.add(peer);
    this.write(line);
  }
}

/**
 * A server's side of a framed connection after its magic: `serve` gets the bytes after the
 * handshake once the peer proved `secret` (at once without one). A refused peer is reported to
 * `refused` and closed (the ERROR frame leaves first; a peer that keeps its end open is cut off a
 * second later); a peer that went away half-way is `gone` (nothing was refused).
 */
export function acceptAuthenticated(
  socket: Duplex,
  secret: Buffer | undefined,
  iface: FramedInterface,
  rest: Buffer,
  on: { serve: (rest: Buffer) => void; refused: (e: AuthError) => void; gone?: (e: Error) => void },
): void {
  if (secret === undefined) return on.serve(rest);
  serverHandshake(socket, secret, iface, rest).then(on.serve, (e: Error) => {
    if (!(e instanceof AuthError)) {
      on.gone?.(e);
      socket.destroy();
      return;
    }
    on.refused(e);
    socket.end();
    setTimeout(() => socket.destroy(), 1000).unref();
  });
}

/** An HTTP request's peer as "ip:port". */
export function peerOf(socket: { remoteAddress?: string; remotePort?: number }): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
}
