// Loads the compiled addon (native/build/Release/kvstore_native.node) and describes its raw
// exports. Everything else in native/ wraps these with defaults and typed errors.
import type { TransferEngineStats } from './transfer-engine.js';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface RawRegionHandle {
  release(): void;
  populate(threads?: number): Promise<PopulateResult>;
}

/** How a region's pages were backed: MADV_POPULATE_WRITE, or one write per page on kernels before 5.14. */
export interface PopulateResult {
  method: 'madvise' | 'touch';
  threads: number;
}

export interface RawRegion {
  handle: RawRegionHandle;
  buffer: ArrayBuffer;
  address: number;
  size: number;
  kind: string;
  fd: number;
}

export interface RawMapRequest {
  kind: string;
  size: number;
  name?: string;
  path?: string;
  create: boolean;
  offset: number;
  hugepage: boolean;
  hugepageSize: number;
  arenaEnabled: boolean;
  arenaPoolSize: number;
}

export interface RawEngine {
  start(minPort: number, maxPort: number, startOffset: number): string;
  /** Returns the registration's incarnation. */
  registerRegion(address: number, size: number, opts?: { serve?: boolean }): number;
  unregisterRegion(address: number): Promise<boolean>;
  setFence(address: number, fence: { below: number; revoked?: number[] }): Promise<void>;
  /**
   * `fields`: which optional op fields some op sets (1: incarnation/generation, 2: checksum; the
   * addon reads only those; default all); `checksumMask` (at most 32 ops): bit i set when op i asks
   * for `checksum` (then that field is not read). When any op asked for `checksum`, resolves with the
   * ops' CRC-32Cs: a number for a one-op batch, an array of one per op otherwise; else undefined.
   * A rejection's error carries `code` and `endpoints` (the peers that failed).
   */
  transfer(ops: ReadonlyArray<object>, fields?: number, checksumMask?: number): Promise<number | number[] | undefined>;
  /** The handle readInline() takes for `endpoint`; -1 while the engine has no channel to it. */
  peerIndex(endpoint: string): number;
  readInline(peerIndex: number, remoteAddress: number, target: Uint8Array, incarnation?: number): boolean;
  /** readInline fused with the CRC-32C of the bytes copied; -1 when nothing was copied. */
  readInlineCrc(peerIndex: number, remoteAddress: number, target: Uint8Array, incarnation?: number): number;
  stats(): TransferEngineStats;
  close(): void;
  pendingBatches(): number;
}

export interface RawResultArena {
  /** An ArrayBuffer over a fresh range (returned when it is collected); undefined when full. */
  take(length: number): ArrayBuffer | undefined;
  stats(): { size: number; used: number; ranges: number; largestFree: number; refusals: number };
  address(): number;
  size(): number;
  close(): void;
}

export interface RawAddon {
  mapMemory(req: RawMapRequest): RawRegion;
  addressOf(view: ArrayBufferView | ArrayBuffer): number;
  arenaStats(): { decided: boolean; enabled: boolean; poolSize: number; used: number; fallbacks: number };
  /** SO_PEERCRED of a connected Unix socket's fd; null when the kernel does not say. */
  peerCredentials(fd: number): { pid: number; uid: number; gid: number } | null;
  lockShared(path: string): number;
  unlockFile(fd: number): void;
  unlinkIfUnlocked(path: string): boolean;
  TransferEngine: new (opts: object) => RawEngine;
  ResultArena: new (size: number) => RawResultArena;
  rawPumpListen(host?: string): number;
  rawPumpRun(endpoint: string, size: number, count: number, mode: 'stream' | 'pingpong'): Promise<number>;
  /** Seconds for `iterations` memcpys of `size` bytes, cycling over `span` bytes of buffers (default: one pair). */
  memcpyRun(size: number, iterations: number, span?: number): Promise<number>;
  /** CRC-32C of the view's bytes from `seed`; `implementation` forces a backend (tests, benchmarks). */
  crc32c(data: ArrayBufferView, seed: number, implementation?: string): number;
  /** Copies src to the start of dst and returns the CRC-32C of src. */
  copyWithCrc32c(dst: ArrayBufferView, src: ArrayBufferView, seed: number, implementation?: string): number;
  crc32cCombine(crcA: number, crcB: number, lengthB: number | bigint): number;
  /** avx512Copy: how the avx512 backend copies below the streaming size (KVSTORE_CRC32C_COPY). */
  crc32cInfo(): { active: string; available: string[]; avx512Copy: 'memcpy' | 'vector' | 'none' };
  /** Seconds of each loop for `iterations` operations of `size` bytes cycling over `span` bytes. */
  crc32cBench(size: number, iterations: number, span: number, implementation?: string): Promise<{ memcpy: number; crc32c: number; separate: number; fused: number }>;
  rdmaAvailable: boolean;
}

const ADDON_FILE = 'kvstore_native.node';

function findAddon(): string {
  const override = process.env.KVSTORE_NATIVE_ADDON;
  if (override) return override;
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [
    resolve(here, 'build/Release', ADDON_FILE), // running native/*.ts from source
    resolve(here, '../../native/build/Release', ADDON_FILE), // running dist/native/*.js
  ];
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`native addon ${ADDON_FILE} not built (looked in ${candidates.join(', ')}); run \`npm run build:native\``);
  }
  return found;
}

let cached: RawAddon | undefined;

/** The loaded addon (loaded on first use, so importing native/ never fails by itself). */
export function addon(): RawAddon {
  if (!cached) cached = createRequire(import.meta.url)(findAddon()) as RawAddon;
  return cached;
}
