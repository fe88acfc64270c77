// The TCP transfer engine as seen from JS: a listener on a port from the client range, region
// registration, and transfer(ops) returning one promise per batch. Bytes move on C++ threads,
// except small same-host reads, which readInline() finishes synchronously on the calling thread.
import { addon, type RawEngine } from './addon.js';
import { TransferError, TransferErrorCode } from './errors.js';
import { clientPortRange, memcpyLocalDefault, shmTransportDefault } from './env-config.js';

export interface TransferOp {
  op: 'read' | 'write';
  endpoint: string;
  remoteAddress: number;
  localAddress: number;
  length: number;
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
  /** SO_SNDBUF/SO_RCVBUF bytes; 0 leaves kernel autotuning. Default 4 MiB. */
  socketBufferSize?: number;
  /** Environment for defaults (port range, MC_STORE_MEMCPY); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Random source for the first port tried (spreads processes over the range). */
  random?: () => number;
}

export const ENGINE_DEFAULTS = {
  host: '127.0.0.1',
  connectionsPerPeer: 4,
  chunkSize: 1024 * 1024,
  timeoutMs: 10_000,
  socketBufferSize: 4 * 1024 * 1024,
} as const;

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new TransferError(TransferErrorCode.INVALID_ARGUMENT, `TransferEngine: ${name} must be a positive integer, got ${v}`);
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
    this.#raw = new (addon().TransferEngine)({
      host: this.host,
      connectionsPerPeer: positiveInt('connectionsPerPeer', opts.connectionsPerPeer, ENGINE_DEFAULTS.connectionsPerPeer),
      chunkSize: positiveInt('chunkSize', opts.chunkSize, ENGINE_DEFAULTS.chunkSize),
      timeoutMs: positiveInt('timeoutMs', opts.timeoutMs, ENGINE_DEFAULTS.timeoutMs),
      socketBufferSize: opts.socketBufferSize ?? ENGINE_DEFAULTS.socketBufferSize,
      memcpyLocal: opts.memcpyLocal ?? memcpyLocalDefault(env),
      shmTransport: opts.shmTransport ?? shmTransportDefault(env),
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

  /** Lets peers (and local transfers) touch [address, address+size). */
  registerRegion(address: number, size: number): void {
    try {
      this.#raw.registerRegion(address, size);
    } catch (e) {
      throw TransferError.from(e);
    }
  }

  /** Waits for chunks touching the region to finish; returns whether it was registered. */
  unregisterRegion(address: number): boolean {
    try {
      return this.#raw.unregisterRegion(address);
    } catch (e) {
      throw TransferError.from(e);
    }
  }

  /** Runs a batch; resolves when every op finished, rejects with TransferError otherwise. */
  transfer(ops: ReadonlyArray<TransferOp>): Promise<void> {
    if (this.#closed) return Promise.reject(new TransferError(TransferErrorCode.TRANSFER_FAILED, 'TransferEngine: closed'));
    return this.#raw.transfer(ops).catch((e: unknown) => {
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
   */
  readInline(endpoint: string, remoteAddress: number, target: Uint8Array): boolean {
    if (this.#closed) return false;
    let peer = this.#peers.get(endpoint);
    if (peer === undefined) {
      peer = this.#raw.peerIndex(endpoint);
      if (peer === -1) return false; // no channel yet: transfer() makes one
      this.#peers.set(endpoint, peer);
    }
    try {
      return this.#raw.readInline(peer, remoteAddress, target);
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
