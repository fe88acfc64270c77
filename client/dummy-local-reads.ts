// A dummy client's own reads of same-host memory: a repeated read of an object whose location the
// real client described (LocalReplica, kept by local-read-cache.ts while the real client's read
// lease holds) copies the bytes straight from the memory of the engine that serves them, with no
// message to the real client. The mapping is the engine's same-host shm transport (docs/native.md
// "Same-host shared-memory transport"): a transfer engine of our own that serves nothing, listens
// nowhere and reaches peers through shared memory only (`shmOnly`: no TCP). It asks the serving
// engine's control socket for a grant of the range (KSH1 handshake with the cluster secret, the
// same uid rule as any same-host peer), maps it and copies: up to 64 KiB on this thread
// (readInlineCrc, once a grant is cached), larger objects or the first read from a peer on its
// I/O threads (transfer into our shared region, which it has registered as local memory). Every
// slice's CRC-32C is checked against the writer's record (when checksums are on and it made one),
// and the lease must still hold when the copy ended. Any failure (no grant, another incarnation or a moved generation, a CRC mismatch,
// the lease over, the peer gone) drops the entry and the caller reads through the real client:
// never wrong bytes, never an error the usual way would not give. An engine whose memory cannot
// be reached (another network namespace, a uid refused fds, another cluster secret) is left
// alone for a while.
import { TransferErrorCode } from '../native/errors.js';
import type { LocalReplica__Output } from '../proto/gen/store/LocalReplica.js';
import { LocalReadCache, type LocalEntry, type LocalSlice, type ReadStamp } from './local-read-cache.js';
import type { EngineTransferOp, NativePort, TransferEnginePort } from './native-port.js';

/** Objects up to this size are copied on the calling thread (the engine's readInline bound). */
export const LOCAL_INLINE_MAX = 64 * 1024;
/** Entries kept by default (a few hundred bytes each). */
export const DEFAULT_LOCAL_READ_ENTRIES = 65_536;
/** An engine whose memory could not be reached is not tried again for this long. */
const UNREACHABLE_FOR_MS = 30_000;

export interface LocalReadsDeps {
  native: NativePort;
  /** The cluster secret (the serving engines' control sockets ask for it when they have one). */
  secret: Buffer | null;
  maxEntries: number;
  /** Monotonic milliseconds. */
  now: () => number;
  /** The address of `view` when it lies in one of our shared regions, else undefined. */
  addressIn(view: Uint8Array): number | undefined;
  /** Shared memory of `size` bytes at once, or undefined (then the read goes the usual way). */
  stage(size: number): { buffer: Buffer; release(): void } | undefined;
}

export interface LocalReadStats {
  /** Reads served here, without a message to the real client. */
  hits: number;
  /** Reads that had an entry but went through the real client (the entry failed a check). */
  fallbacks: number;
  /** Entries held now. */
  entries: number;
}

export class LocalReads {
  readonly cache: LocalReadCache;
  hits = 0;
  fallbacks = 0;
  private engine: TransferEnginePort | undefined;
  /** Our shared regions (address -> size), registered with the engine as local memory. */
  private readonly regions = new Map<number, number>();
  /** Engine endpoint -> until when its memory is not tried. */
  private readonly unreachable = new Map<string, number>();
  private closed = false;

  constructor(private readonly d: LocalReadsDeps) {
    this.cache = new LocalReadCache(d.maxEntries, d.now);
  }

  get stats(): LocalReadStats {
    return { hits: this.hits, fallbacks: this.fallbacks, entries: this.cache.size };
  }

  /** A shared region of ours: reads may land in it directly. */
  addRegion(address: number, size: number): void {
    this.regions.set(address, size);
    this.engine?.registerRegion(address, size, { serve: false });
  }

  /** Resolves once no copy moves bytes into the region any more: only then may it be unmapped. */
  async removeRegion(address: number): Promise<void> {
    if (!this.regions.delete(address) || !this.engine) return;
    await this.engine.unregisterRegion(address);
  }

  /** Reads are about to be sent to the real client. */
  begin(): ReadStamp {
    return this.cache.begin();
  }

  /** The reply to the read of `key` sent at `t` came, with `local`. */
  end(key: string, t: ReadStamp, local: LocalReplica__Output | null | undefined): void {
    if (!local || this.closed || !this.reachable(local)) return;
    if (!this.engine) this.startEngine();
    this.cache.end(key, t, local);
  }

  /**
   * Reads `key` into `target` here when its cached entry `e` allows: its size (at once), a promise of
   * it, or undefined: no usable entry, or the read failed a check (entry dropped): read it
   * through the real client.
   */
  read(key: string, target: Uint8Array, e: LocalEntry | undefined = this.cache.lookup(key)): number | Promise<number | undefined> | undefined {
    if (e === undefined || target.byteLength < e.size || !this.engine) return undefined;
    const out = target.byteLength === e.size ? target : target.subarray(0, e.size);
    if (e.size <= LOCAL_INLINE_MAX) {
      const done = this.copyInline(e, out);
      if (done === true) return this.finished(key, e);
      if (done === false) return this.failed(key);
      // no grant cached yet for some slice: the engine asks for it
    }
    return this.copyByEngine(key, e, out);
  }

