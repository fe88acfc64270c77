// The TCP transfer engine as seen from JS: a listener on a port from the client range, region
// registration (served or local, each with an incarnation), write fences, and transfer(ops)
// returning one promise per batch (with the CRC-32C of the ops that ask for it, computed where
// the bytes move; a failure names the peers that failed). Bytes move on C++ threads, except small same-host reads, which
// readInline() finishes synchronously on the calling thread. Nothing here blocks the event loop on
// a peer: unregisterRegion() and setFence() return promises that settle once bytes in flight moved.
import { addon, type RawEngine } from './addon.js';
import { TransferError, TransferErrorCode } from './errors.js';
import { clientPortRange, memcpyLocalDefault, shmPeerUidsDefault, shmTransportDefault } from './env-config.js';

export interface TransferOp {
  op: 'read' | 'write';
  endpoint: string;
  remoteAddress: number;
  localAddress: number;
  length: number;
  /** Expected incarnation of the remote region (registerRegion's result there); 0/absent = not checked. */
  incarnation?: number;
  /** WRITE only: the placement's generation, judged by the remote region's write fence; 0/absent = none. */
  generation?: number;
  /**
   * Compute the CRC-32C of the op's bytes where they move (WRITE: the local source bytes as sent;
   * READ: the bytes received into the local buffer); transfer() resolves with it.
   */
  checksum?: boolean;
}

/** A served region's write fence: WRITEs whose generation is `< below` or listed in `revoked` are refused. */
export interface WriteFence {
  below: number;
  /** At most 1000 generations; replaces the previously installed list. */
  revoked?: number[];
}

export interface RegisterOptions {
  /**
   * true (default): peers may reach the region (a segment). false: a local buffer that only this
   * engine's own transfers use as their local side; peers' requests and shm grants for it are
   * refused as ADDRESS_OUT_OF_RANGE.
   */
  serve?: boolean;
}

/** Counters of the serving side (TCP listener and shm control socket together). */
export interface TransferEngineStats {
  connectionsOpen: number;
  /** Connections admitted and given a serving thread. */
  accepted: number;
  /** Closed at once: over maxConnections or maxConnectionsPerPeer. */
  refusedOverCap: number;
  /** Closed at once: no thread, descriptor or memory for them. */
  refusedNoResources: number;
  /** Closed after idleTimeoutMs without a request. */
  closedIdle: number;
  /** Closed because a request did not finish within ioTimeoutMs. */
  closedIoTimeout: number;
  /** Not this protocol (connection closed) or a chunk outside its own op (BAD_REQUEST). */
  badRequests: number;
  /** Requests refused because the region's incarnation differs (STALE). */
  staleRefused: number;
  /** WRITEs refused by the region's write fence (FENCED). */
  fencedRefused: number;
  /** shm control connections from a uid not in shmPeerUids (answered "not shareable"). */
  shmPeersRefused: number;
  /**
   * Connections refused by the cluster secret's handshake (authSecret): served ones with a wrong,
   * missing or late proof, ones asking for a handshake this engine (without authSecret) cannot
   * give, and dialed peers that failed to prove the secret. Each is logged on stderr.
   */
  authRefused: number;
  /**
   * READs of a region mapped from a file on a device (an SSD offload file) whose file read failed
   * (EIO, or the file shorter than the region): the connection is closed and the peer's batch
   * fails (TRANSFER_FAILED).
   */
  fileReadErrors: number;
}

