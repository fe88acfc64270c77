// CRC-32C (Castagnoli) checksums over any TypedArray, Buffer or DataView, from the native addon
// (native/src/crc32c.h): the checksum the store keeps for every slice of every object. Runs
// synchronously on the calling thread at memory speed (see docs/native.md, "Checksums").
import { addon } from './addon.js';
import { ChecksumError } from './errors.js';

/** The native backends; the best one the CPU has is used unless KVSTORE_CRC32C_IMPL names another. */
export type Crc32cImplementation = 'portable' | 'sse42' | 'avx512' | 'arm64';

/**
 * The standard CRC-32C of `data`'s bytes, continuing from `seed` (the CRC of the bytes before,
 * 0 to start): crc32c(b, crc32c(a)) equals the CRC of a followed by b. Unsigned 32-bit.
 */
export function crc32c(data: ArrayBufferView, seed = 0): number {
  try {
    return addon().crc32c(data, seed);
  } catch (e) {
    throw ChecksumError.from(e);
  }
}

/**
 * Copies `src` into the start of `dst` (which must be at least as long) and returns the CRC-32C of
 * `src`'s bytes from `seed`, in one pass over the memory. Overlapping views are allowed.
 */
export function copyWithCrc32c(dst: ArrayBufferView, src: ArrayBufferView, seed = 0): number {
  try {
    return addon().copyWithCrc32c(dst, src, seed);
  } catch (e) {
    throw ChecksumError.from(e);
  }
}

/** The CRC-32C of A followed by B, from crc32c(A), crc32c(B) and B's length (O(log lengthB)). */
export function crc32cCombine(a: number, b: number, lengthB: number | bigint): number {
  try {
    return addon().crc32cCombine(a, b, lengthB);
  } catch (e) {
    throw ChecksumError.from(e);
  }
}

/** The backend in use in this process and those this CPU can run. */
export function crc32cImplementations(): { active: Crc32cImplementation; available: Crc32cImplementation[] } {
  return addon().crc32cInfo() as { active: Crc32cImplementation; available: Crc32cImplementation[] };
}

/** crc32c() with a given backend (tests and benchmarks); it must be one this CPU can run. */
export function crc32cUsing(implementation: Crc32cImplementation, data: ArrayBufferView, seed = 0): number {
  try {
    return addon().crc32c(data, seed, implementation);
  } catch (e) {
    throw ChecksumError.from(e);
  }
}

/** copyWithCrc32c() with a given backend (tests and benchmarks). */
export function copyWithCrc32cUsing(implementation: Crc32cImplementation, dst: ArrayBufferView, src: ArrayBufferView, seed = 0): number {
  try {
    return addon().copyWithCrc32c(dst, src, seed, implementation);
  } catch (e) {
    throw ChecksumError.from(e);
  }
}
