// The master's pure core: objects, replicas, leases, pins, eviction, zombie writes, segments and
// client liveness, one method per RPC. No I/O, no timers: every mutating method takes `now`
// (monotonic ms) and placement draws from the injected Rng. Bad input returns a status code and
// changes nothing; the core never keeps a reference to a request object.
//
// MasterCore is the facade: it builds the shared state (core-shared.ts) and the parts that work
// on it, and passes each call to its part (docs/master.md, "The core's files"):
//   writes   write-path.ts (PutStart/End/Revoke and batches), write-placement.ts (where space comes from)
//   upserts  upsert-path.ts
//   segments membership.ts (Ping, mount, unmount and drain, sweep, eviction steps)
//   removals removal-path.ts, object-lifecycle.ts (how objects leave, for every part)
//   reads    read-path.ts, table-walk.ts (the regex query in steps)
//   views    diagnostics.ts (stats, listings, BatchQueryIp, index checks)
//   tasks    task-path.ts (copy and move tasks), task-manager.ts (their queues)
//   state    state-export.ts, state-import.ts
import type { ChangeSink } from './change-sink.js';
import { CoreShared } from './core-shared.js';
import { Diagnostics } from './diagnostics.js';
import { FileIndex } from './file-index.js';
import { DiskTier } from './disk-tier.js';
import type { EvictionResult } from './eviction-round.js';
import type { MasterCoreConfig, MasterStats, SegmentDetail, SweepReport } from './master-core-config.js';
import { validateMasterCoreConfig } from './master-core-config.js';
import { compileKeyRegex } from './key-regex.js';
import { Membership, type PingArgs } from './membership.js';
import { ObjectLifecycle } from './object-lifecycle.js';
import { ReadPath } from './read-path.js';
import { RemovalPath } from './removal-path.js';
import type { Rng } from './rng.js';
import { SeededRng } from './rng.js';
import { DEFAULT_TASK_LIMITS } from './task-manager.js';
import { TaskPath } from './task-path.js';
import type { MasterRpcSurface } from './rpc-surface.js';
import { objectRecordSteps, segmentRecords } from './state-export.js';
import { importState, type ImportReport } from './state-import.js';
import type { CoreState, ObjectRecord, SegmentRecord } from './state-records.js';
import { answered, queryByRegexSteps, runSteps, type Steps, type WalkHost } from './table-walk.js';
import { UpsertPath } from './upsert-path.js';
import { WritePath } from './write-path.js';
import { WritePlacement } from './write-placement.js';
import { ErrorCode } from '../../common/error-code.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import type { CreateCopyTaskRequest__Output } from '../../proto/gen/store/CreateCopyTaskRequest.js';
import type { CreateCopyTaskResponse__Output } from '../../proto/gen/store/CreateCopyTaskResponse.js';
import type { CreateMoveTaskRequest__Output } from '../../proto/gen/store/CreateMoveTaskRequest.js';
import type { CreateMoveTaskResponse__Output } from '../../proto/gen/store/CreateMoveTaskResponse.js';
import type { QueryTaskRequest__Output } from '../../proto/gen/store/QueryTaskRequest.js';
import type { QueryTaskResponse__Output } from '../../proto/gen/store/QueryTaskResponse.js';
import type { BatchExistKeyRequest__Output } from '../../proto/gen/store/BatchExistKeyRequest.js';
import type { BatchExistKeyResponse__Output } from '../../proto/gen/store/BatchExistKeyResponse.js';
import type { BatchGetReplicaListRequest__Output } from '../../proto/gen/store/BatchGetReplicaListRequest.js';
import type { BatchGetReplicaListResponse__Output } from '../../proto/gen/store/BatchGetReplicaListResponse.js';
import type { BatchKeysRequest__Output } from '../../proto/gen/store/BatchKeysRequest.js';
import type { BatchKeysResponse__Output } from '../../proto/gen/store/BatchKeysResponse.js';
import type { BatchPutStartRequest__Output } from '../../proto/gen/store/BatchPutStartRequest.js';
import type { BatchPutStartResponse__Output } from '../../proto/gen/store/BatchPutStartResponse.js';
import type { BatchQueryIpRequest__Output } from '../../proto/gen/store/BatchQueryIpRequest.js';
import type { BatchQueryIpResponse__Output } from '../../proto/gen/store/BatchQueryIpResponse.js';
import type { BatchReplicaClearRequest__Output } from '../../proto/gen/store/BatchReplicaClearRequest.js';
import type { BatchReplicaClearResponse__Output } from '../../proto/gen/store/BatchReplicaClearResponse.js';
import type { BatchUpsertStartRequest__Output } from '../../proto/gen/store/BatchUpsertStartRequest.js';
import type { BatchUpsertStartResponse__Output } from '../../proto/gen/store/BatchUpsertStartResponse.js';
import type { ExistKeyRequest__Output } from '../../proto/gen/store/ExistKeyRequest.js';
import type { ExistKeyResponse__Output } from '../../proto/gen/store/ExistKeyResponse.js';
import type { GetReplicaListByRegexRequest__Output } from '../../proto/gen/store/GetReplicaListByRegexRequest.js';
import type { GetReplicaListByRegexResponse__Output } from '../../proto/gen/store/GetReplicaListByRegexResponse.js';
import type { GetReplicaListRequest__Output } from '../../proto/gen/store/GetReplicaListRequest.js';
import type { GetReplicaListResponse__Output } from '../../proto/gen/store/GetReplicaListResponse.js';
import type { MountSegmentRequest__Output } from '../../proto/gen/store/MountSegmentRequest.js';
import type { MountSegmentResponse__Output } from '../../proto/gen/store/MountSegmentResponse.js';
import type { PingResponse__Output } from '../../proto/gen/store/PingResponse.js';
import type { PutEndRequest__Output } from '../../proto/gen/store/PutEndRequest.js';
import type { PutEndResponse__Output } from '../../proto/gen/store/PutEndResponse.js';
import type { PutRevokeRequest__Output } from '../../proto/gen/store/PutRevokeRequest.js';
import type { PutRevokeResponse__Output } from '../../proto/gen/store/PutRevokeResponse.js';
import type { PutStartRequest__Output } from '../../proto/gen/store/PutStartRequest.js';
import type { PutStartResponse__Output } from '../../proto/gen/store/PutStartResponse.js';
import type { RemoveAllRequest__Output } from '../../proto/gen/store/RemoveAllRequest.js';
import type { RemoveAllResponse__Output } from '../../proto/gen/store/RemoveAllResponse.js';
import type { RemoveByRegexRequest__Output } from '../../proto/gen/store/RemoveByRegexRequest.js';
import type { RemoveByRegexResponse__Output } from '../../proto/gen/store/RemoveByRegexResponse.js';
import type { RemoveRequest__Output } from '../../proto/gen/store/RemoveRequest.js';
import type { RemoveResponse__Output } from '../../proto/gen/store/RemoveResponse.js';
import type { BatchReplicaCopiedRequest__Output } from '../../proto/gen/store/BatchReplicaCopiedRequest.js';
import type { BatchReplicaCopiedResponse__Output } from '../../proto/gen/store/BatchReplicaCopiedResponse.js';
import type { ReplicaCopiedRequest__Output } from '../../proto/gen/store/ReplicaCopiedRequest.js';
import type { ReplicaCopiedResponse__Output } from '../../proto/gen/store/ReplicaCopiedResponse.js';
import type { UnmountSegmentRequest__Output } from '../../proto/gen/store/UnmountSegmentRequest.js';
import type { UnmountSegmentResponse__Output } from '../../proto/gen/store/UnmountSegmentResponse.js';
import type { UpsertEndRequest__Output } from '../../proto/gen/store/UpsertEndRequest.js';
import type { UpsertEndResponse__Output } from '../../proto/gen/store/UpsertEndResponse.js';
import type { UpsertRevokeRequest__Output } from '../../proto/gen/store/UpsertRevokeRequest.js';
import type { UpsertRevokeResponse__Output } from '../../proto/gen/store/UpsertRevokeResponse.js';
import type { UpsertStartRequest__Output } from '../../proto/gen/store/UpsertStartRequest.js';
import type { UpsertStartResponse__Output } from '../../proto/gen/store/UpsertStartResponse.js';

