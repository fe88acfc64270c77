// The part of MasterCore (master/core/master-core.ts) that the process shell uses: RPC methods
// are reached generically by name; the rest is the typed view below (the HA gate also wraps it).
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';

// The report types are the core's own, under the names the shell has used from the start.
export type { MasterStats as CoreStats, SweepReport as SweepResult, SegmentDetail } from './core/master-core.js';
import type { MasterStats as CoreStats, SweepReport as SweepResult, SegmentDetail } from './core/master-core.js';

export interface MasterCorePort {
  sweep(now: number): SweepResult;
  stats(now: number): CoreStats;
  segmentsDetail(): SegmentDetail[];
  allKeys(): Iterable<string>;
  queryKey(key: string): ReplicaInfo__Output[] | undefined;
  segmentNames(): string[];
  querySegment(name: string): { used: number; capacity: number } | undefined;
}