  /** True: copied (with the right CRCs); false: a CRC differs; undefined: no cached grant (nothing to conclude). */
  private copyInline(e: LocalEntry, out: Uint8Array): boolean | undefined {
    const slices = e.slices;
    if (!slices) return this.copySlice(e.checksums, e, out);
    let at = 0;
    for (const s of slices) {
      const done = this.copySlice(e.checksums, s, out.subarray(at, at + s.length));
      if (done !== true) return done;
      at += s.length;
    }
    return true;
  }

  private copySlice(checksums: boolean, s: LocalSlice, out: Uint8Array): boolean | undefined {
    const engine = this.engine!;
    const incarnation = s.incarnation || undefined;
    if (!checksums) return engine.readInline(s.endpoint, s.address, out, incarnation) || undefined;
    const crc = engine.readInlineCrc!(s.endpoint, s.address, out, incarnation);
    return crc === -1 ? undefined : crc === s.crc;
  }

  /** The engine's I/O threads copy into our shared memory (`out` itself, or a stage copied out after). */
  private async copyByEngine(key: string, e: LocalEntry, out: Uint8Array): Promise<number | undefined> {
    let base = this.d.addressIn(out);
    let stage: { buffer: Buffer; release(): void } | undefined;
    if (base === undefined) {
      stage = this.d.stage(e.size);
      base = stage && this.d.addressIn(stage.buffer);
      if (base === undefined) {
        stage?.release();
        this.fallbacks++;
        return undefined; // no shared memory free now: not the entry's fault, it stays
      }
    }
    try {
      const slices = e.slices ?? [e];
      const ops: EngineTransferOp[] = [];
      let at = 0;
      for (const s of slices) {
        ops.push({ op: 'read', endpoint: s.endpoint, remoteAddress: s.address, localAddress: base + at, length: s.length, incarnation: s.incarnation, checksum: e.checksums });
        at += s.length;
      }
      let crcs: Uint32Array | undefined | void;
      try {
        crcs = await this.engine!.transfer(ops);
      } catch (err) {
        this.noteFailure(err);
        return this.failed(key);
      }
      if (e.checksums) {
        if (!crcs) return this.failed(key);
        for (let i = 0; i < ops.length; i++) if (crcs[i] !== slices[i].crc) return this.failed(key);
      }
      if (stage) out.set(stage.buffer.subarray(0, e.size));
      return this.finished(key, e);
    } finally {
      stage?.release();
    }
  }

  /** The copy ended: its bytes count only if the lease still held. */
  private finished(key: string, e: LocalEntry): number | undefined {
    if (this.d.now() >= e.deadline) return this.failed(key);
    this.hits++;
    return e.size;
  }

  private failed(key: string): undefined {
    this.cache.forget(key);
    this.fallbacks++;
    return undefined;
  }

  /** An engine that refused or could not be reached is left alone for a while. */
  private noteFailure(err: unknown): void {
    const code = (err as { code?: string }).code;
    if (code === TransferErrorCode.STALE_REGION || code === TransferErrorCode.ADDRESS_OUT_OF_RANGE) return; // that range, not the engine
    const until = this.d.now() + UNREACHABLE_FOR_MS;
    for (const ep of (err as { endpoints?: string[] }).endpoints ?? []) this.unreachable.set(ep, until);
  }

  private reachable(local: LocalReplica__Output): boolean {
    if (this.unreachable.size === 0) return true;
    const now = this.d.now();
    for (const s of local.slices) {
      const until = this.unreachable.get(s.te_endpoint);
      if (until === undefined) continue;
      if (now < until) return false;
      this.unreachable.delete(s.te_endpoint);
    }
    return true;
  }

  private startEngine(): void {
    const engine = new this.d.native.TransferEngine({ shmOnly: true, memcpyLocal: false, ...(this.d.secret ? { authSecret: this.d.secret } : {}) });
    for (const [address, size] of this.regions) engine.registerRegion(address, size, { serve: false });
    this.engine = engine;
  }

  /** The engine (started now if need be): a dummy's direct puts write with it too (dummy-direct-puts.ts). */
  writer(): TransferEnginePort {
    if (this.closed) throw new Error('the local reads are closed');
    if (!this.engine) this.startEngine();
    return this.engine!;
  }

  /** Drops every entry (a restarted real client: its leases are gone). */
  clear(): void {
    this.cache.clear();
  }

  /** Stops the engine (its threads are joined: nothing copies into our memory afterwards). */
  close(): void {
    this.closed = true;
    this.cache.clear();
    this.engine?.close();
    this.engine = undefined;
  }
}