export type { Rng } from './rng.js';
export type { ChangeSink } from './change-sink.js';
export type { CoreState, ObjectRecord, SegmentRecord } from './state-records.js';
export { SeededRng } from './rng.js';
export { PUT_EVICTION_CAP, SWEEP_EVICTION_BATCH } from './eviction.js';
export type { EvictionResult } from './eviction-round.js';
export type { MasterCoreConfig, MasterStats, SegmentDetail, SweepReport } from './master-core-config.js';
export { defaultMasterCoreConfig, EMPTY_STATS, validateMasterCoreConfig } from './master-core-config.js';
export { MOUNT_LIMITS } from './membership.js';
export { FileIndex } from './file-index.js';
export type { FileEntry, FileTierStats } from './file-index.js';

export class MasterCore implements MasterRpcSurface {
  readonly config: Readonly<MasterCoreConfig>;
  private readonly shared: CoreShared;
  private readonly writes: WritePath;
  private readonly upserts: UpsertPath;
  private readonly membership: Membership;
  private readonly removals: RemovalPath;
  private readonly reads: ReadPath;
  private readonly views: Diagnostics;
  private readonly taskPath: TaskPath;
  /** The table as the whole-table walks see it (table-walk.ts, state-export.ts). */
  private readonly walkHost: WalkHost;