export interface TransferEngineOptions {
  host?: string;
  minPort?: number;
  maxPort?: number;
  connectionsPerPeer?: number;
  chunkSize?: number;
  timeoutMs?: number;
  memcpyLocal?: boolean;
  /**
   * Same-host shm transport (default MC_STORE_SHM_TRANSPORT, on): serve our fd-backed registered
   * regions to same-host peers and memcpy through theirs; TCP for everything else.
   */
  shmTransport?: boolean;
  /**
   * Peers only through the same-host shm transport (implies shmTransport): a chunk no grant
   * covers (no control socket, a peer that gives this process no fds, memory that is not
   * fd-backed) fails with TRANSFER_FAILED instead of going over TCP. For a reader that has a
   * better way when shared memory is not there (a dummy client's local reads). Default false.
   */
  shmOnly?: boolean;
  /**
   * The uids (SO_PEERCRED) of same-host peers that receive our memory fds over the shm control
   * socket; any other peer is answered "not shareable" (it uses TCP), counted in shmPeersRefused
   * and logged on stderr. Default: this process's effective uid, root, and MC_STORE_SHM_PEER_UIDS.
   */
  shmPeerUids?: number[];
  /** SO_SNDBUF/SO_RCVBUF bytes; 0 leaves kernel autotuning. Default 4 MiB. */
  socketBufferSize?: number;
  /**
   * Serving side: a request (header, payload, reply) must finish within this many ms of its first
   * byte or its connection is closed (a peer trickling bytes is cut off). Default: timeoutMs.
   */
  ioTimeoutMs?: number;
  /** Serving side: a connection with no request for this long is closed; 0 = never. Default 120 s. */
  idleTimeoutMs?: number;
  /** Serving side: connections open at once (TCP and shm control); more are closed at once. Default 1024. */
  maxConnections?: number;
  /** Serving side: connections from one IP address (one process for shm control). Default 64. */
  maxConnectionsPerPeer?: number;
  /**
   * The cluster secret (at least 32 bytes; copied, so the caller may wipe its Buffer). With it,
   * every connection this engine accepts or opens (TCP and the shm control socket) first runs the
   * mutual HMAC-SHA256 challenge-response of docs/native.md ("Authentication"); a peer without
   * the same secret is refused and counted in authRefused, and a transfer to it rejects with
   * UNAUTHENTICATED. Without it (default) no handshake runs, and a peer that asks for one is refused.
   */
  authSecret?: Buffer;
  /** The handshake of one connection must finish within this many ms, or it is closed. Default 10 s. */
  authTimeoutMs?: number;
  /** Environment for defaults (port range, MC_STORE_MEMCPY); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Random source for the first port tried (spreads processes over the range). */
  random?: () => number;
}

// transfer()'s second argument to the addon: the optional op fields some op sets.
const FIELD_CHECKED = 1; // incarnation or generation
const FIELD_CHECKSUM = 2;

// The addon resolves a batch with undefined (no op asked for a checksum), one op's CRC as a
// number, or an array of them; small typed arrays made in JS are cheap young objects.
function crcArray(r: number | number[] | undefined): Uint32Array | undefined {
  if (r === undefined) return undefined;
  return typeof r === 'number' ? Uint32Array.of(r) : Uint32Array.from(r);
}

export const ENGINE_DEFAULTS = {
  host: '127.0.0.1',
  connectionsPerPeer: 4,
  chunkSize: 1024 * 1024,
  timeoutMs: 10_000,
  socketBufferSize: 4 * 1024 * 1024,
  idleTimeoutMs: 120_000,
  maxConnections: 1024,
  maxConnectionsPerPeer: 64,
  authTimeoutMs: 10_000,
} as const;

/** The shortest cluster secret accepted (bytes). */
export const AUTH_SECRET_MIN_BYTES = 32;

function authSecretOption(v: unknown): Buffer | undefined {
  if (v === undefined) return undefined;
  if (!Buffer.isBuffer(v)) throw new TypeError(`TransferEngine: authSecret must be a Buffer, got ${v === null ? 'null' : typeof v}`);
  if (v.length < AUTH_SECRET_MIN_BYTES) {
    throw new TypeError(`TransferEngine: authSecret must be at least ${AUTH_SECRET_MIN_BYTES} bytes, got ${v.length}`);
  }
  return v;
}

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new TransferError(TransferErrorCode.INVALID_ARGUMENT, `TransferEngine: ${name} must be a positive integer, got ${v}`);
  }
  return v;
}

function nonNegativeInt(name: string, v: number | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new TransferError(TransferErrorCode.INVALID_ARGUMENT, `TransferEngine: ${name} must be a non-negative integer, got ${v}`);
  }
  return v;
}

export class TransferEngine {
  #raw: RawEngine;
  #endpoint = '';
  #closed = false;
  readonly host: string;
  readonly minPort: number;
  readonly maxPort: number;
  #random: () => number;
  /** Endpoint -> the addon's peer handle for readInline (a channel, once made, lives as long as the engine). */
  #peers = new Map<string, number>();

