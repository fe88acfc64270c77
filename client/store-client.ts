// The interface every store client offers the application, whichever way it runs: the embedded
// Client (this process owns memory and a transfer engine) and the DummyClient (an inference
// process that forwards to a real client over a Unix socket, with values in shared memory).
// Code written against StoreClient runs unchanged in both; Client.connect() picks one.
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import type { BufferLease } from './buffer-pool.js';
import type { TaskInfo } from './task-info.js';
import type { BatchGetIntoResult, BatchGetResult, BatchWriteResult, PutConfig, Value } from './data-path.js';

export interface StoreClient {
  /** Stores `value` under `key` (immutable until removed); ObjectExistsError if present. */
  put(key: string, value: Value, config?: PutConfig): Promise<void>;
  /** Inserts or replaces `key`. */
  upsert(key: string, value: Value, config?: PutConfig): Promise<void>;
  putBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]>;
  upsertBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]>;
  /** The object's bytes; ObjectNotFoundError when absent. */
  get(key: string): Promise<Buffer>;
  /** Reads into `target` (no copy when it is memory from allocBuffer); returns the size. */
  getInto(key: string, target: Uint8Array): Promise<number>;
  getBatch(keys: readonly string[]): Promise<BatchGetResult[]>;
  getIntoBatch(items: readonly { key: string; target: Uint8Array }[]): Promise<BatchGetIntoResult[]>;
  /** Memory that puts read from and gets write into with no copy; release() it when done. */
  allocBuffer(size: number, timeoutMs?: number): Promise<BufferLease>;
  isExist(key: string): Promise<boolean>;
  batchIsExist(keys: readonly string[]): Promise<boolean[]>;
  getSize(key: string): Promise<number>;
  remove(key: string, force?: boolean): Promise<void>;
  removeByRegex(keyRegex: string): Promise<number>;
  queryByRegex(keyRegex: string): Promise<Map<string, ReplicaInfo__Output[]>>;
  removeAll(): Promise<number>;
  batchQueryIp(clientIds?: readonly string[]): Promise<Map<string, string[]>>;
  batchReplicaClear(objectKeys: readonly string[], segmentName?: string): Promise<string[]>;
  /** Queues a task giving `key` a replica on each segment of `targets`; returns the task id (docs/tiers.md "Copy and move tasks"). */
  createCopyTask(key: string, targets: readonly string[]): Promise<number>;
  /** Queues a task moving `key`'s replica from segment `source` to segment `target`; returns the task id. */
  createMoveTask(key: string, source: string, target: string): Promise<number>;
  /** A task's state; TaskNotFoundError-coded StoreError (TASK_NOT_FOUND) when the master has no such task. */
  queryTask(taskId: number): Promise<TaskInfo>;
  close(): Promise<void>;
}