  /**
   * `keyHashSeed` varies the key hashes (object table, batch key set); a process serving untrusted
   * clients passes a random one, so nobody can pick keys that all collide (the default keeps tests
   * reproducible). `heap.full`: the process's heap is near its limit (master/heap-guard.ts), so no
   * new placement is made: PutStart and UpsertStart get NO_AVAILABLE_HANDLE instead of the master
   * running out of memory and losing every object. Reads, ends, removals and in-place upserts go on.
   * `files`: the file tier's index (file-index.ts), which the process shell fills from the
   * directory and whose doomed files it deletes; absent: the tier is off.
   */
  constructor(
    config: MasterCoreConfig,
    rng: Rng = new SeededRng(0x5eed),
    keyHashSeed?: number,
    heap: { readonly full: boolean } = { full: false },
    files: FileIndex = new FileIndex('', 0),
  ) {
    validateMasterCoreConfig(config);
    this.config = { ...config };
    // Eviction needs the lifecycle, which needs the shared state: bound once both exist.
    const s: CoreShared = new CoreShared(this.config, rng, keyHashSeed, heap, {
      release: (meta) => life.abortWrite(meta.key, meta),
      evict: (meta) => s.disk.evictFromMemory(meta), // frees memory only when a DISK replica holds the object
    });
    s.files = files;
    const life = new ObjectLifecycle(s);
    s.disk = new DiskTier(s, life);
    const placement = new WritePlacement(s);
    this.shared = s;
    this.walkHost = {
      objects: s.objects,
      segments: s.segments,
      files: s.files,
      get removals() {
        return s.removals;
      },
      // The removal walks' deletions: the object's file goes with it.
      deleteObject: (key, meta) => {
        life.deleteObject(key, meta);
        s.files.remove(key);
      },
    };
    this.writes = new WritePath(s, life, placement);
    this.upserts = new UpsertPath(s, life, placement, this.writes);
    this.membership = new Membership(s, life, placement);
    this.removals = new RemovalPath(s, life, this.walkHost);
    this.reads = new ReadPath(s.objects, s.segments, s.leases, s.order, this.config.defaultKvLeaseTtlMs, files, (meta) => s.disk.read(meta));
    this.views = new Diagnostics(s);
    // Task ids scoped by the view version like copy ids (an id from an earlier master names no task here).
    this.taskPath = new TaskPath(s, this.config.taskLimits ?? DEFAULT_TASK_LIMITS, this.config.viewVersion * 1024 + 1);
  }

  // --- Liveness and segments (membership.ts) ---

  ping(req: PingArgs, now: number): PingResponse__Output {
    return this.membership.ping(req, now);
  }

  replicaCopied(req: ReplicaCopiedRequest__Output, now: number): ReplicaCopiedResponse__Output {
    return this.membership.replicaCopied(req, now);
  }

  batchReplicaCopied(req: BatchReplicaCopiedRequest__Output, now: number): BatchReplicaCopiedResponse__Output {
    return this.membership.batchReplicaCopied(req, now);
  }

  mountSegment(req: MountSegmentRequest__Output, now: number): MountSegmentResponse__Output {
    return this.membership.mountSegment(req, now);
  }

  unmountSegment(req: UnmountSegmentRequest__Output, now: number): UnmountSegmentResponse__Output {
    return this.membership.unmountSegment(req, now);
  }