  constructor(opts: TransferEngineOptions = {}) {
    const env = opts.env ?? process.env;
    const range = clientPortRange(env);
    this.host = opts.host ?? ENGINE_DEFAULTS.host;
    this.minPort = opts.minPort ?? range.min;
    this.maxPort = opts.maxPort ?? range.max;
    if (!Number.isInteger(this.minPort) || !Number.isInteger(this.maxPort) || this.minPort < 1 || this.maxPort > 65535 || this.minPort > this.maxPort) {
      throw new TransferError(TransferErrorCode.INVALID_ARGUMENT, `TransferEngine: port range ${this.minPort}..${this.maxPort} is invalid`);
    }
    this.#random = opts.random ?? Math.random;
    const timeoutMs = positiveInt('timeoutMs', opts.timeoutMs, ENGINE_DEFAULTS.timeoutMs);
    const authSecret = authSecretOption(opts.authSecret);
    this.#raw = new (addon().TransferEngine)({
      authSecret,
      authTimeoutMs: positiveInt('authTimeoutMs', opts.authTimeoutMs, ENGINE_DEFAULTS.authTimeoutMs),
      host: this.host,
      connectionsPerPeer: positiveInt('connectionsPerPeer', opts.connectionsPerPeer, ENGINE_DEFAULTS.connectionsPerPeer),
      chunkSize: positiveInt('chunkSize', opts.chunkSize, ENGINE_DEFAULTS.chunkSize),
      timeoutMs,
      ioTimeoutMs: positiveInt('ioTimeoutMs', opts.ioTimeoutMs, timeoutMs),
      idleTimeoutMs: nonNegativeInt('idleTimeoutMs', opts.idleTimeoutMs, ENGINE_DEFAULTS.idleTimeoutMs),
      maxConnections: positiveInt('maxConnections', opts.maxConnections, ENGINE_DEFAULTS.maxConnections),
      maxConnectionsPerPeer: positiveInt('maxConnectionsPerPeer', opts.maxConnectionsPerPeer, ENGINE_DEFAULTS.maxConnectionsPerPeer),
      socketBufferSize: opts.socketBufferSize ?? ENGINE_DEFAULTS.socketBufferSize,
      memcpyLocal: opts.memcpyLocal ?? memcpyLocalDefault(env),
      shmTransport: opts.shmOnly === true || (opts.shmTransport ?? shmTransportDefault(env)),
      shmOnly: opts.shmOnly === true,
      shmPeerUids: opts.shmPeerUids ?? shmPeerUidsDefault(env),
    });
  }

  /** Binds a port in [minPort, maxPort] (idempotent); returns 'host:port'. */
  start(): string {
    if (this.#closed) throw new TransferError(TransferErrorCode.TRANSFER_FAILED, 'TransferEngine: closed');
    if (this.#endpoint) return this.#endpoint;
    const span = this.maxPort - this.minPort + 1;
    const offset = Math.floor(this.#random() * span) % span;
    try {
      this.#endpoint = this.#raw.start(this.minPort, this.maxPort, offset);
    } catch (e) {
      throw TransferError.from(e);
    }
    return this.#endpoint;
  }

  get endpoint(): string {
    return this.#endpoint;
  }

  /**
   * Lets this engine's transfers (and, when served, peers) touch [address, address+size). Returns
   * the registration's incarnation: a random non-zero integer below 2^53, new for every
   * registration, which peers name in their ops (`incarnation`) to reach exactly this one.
   */
  registerRegion(address: number, size: number, opts?: RegisterOptions): number {
    try {
      return this.#raw.registerRegion(address, size, opts);
    } catch (e) {
      throw TransferError.from(e);
    }
  }

  /**
   * Removes the region at once (no new chunk starts on it) and resolves, with whether it was
   * registered, when the chunks already moving bytes in it have finished: only then may its memory
   * be unmapped. Never blocks the event loop. (Same-host peers copying through a shm grant are not
   * waited for: their mapping keeps the pages alive; see docs/native.md.)
   */
  unregisterRegion(address: number): Promise<boolean> {
    try {
      return this.#raw.unregisterRegion(address);
    } catch (e) {
      return Promise.reject(TransferError.from(e));
    }
  }

  /**
   * Installs the write fence of the served region registered at `address` (moving forward only: a
   * lower `below` is ignored, `revoked` replaces the previous list). Later WRITEs it refuses fail
   * with FENCED and write nothing; resolves once no WRITE it refuses is still moving bytes into the
   * region over TCP. Rejects with ADDRESS_OUT_OF_RANGE when no served region starts at `address`.
   */
  setFence(address: number, fence: WriteFence): Promise<void> {
    try {
      return this.#raw.setFence(address, fence);
    } catch (e) {
      return Promise.reject(TransferError.from(e));
    }
  }

  /** Serving-side counters (connections, refusals, timeouts). */
  stats(): TransferEngineStats {
    return this.#raw.stats();
  }

  /**
   * Runs a batch; resolves when every op finished, rejects with TransferError otherwise (its
   * `endpoints` name the peers whose chunks failed on their side or on the path to them). When
   * some op asked for `checksum`, resolves with one entry per op, in op order: the CRC-32C of that
   * op's bytes (unsigned), 0 for ops that did not ask; otherwise with undefined. A batch that
   * fails resolves no checksum.
   */
  transfer(ops: ReadonlyArray<TransferOp>): Promise<Uint32Array | undefined> {
    if (this.#closed) return Promise.reject(new TransferError(TransferErrorCode.TRANSFER_FAILED, 'TransferEngine: closed'));
    // Which optional fields some op sets: the addon reads those fields only then. For up to 32
    // ops, which ones ask for a checksum goes as a bit mask (a property read here costs far less
    // than one through N-API).
    let fields = 0;
    let mask = 0;
    for (let i = 0; i < ops.length; i++) {
      const o = ops[i];
      if (o.incarnation || o.generation) fields |= FIELD_CHECKED;
      if (o.checksum) {
        fields |= FIELD_CHECKSUM;
        mask |= 1 << i; // past 32 ops this wraps around: the mask is then not passed
      }
    }
    const p = fields & FIELD_CHECKSUM && ops.length <= 32 ? this.#raw.transfer(ops, fields, mask >>> 0) : this.#raw.transfer(ops, fields);
    // One reaction either way (as a bare .catch): it also makes the addon's CRCs a Uint32Array.
    return p.then(crcArray, (e: unknown) => {
      throw TransferError.from(e);
    });
  }

  /**
   * A small READ (<= 64 KiB) of target.byteLength bytes from `remoteAddress` on `endpoint`, done
   * now on this thread straight into `target` (which needs no registration): own endpoint with
   * memcpyLocal, or a same-host peer this engine already reached over shm whose grant covering
   * the range is cached (range checked against it, peer checked alive). Returns false, having
   * copied nothing, when that does not apply: use transfer(), which connects, asks for grants and
   * reports errors. No promise, no batch: a 4 KiB Get's engine step costs a memcpy and a few checks.
   * With `incarnation` (non-zero) the remote region must be that registration: false otherwise, so
   * the caller's transfer() reports STALE_REGION.
   */
  readInline(endpoint: string, remoteAddress: number, target: Uint8Array, incarnation?: number): boolean {
    if (this.#closed) return false;
    let peer = this.#peers.get(endpoint);
    if (peer === undefined) {
      peer = this.#raw.peerIndex(endpoint);
      if (peer === -1) return false; // no channel yet: transfer() makes one
      this.#peers.set(endpoint, peer);
    }
    try {
      // Without an incarnation the addon gets three arguments (one N-API call fewer per small Get).
      return incarnation === undefined ? this.#raw.readInline(peer, remoteAddress, target) : this.#raw.readInline(peer, remoteAddress, target, incarnation);
    } catch (e) {
      throw TransferError.from(e);
    }
  }

  /**
   * As readInline, with the copy fused with the CRC-32C of the bytes copied: returns that CRC
   * (unsigned), or -1 when nothing was copied (use transfer() with `checksum`).
   */
  readInlineCrc(endpoint: string, remoteAddress: number, target: Uint8Array, incarnation?: number): number {
    if (this.#closed) return -1;
    let peer = this.#peers.get(endpoint);
    if (peer === undefined) {
      peer = this.#raw.peerIndex(endpoint);
      if (peer === -1) return -1;
      this.#peers.set(endpoint, peer);
    }
    try {
      return incarnation === undefined ? this.#raw.readInlineCrc(peer, remoteAddress, target) : this.#raw.readInlineCrc(peer, remoteAddress, target, incarnation);
    } catch (e) {
      throw TransferError.from(e);
    }
  }

  /** Batches submitted and not yet settled. */
  get pendingBatches(): number {
    return this.#raw.pendingBatches();
  }

  /** Stops the listener and I/O threads; pending batches reject with TRANSFER_FAILED. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#raw.close();
  }
}
