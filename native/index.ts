// Public surface of the native data path: memory mappings, the TCP transfer engine and CRC-32C.
export { mapMemory, addressOf, arenaStats, type MapOptions, type MemoryKind, type MemoryRegion } from './memory.js';
export { ResultArena, type ResultArenaStats } from './result-arena.js';
export {
  TransferEngine,
  ENGINE_DEFAULTS,
  type TransferOp,
  type TransferEngineOptions,
  type TransferEngineStats,
  type RegisterOptions,
  type WriteFence,
} from './transfer-engine.js';
export { TransferError, TransferErrorCode, MemoryError, MemoryErrorCode, ChecksumError, ChecksumErrorCode } from './errors.js';
export { crc32c, copyWithCrc32c, crc32cCombine, crc32cImplementations, crc32cUsing, copyWithCrc32cUsing, type Crc32cImplementation } from './checksum.js';
export {
  clientPortRange,
  isValidClientPort,
  hugepageDefaults,
  arenaConfig,
  memcpyLocalDefault,
  shmTransportDefault,
  shmPeerUidsDefault,
  DEFAULT_CLIENT_MIN_PORT,
  DEFAULT_CLIENT_MAX_PORT,
  type HugepageSize,
} from './env-config.js';
import { addon } from './addon.js';

/** RDMA is not built in this addon (no ibverbs device on these machines). */
export function rdmaAvailable(): boolean {
  return addon().rdmaAvailable;
}
export { lockShared, unlinkIfUnlocked, type FileLock } from './file-lock.js';
export { peerCredentials, socketPeerCredentials } from './peer-credentials.js';