  // --- Reads (read-path.ts) ---

  existKey(req: ExistKeyRequest__Output, now: number): ExistKeyResponse__Output {
    return this.reads.existKey(req.key, now);
  }

  batchExistKey(req: BatchExistKeyRequest__Output, now: number): BatchExistKeyResponse__Output {
    return this.reads.batchExistKey(req, now);
  }

  getReplicaList(req: GetReplicaListRequest__Output, now: number): GetReplicaListResponse__Output {
    return this.reads.getReplicaList(req.key, now);
  }

  batchGetReplicaList(req: BatchGetReplicaListRequest__Output, now: number): BatchGetReplicaListResponse__Output {
    return this.reads.batchGetReplicaList(req, now);
  }

  /** Complete objects whose key matches; a query only, so no lease is granted. */
  getReplicaListByRegex(req: GetReplicaListByRegexRequest__Output, now: number): GetReplicaListByRegexResponse__Output {
    return runSteps(this.getReplicaListByRegexSteps(req, now), now);
  }

  /**
   * getReplicaListByRegex in bounded steps (table-walk.ts); RESULT_TOO_LARGE past the reply limit
   * (`limit` bytes: the frame limit, MAX_QUERY_REPLY_BYTES; tests pass a smaller one).
   */
  getReplicaListByRegexSteps(req: GetReplicaListByRegexRequest__Output, _now: number, limit?: number): Steps<GetReplicaListByRegexResponse__Output> {
    const re = compileKeyRegex(req.key_regex);
    if (re === null) return answered({ status_code: ErrorCode.INVALID_PARAMS, object_map: {} });
    return queryByRegexSteps(this.walkHost, re, limit);
  }

  // --- Writes (write-path.ts) ---

  putStart(req: PutStartRequest__Output, now: number): PutStartResponse__Output {
    return this.writes.putStart(req, now);
  }

  batchPutStart(req: BatchPutStartRequest__Output, now: number): BatchPutStartResponse__Output {
    return this.writes.batchPutStart(req, now);
  }

  putEnd(req: PutEndRequest__Output, now: number): PutEndResponse__Output {
    return this.writes.putEnd(req, now);
  }

  batchPutEnd(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.writes.batchPutEnd(req, now);
  }

  putRevoke(req: PutRevokeRequest__Output, now: number): PutRevokeResponse__Output {
    return this.writes.putRevoke(req, now);
  }

  batchPutRevoke(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.writes.batchPutRevoke(req, now);
  }

  // --- Upserts (upsert-path.ts) ---

  upsertStart(req: UpsertStartRequest__Output, now: number): UpsertStartResponse__Output {
    return this.upserts.upsertStart(req, now);
  }

  batchUpsertStart(req: BatchUpsertStartRequest__Output, now: number): BatchUpsertStartResponse__Output {
    return this.upserts.batchUpsertStart(req, now);
  }

  upsertEnd(req: UpsertEndRequest__Output, now: number): UpsertEndResponse__Output {
    return this.upserts.upsertEnd(req, now);
  }

  batchUpsertEnd(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.upserts.batchUpsertEnd(req, now);
  }

  upsertRevoke(req: UpsertRevokeRequest__Output, now: number): UpsertRevokeResponse__Output {
    return this.upserts.upsertRevoke(req, now);
  }

  batchUpsertRevoke(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.upserts.batchUpsertRevoke(req, now);
  }

  // --- Removal (removal-path.ts) ---

  remove(req: RemoveRequest__Output, now: number): RemoveResponse__Output {
    return this.removals.remove(req, now);
  }

  /** Removes complete, unleased, not hard-pinned objects whose key matches. */
  removeByRegex(req: RemoveByRegexRequest__Output, now: number): RemoveByRegexResponse__Output {
    return runSteps(this.removeByRegexSteps(req, now), now);
  }

  /** removeByRegex in bounded steps (table-walk.ts). */
  removeByRegexSteps(req: RemoveByRegexRequest__Output, now: number): Steps<RemoveByRegexResponse__Output> {
    return this.removals.removeByRegexSteps(req, now);
  }

  /** Removes every complete object without an active lease, hard-pinned ones included. */
  removeAll(req: RemoveAllRequest__Output, now: number): RemoveAllResponse__Output {
    return runSteps(this.removeAllSteps(req, now), now);
  }

