// The part of MasterCore (master/core/master-core.ts) that the process shell uses: RPC methods
// are reached generically by name; the rest is typed here so the shell compiles on its own.
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';

export interface CoreStats {
  segments: number;
  capacityBytes: number;
  usedBytes: number;
  objects: number;
  activeLeases: number;
  softPinned: number;
  hardPinned: number;
  evictionsTotal: number;
  clients: number;
}

export interface SweepResult {
  droppedClients: string[];
  unmountedSegments: string[];
  evictedObjects: number;
  releasedZombies: number;
}

export interface SegmentDetail {
  segment_name: string;
  segment_id: string;
  client_id: string;
  base_address: number;
  size_bytes: number;
  te_endpoint: string;
  protocol: string;
  status: 'MOUNTED' | 'UNMOUNTING';
  allocator_used_bytes: number;
  allocator_capacity_bytes: number;
}

export interface MasterCorePort {
  sweep(now: number): SweepResult;
  stats(now: number): CoreStats;
  segmentsDetail(): SegmentDetail[];
  allKeys(): Iterable<string>;
  queryKey(key: string): ReplicaInfo__Output[] | undefined;
  segmentNames(): string[];
  querySegment(name: string): { used: number; capacity: number } | undefined;
}
