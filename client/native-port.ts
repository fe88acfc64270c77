// The parts of the native addon (native/index.ts) the client uses: mapped memory and the transfer
// engine. Data types are the addon's own; the port interfaces below are the seam the client's
// logic is written against (its tests drive it with an in-memory engine).
import type { Socket } from 'node:net';
import type { PeerCredentials } from '../common/peer-uids.js';
export type { MemoryRegion as MappedRegion, MapOptions as MapMemoryOptions } from '../native/memory.js';
export type { TransferOp as EngineTransferOp, TransferEngineOptions } from '../native/transfer-engine.js';
import type { MemoryRegion as MappedRegion, MapOptions as MapMemoryOptions } from '../native/memory.js';
import type { TransferOp as EngineTransferOp, TransferEngineOptions } from '../native/transfer-engine.js';

export interface TransferEnginePort {
  readonly endpoint: string;
  start(): string;
  /** Returns the registration's incarnation (native/transfer-engine.ts). */
  registerRegion(address: number, size: number, opts?: { serve?: boolean }): number;
  /** Resolves once no chunk moves bytes in the region any more: only then may its memory go. */
  unregisterRegion(address: number): Promise<boolean>;
  /**
   * Resolves with one CRC-32C per op (0 for ops that did not ask) when some op set `checksum`,
   * else with nothing; a rejection's TransferError names the failed peers in `endpoints`
   * (native/transfer-engine.ts). `void` keeps engines that compute no checksums valid.
   */
  transfer(ops: EngineTransferOp[]): Promise<Uint32Array | undefined | void>;
  /**
   * Installs the write fence of a served region: later writes of generations below `below` or in
   * `revoked` are refused; resolves once no refused write is still moving bytes into it.
   */
  setFence(address: number, fence: { below: number; revoked?: number[] }): Promise<void>;
  /**
   * A small same-host READ finished now into `target`: true when the bytes are there, false
   * (nothing copied) when transfer() must do it (native/transfer-engine.ts).
   */
  readInline(endpoint: string, remoteAddress: number, target: Uint8Array, incarnation?: number): boolean;
  /**
   * readInline with the copy fused with the CRC-32C of the bytes copied: that CRC (unsigned), or
   * -1 when nothing was copied. Optional: an engine without it is read with readInline + crc32c.
   */
  readInlineCrc?(endpoint: string, remoteAddress: number, target: Uint8Array, incarnation?: number): number;
  close(): void;
}

/** Memory large Get results are read into directly (native/result-arena.ts). */
export interface ResultArenaPort {
  readonly address: number;
  readonly size: number;
  /** A Buffer over a range no other live result shares, returned when it is collected; undefined when full. */
  take(length: number): Buffer | undefined;
  /** No more takes; memory goes back to the kernel as results are collected. */
  close(): void;
}

export interface NativePort {
  mapMemory(opts: MapMemoryOptions): MappedRegion;
  addressOf(view: ArrayBufferView): number;
  ResultArena: new (size: number) => ResultArenaPort;
  TransferEngine: new (opts?: TransferEngineOptions) => TransferEnginePort;
  clientPortRange(env?: Record<string, string | undefined>): { min: number; max: number };
  /** CRC-32C of `data` (native/checksum.ts). */
  crc32c(data: ArrayBufferView): number;
  /** Copies `src` into `dst` and returns the CRC-32C of `src`, in one pass. */
  copyWithCrc32c(dst: ArrayBufferView, src: ArrayBufferView): number;
  /** A shared flock on a file, held until release() (native/file-lock.ts). */
  lockShared(path: string): { release(): void };
  /** Deletes `path` unless a process holds a lock on it; true when it is gone. */
  unlinkIfUnlocked(path: string): boolean;
  /** SO_PEERCRED of a connected Unix socket (native/peer-credentials.ts); null when unknown. */
  socketPeerCredentials(socket: Socket): PeerCredentials | null;
}

/** Loads the addon (built by node-gyp); the error says how to build it when it is missing. */
export async function loadNative(): Promise<NativePort> {
  try {
    return await import('../native/index.js');
  } catch (e) {
    throw new Error('the native addon could not be loaded (run `npm run build` / node-gyp rebuild in native/)', { cause: e });
  }
}