  /** removeAll in bounded steps (table-walk.ts). */
  removeAllSteps(req: RemoveAllRequest__Output, now: number): Steps<RemoveAllResponse__Output> {
    return this.removals.removeAllSteps(req, now);
  }

  batchReplicaClear(req: BatchReplicaClearRequest__Output, now: number): BatchReplicaClearResponse__Output {
    return this.removals.batchReplicaClear(req, now);
  }

  // --- Copy and move tasks (task-path.ts) ---

  createCopyTask(req: CreateCopyTaskRequest__Output, now: number): CreateCopyTaskResponse__Output {
    return this.taskPath.createCopyTask(req, now);
  }

  createMoveTask(req: CreateMoveTaskRequest__Output, now: number): CreateMoveTaskResponse__Output {
    return this.taskPath.createMoveTask(req, now);
  }

  queryTask(req: QueryTaskRequest__Output, now: number): QueryTaskResponse__Output {
    return this.taskPath.queryTask(req, now);
  }

  // --- Cluster queries and housekeeping ---

  batchQueryIp(req: BatchQueryIpRequest__Output, _now: number): BatchQueryIpResponse__Output {
    return this.views.batchQueryIp(req);
  }

  /** Drops silent clients, finishes unmounts, pays eviction debt (membership.ts). */
  sweep(now: number): SweepReport {
    this.shared.files.expire(now);
    const report = this.membership.sweep(now);
    const finished = this.taskPath.sweep(now);
    if (finished !== undefined) report.finishedTasks = finished;
    return report;
  }

  /** One bounded eviction step (membership.ts). */
  evict(now: number, budget?: number): EvictionResult {
    return this.membership.evict(now, budget);
  }

  // --- Read-only views, no lease granted (diagnostics.ts) ---

  stats(now: number): MasterStats {
    return { ...this.views.stats(now), ...this.taskPath.stats() };
  }

  /** The file tier's index (the shell loads it and deletes the files it dooms). */
  get files(): FileIndex {
    return this.shared.files;
  }

  segmentsDetail(): SegmentDetail[] {
    return this.views.segmentsDetail();
  }

  /** Keys of complete (readable) objects. */
  allKeys(): IterableIterator<string> {
    return this.views.allKeys();
  }

  /** COMPLETE replicas of an object; [] while it is being written; undefined when absent. */
  queryKey(key: string): ReplicaInfo__Output[] | undefined {
    return this.views.queryKey(key);
  }

  evictionOrder(): { plain: string[]; softPinned: string[] } {
    return this.views.evictionOrder();
  }

  segmentNames(): string[] {
    return this.views.segmentNames();
  }

  querySegment(name: string): { used: number; capacity: number } | undefined {
    return this.views.querySegment(name);
  }

  /** Cross-checks the derived structures against the object map: one line per inconsistency. */
  checkIndexes(): string[] {
    return this.views.checkIndexes();
  }

  // --- State (docs/ha.md): changes out, a whole state in and out ---

  /**
   * Has `notify(clientId)` called when copies wait for a copier (copier-roster.ts): the shell sends
   * it a notice on its channel. Undefined: none sent (Ping replies then say so).
   */
  setCopierNotify(notify: ((clientId: string) => void) | undefined): void {
    this.shared.copiers.setNotify(notify);
  }

  /** Reports every committed change from now on to `sink` (undefined: to nobody). */
  setChangeSink(sink: ChangeSink | undefined): void {
    this.shared.sink = sink;
  }

  /** Takes a state made by another master into this empty core (state-import.ts). */
  importState(state: CoreState, now: number): ImportReport {
    return importState(this.shared, state, now);
  }

  /** Every segment's record (a state's first part; see state-export.ts). */
  exportSegments(): SegmentRecord[] {
    return segmentRecords(this.walkHost);
  }

  /** The complete objects' records in bounded steps (state-export.ts). */
  exportObjectSteps(now: number): Generator<ObjectRecord[], void, number> {
    return objectRecordSteps(this.walkHost, now);
  }

  /** The whole state at once (tests, small tables). */
  exportState(now: number): CoreState {
    const objects: ObjectRecord[] = [];
    const steps = objectRecordSteps(this.walkHost, now);
    for (let r = steps.next(now); !r.done; r = steps.next(now)) for (const rec of r.value) objects.push(rec);
    return { segments: this.exportSegments(), objects };
  }
}
