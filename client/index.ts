// The package entry point (`import { Client } from 'kvcache-store'`): the embedded client, its
// settings, errors, buffer pool and metadata backends.
export { Client, type ClientOptions, type SegmentInfo } from './client.js';
export { DummyClient, type DummyClientOptions } from './dummy-client.js';
export type { StoreClient } from './store-client.js';
export type { TaskInfo, TaskKindName, TaskStateName } from './task-info.js';
export {
  ClientMetrics,
  clientMetricsSettings,
  CLIENT_OPS,
  TRANSPORTS,
  LATENCY_BUCKETS_S,
  type ClientOp,
  type ClientMetricsSettings,
  type TransportKind,
} from './client-metrics.js';
export type { ClientSetupConfig, ClientSettings } from './setup-config.js';
export type { Value, PutConfig, BatchWriteResult, BatchGetResult, BatchGetIntoResult } from './data-path.js';
export { BufferPool, BufferLease, type BufferPoolOptions, type PoolRegion } from './buffer-pool.js';
export * from './errors.js';
export type { MetadataStore, SegmentDescriptor } from './metadata/metadata-store.js';
export { openMetadataStore } from './metadata/open-metadata-store.js';
export { MasterClient } from './master-client.js';
export { ErrorCode, errorCodeName } from '../common/error-code.js';
