// The client's data path: Put/Upsert (write-path.ts) and Get (read-path.ts), single and batched,
// over what they share (path-core.ts). Bulk bytes never pass through JS loops: Buffer copies are
// memcpy, remote bytes move in the native engine. This class only puts the parts together.
import { PathCore, type BatchGetIntoResult, type BatchGetResult, type BatchWriteResult, type DataPathDeps, type PutConfig, type Value } from './path-core.js';
import type { ReplicaCopy__Output } from '../proto/gen/store/ReplicaCopy.js';
import { ReadPath, type ReadObserver, type ReadSource } from './read-path.js';
import { copyReplicas } from './replica-copy.js';
import { WritePath } from './write-path.js';

export {
  ARENA_RESULT_BYTES,
  checkKey,
  INLINE_READ_MAX,
  LARGE_VALUE_BYTES,
  transferFailure,
  type BatchGetIntoResult,
  type BatchGetResult,
  type BatchWriteResult,
  type DataPathDeps,
  type MasterApi,
  type OwnSegment,
  type PutConfig,
  type Value,
} from './path-core.js';
export { unreachableSegments, WRITE_ATTEMPTS } from './write-path.js';
export { DEFAULT_REPLICA_CACHE_ENTRIES } from './read-path.js';

export class DataPath {
  private readonly core: PathCore;
  private readonly writes: WritePath;
  private readonly reads: ReadPath;

  constructor(deps: DataPathDeps) {
    this.core = new PathCore(deps);
    this.writes = new WritePath(this.core);
    this.reads = new ReadPath(this.core);
  }

  /** Address of `view` when it lies inside memory registered with the engine (zero-copy), else undefined. */
  registeredAddress(view: Uint8Array): number | undefined {
    return this.core.registeredAddress(view);
  }

  put(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writes.put(key, value, config);
  }

  upsert(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writes.upsert(key, value, config);
  }

  putBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writes.putBatch(items);
  }

  upsertBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writes.upsertBatch(items);
  }

  get(key: string): Promise<Buffer> {
    return this.reads.get(key);
  }

  getBounded(key: string, maxBytes: number, observe?: ReadObserver): Promise<{ size: number; value?: Buffer }> {
    return this.reads.getBounded(key, maxBytes, observe);
  }

  getInto(key: string, target: Uint8Array, observe?: ReadObserver): Promise<number> {
    return this.reads.getInto(key, target, observe);
  }

  getBatch(keys: readonly string[]): Promise<BatchGetResult[]> {
    return this.reads.getBatch(keys);
  }

  getIntoBatch(items: readonly { key: string; target: Uint8Array }[], observe?: (i: number, source: ReadSource) => void): Promise<BatchGetIntoResult[]> {
    return this.reads.getIntoBatch(items, observe);
  }

  /** A Ping reply's replica copies (replica-copy.ts): each one's outcome, in order. */
  copyReplicas(copies: readonly ReplicaCopy__Output[], lastWriteStarted?: () => void): Promise<(Error | undefined)[]> {
    return copyReplicas(this.core, copies, lastWriteStarted);
  }

  /** Forgets every cached replica list (the master changed: its leases are gone). */
  clearReplicaCache(): void {
    this.reads.clearReplicaCache();
  }

  replicaCacheStats(): { hits: number; misses: number; entries: number } {
    return this.reads.replicaCacheStats();
  }
}
