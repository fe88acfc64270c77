// The master's pure core: objects, replicas, leases, pins, eviction, zombie writes, segments and
// client liveness, one method per RPC. No I/O, no timers: every mutating method takes `now`
// (monotonic ms) and placement draws from the injected Rng. Bad input returns a status code and
// changes nothing; the core never keeps a reference to a request object.
import { splitHostPort } from '../../common/host-port.js';
import type { MasterRpcSurface } from './rpc-surface.js';
import { ErrorCode } from '../../common/error-code.js';
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
import type { IPAddressList__Output } from '../../proto/gen/store/IPAddressList.js';
import type { MountSegmentRequest__Output } from '../../proto/gen/store/MountSegmentRequest.js';
import type { MountSegmentResponse__Output } from '../../proto/gen/store/MountSegmentResponse.js';
import type { PingRequest__Output } from '../../proto/gen/store/PingRequest.js';
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
import type { ReplicaCopiedRequest__Output } from '../../proto/gen/store/ReplicaCopiedRequest.js';
import type { ReplicaCopiedResponse__Output } from '../../proto/gen/store/ReplicaCopiedResponse.js';
import type { ReplicaCopy__Output } from '../../proto/gen/store/ReplicaCopy.js';
import type { SegmentFence__Output } from '../../proto/gen/store/SegmentFence.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { ReplicaType } from '../../proto/gen/store/ReplicaType.js';
import type { UnmountSegmentRequest__Output } from '../../proto/gen/store/UnmountSegmentRequest.js';
import type { UnmountSegmentResponse__Output } from '../../proto/gen/store/UnmountSegmentResponse.js';
import type { UpsertEndRequest__Output } from '../../proto/gen/store/UpsertEndRequest.js';
import type { UpsertEndResponse__Output } from '../../proto/gen/store/UpsertEndResponse.js';
import type { UpsertRevokeRequest__Output } from '../../proto/gen/store/UpsertRevokeRequest.js';
import type { UpsertRevokeResponse__Output } from '../../proto/gen/store/UpsertRevokeResponse.js';
import type { UpsertStartRequest__Output } from '../../proto/gen/store/UpsertStartRequest.js';
import type { UpsertStartResponse__Output } from '../../proto/gen/store/UpsertStartResponse.js';
import type { AllocationStrategy } from './allocation-strategy.js';
import type { MasterCoreConfig, MasterStats, SegmentDetail, SweepReport } from './master-core-config.js';
import { validateMasterCoreConfig } from './master-core-config.js';
import { ClientRegistry } from './client-registry.js';
import { CxlStrategy } from './cxl-strategy.js';
import { EvictionOrder, SWEEP_EVICTION_BATCH } from './eviction.js';
import type { EvictionResult } from './eviction-round.js';
import { EvictionRound } from './eviction-round.js';
import { FreeRatioFirstStrategy } from './free-ratio-first-strategy.js';
import { InFlightList } from './in-flight-list.js';
import { LeaseTracker } from './lease-tracker.js';
import { FLAG_CXL, FLAG_HARD_PIN, FLAG_LISTED, FLAG_REUSED, FLAG_SOFT_PIN, FLAG_UPSERT, HANDLE_FIELDS, handlesOn, ObjectMeta, writeGeneration } from './object-meta.js';
import { ObjectTable } from './object-table.js';
import { RandomStrategy } from './random-strategy.js';
import { dropReplicasOn, freeHandles, quarantineHandles } from './replica-placement.js';
import { ReReplicator } from './re-replication.js';
import { ReplicaPlacer } from './replica-placer.js';
import { BatchKeySet } from './batch-key-set.js';
import { compileKeyRegex } from './key-regex.js';
import { ReadPath } from './read-path.js';
import { answered, queryByRegexSteps, removeSteps, runSteps, type Steps, type WalkHost } from './table-walk.js';
import { PlacedReplicas, replicaList } from './replica-capture.js';
import type { Rng } from './rng.js';
import { isUuid, randomUuid, SeededRng } from './rng.js';
import type { Segment } from './segment-registry.js';
import { SegmentRegistry } from './segment-registry.js';
import { lookedUpKeyCode, replicaNumOf, validateWrite, writeError } from './write-validation.js';
import { MAX_SEGMENT_NAME_BYTES, segmentNameProblem } from '../../common/key-rules.js';
import type { ChangeSink } from './change-sink.js';
import { objectRecordOf, planImport, segmentRecordOf, type CoreState, type ObjectRecord, type SegmentRecord } from './state-records.js';
import { objectRecordSteps, segmentRecords } from './state-export.js';
import { servedView } from './served-view.js';

export type { Rng } from './rng.js';
export type { ChangeSink } from './change-sink.js';
export type { CoreState, ObjectRecord, SegmentRecord } from './state-records.js';
export { SeededRng } from './rng.js';
export { PUT_EVICTION_CAP, SWEEP_EVICTION_BATCH } from './eviction.js';
export type { EvictionResult } from './eviction-round.js';
export type { MasterCoreConfig, MasterStats, SegmentDetail, SweepReport } from './master-core-config.js';
export { defaultMasterCoreConfig, EMPTY_STATS, validateMasterCoreConfig } from './master-core-config.js';

function makeStrategy(name: MasterCoreConfig['allocationStrategy']): AllocationStrategy {
  if (name === 'free_ratio_first') return new FreeRatioFirstStrategy();
  if (name === 'cxl') return new CxlStrategy();
  return new RandomStrategy();
}

/** The previous placement of an object whose upsert moved it to new space (freed at UpsertEnd). */
class PreviousPlacement {
  constructor(
    readonly h: number[],
    readonly slices: number,
    readonly flags: number,
  ) {}
}

type KeyCall = { key: string; replica_type: number };

const NO_PREFERENCE: readonly string[] = Object.freeze([]);
/** The handles of a record about to be given its placement (ReplicaPlacer.into). */
const NO_HANDLES: number[] = Object.freeze([]) as unknown as number[];

/** Keys of a batch end looked up one by one before the rest are looked up together (see lookUpEnds). */
const END_CHAIN_LOOKUPS = 4;

/** Longest strings a MountSegment may carry (characters; the segment name in UTF-8 bytes, see common/key-rules.ts). */
export const MOUNT_LIMITS = { segment_name: MAX_SEGMENT_NAME_BYTES, client_id: 256, te_endpoint: 512, protocol: 32 } as const;

/** At most this many spare ObjectMetas are kept for reuse (see MasterCore.spareMetas). */
const SPARE_METAS = 4096;

/** Fences of a ping reply with nothing to fence (shared: replies are read-only). */
const NO_FENCES = Object.freeze([]) as unknown as SegmentFence__Output[];
const NO_COPIES = Object.freeze([]) as unknown as ReplicaCopy__Output[];

function pinFlags(softPin: boolean, hardPin: boolean): number {
  return (softPin ? FLAG_SOFT_PIN : 0) | (hardPin ? FLAG_HARD_PIN : 0);
}

/** Checks of a PutEnd/PutRevoke-style call whose key was looked up (`meta`): the key, and the replica type. */
function checkKey(key: unknown, replicaType: number, meta: ObjectMeta | undefined): number {
  const code = lookedUpKeyCode(key, meta);
  if (code !== ErrorCode.OK) return code;
  // Only memory replicas exist: there is no file tier to end or revoke a write in.
  if (replicaType !== ReplicaType.MEMORY) return ErrorCode.INVALID_PARAMS;
  return ErrorCode.OK;
}

/** Host part of `host:port` (IPv6 in brackets allowed); anything else as it is. */
const hostOf = (endpoint: string): string => splitHostPort(endpoint)?.host ?? endpoint;

export class MasterCore implements MasterRpcSurface {
  readonly config: Readonly<MasterCoreConfig>;
  private readonly rng: Rng;
  private readonly strategy: AllocationStrategy;
  /** Every object, by key. */
  private readonly objects: ObjectTable;
  /** Complete, not hard-pinned objects in eviction (LRU) order. */
  private readonly order = new EvictionOrder();
  /** The eviction round in progress and its debt. */
  private readonly eviction: EvictionRound;
  /** Objects whose write (PutStart/UpsertStart) has not ended, in start order (intrusive list). */
  private readonly inFlight = new InFlightList();
  private readonly previous = new Map<string, PreviousPlacement>();
  private readonly segments = new SegmentRegistry();
  private readonly clients = new ClientRegistry();
  private readonly leases = new LeaseTracker();
  private readonly reads: ReadPath;
  private softPinnedCount = 0;
  private hardPinnedCount = 0;
  private readonly placer: ReplicaPlacer;
  /**
   * Metadata of deleted objects, for the next inserts to reuse: an object that lives as long as
   * the data it describes is copied twice by V8's young-generation collector on its way to the old
   * generation, and that copying was the largest single cost of a put in steady state (puts as
   * fast as evictions). Only objects never leased come here: the lease tracker keeps expiry
   * entries that point at their object (lease-tracker.ts), and nothing else keeps a deleted
   * object's metadata (replies capture values; the walks of table-walk.ts, which span calls,
   * look an object up again once others have deleted any).
   */
  private readonly spareMetas: ObjectMeta[] = [];
  /** Objects deleted so far: a batch's looked-up objects are stale once this moves. */
  private removals = 0;
  /** The table as the whole-table walks see it (table-walk.ts). */
  private readonly walkHost: WalkHost;
  /** Keys of the batch in progress that were absent when looked up (a key listed twice is looked up again). */
  private readonly batchSeen: BatchKeySet;
  /** The preferred list of a write naming one segment (reused: strategies only read it during the call). */
  private readonly onePreferred: string[] = [''];
  /** The cxl strategy's default preference: the allocatable segments of protocol cxl, for `cxlOf`. */
  private cxlSegments: readonly string[] = NO_PREFERENCE;
  private cxlOf: readonly unknown[] | null = null;
  /** Objects that lost replicas with a segment, and the copies that give them back (re-replication.ts). */
  private readonly rereplicator: ReReplicator;
  /** Where committed changes are reported (change-sink.ts); undefined: nobody listens, nothing is built. */
  private sink: ChangeSink | undefined;

  /**
   * `keyHashSeed` varies the key hashes (object table, batch key set); a process serving untrusted clients passes a
   * random one, so nobody can pick keys that all collide (the default keeps tests reproducible).
   */
  /**
   * `heap.full`: the process's heap is near its limit (master/heap-guard.ts), so no new placement
   * is made: PutStart and UpsertStart get NO_AVAILABLE_HANDLE instead of the master running out of
   * memory and losing every object. Reads, ends, removals and in-place upserts go on.
   */
  constructor(
    config: MasterCoreConfig,
    rng: Rng = new SeededRng(0x5eed),
    keyHashSeed?: number,
    private readonly heap: { readonly full: boolean } = { full: false },
  ) {
    validateMasterCoreConfig(config);
    this.config = { ...config };
    this.objects = new ObjectTable(keyHashSeed);
    this.batchSeen = new BatchKeySet(keyHashSeed);
    this.eviction = new EvictionRound(
      {
        inFlight: this.inFlight,
        order: this.order,
        objectCount: () => this.objects.size,
        release: (meta) => this.abortWrite(meta.key, meta),
        evict: (meta) => this.deleteObject(meta.key, meta),
      },
      this.config,
    );
    this.rng = rng;
    this.strategy = makeStrategy(config.allocationStrategy);
    this.placer = new ReplicaPlacer(this.strategy, this.segments, this.rng);
    // Copy ids scoped by the view version (ms since the epoch of this master's start, or 0 in tests).
    this.rereplicator = new ReReplicator(this.objects, this.segments, this.placer, this.config.viewVersion * 1024 + 1, (meta) => this.emitObject(meta));
    this.reads = new ReadPath(this.objects, this.segments, this.leases, this.order, this.config.defaultKvLeaseTtlMs);
    const core = this;
    this.walkHost = {
      objects: this.objects,
      segments: this.segments,
      get removals() {
        return core.removals;
      },
      deleteObject: (key, meta) => this.deleteObject(key, meta),
    };
  }

  // --- Liveness and segments ---

  ping(req: PingRequest__Output, now: number): PingResponse__Output {
    const view_version = this.config.viewVersion;
    if (typeof req.client_id !== 'string' || req.client_id.length === 0) {
      return { status_code: ErrorCode.INVALID_PARAMS, view_version, need_remount: false, fences: [], copies: [] };
    }
    if (!this.clients.has(req.client_id) || this.ownsRestored(req.client_id)) return { status_code: ErrorCode.OK, view_version, need_remount: true, fences: [], copies: [] };
    this.clients.touch(req.client_id, now);
    for (const ack of req.fence_acks ?? []) {
      const seg = this.segments.byName(ack.segment_name);
      if (seg === undefined || seg.clientId !== req.client_id) continue;
      for (const block of seg.fence.ack(Number(ack.version))) seg.allocator.freeBlock(block);
    }
    const fences = this.fencesOf(req.client_id, now);
    const copies = req.can_copy === true && !this.heap.full ? this.rereplicator.assign(req.client_id, now, now + 1) : NO_COPIES;
    return { status_code: ErrorCode.OK, view_version, need_remount: false, fences, copies };
  }

  /**
   * A copier reports a copy it was given in a Ping (re-replication.ts). Not ok: the segments it
   * names as unreachable get no new placement for a while, like a writer's (PutRevoke).
   */
  replicaCopied(req: ReplicaCopiedRequest__Output, now: number): ReplicaCopiedResponse__Output {
    if (typeof req.client_id !== 'string' || req.client_id.length === 0) return { status_code: ErrorCode.INVALID_PARAMS };
    if (!req.ok) this.suspect(req.failed_segments, now);
    return { status_code: this.rereplicator.done(req.client_id, Number(req.copy_id), req.ok === true) };
  }

  /** Whether the client owns a RESTORED segment (it must mount it again: docs/ha.md). */
  private ownsRestored(clientId: string): boolean {
    if (this.segments.restored === 0) return false;
    for (const seg of this.segments.all()) if (seg.status === 'RESTORED' && seg.clientId === clientId) return true;
    return false;
  }

  /** The write fences the owner of these segments has to install (write-fence.ts). */
  private fencesOf(clientId: string, now: number): SegmentFence__Output[] {
    let out: SegmentFence__Output[] | undefined;
    for (const seg of this.segments.all()) {
      if (seg.clientId !== clientId || !seg.fence.pending) continue;
      const f = seg.fence.fence(this.oldestOpenGeneration(seg.id, now));
      (out ??= []).push({ segment_name: seg.name, version: f.version, below: f.below, revoked: f.revoked });
    }
    return out ?? NO_FENCES;
  }

  /** The generation of the oldest unfinished write with space on the segment, else the next one to be handed out. */
  private oldestOpenGeneration(segmentId: number, now: number): number {
    let oldest = now + 1;
    for (let m = this.inFlight.head; m !== null; m = m.next) {
      if (m.hasHandleOn(segmentId)) {
        oldest = writeGeneration(m);
        break;
      }
    }
    const copy = this.rereplicator.oldestGeneration(segmentId);
    return copy !== undefined && copy < oldest ? copy : oldest;
  }

  mountSegment(req: MountSegmentRequest__Output, now: number): MountSegmentResponse__Output {
    const fail = (status_code: number): MountSegmentResponse__Output => ({ status_code, segment_id: '' });
    const { segment_name: name, client_id: clientId, buffer, size } = req;
    // the key alphabet (common/key-rules.ts): a newline would split /get_all_segments' lines
    if (segmentNameProblem(name) !== undefined) return fail(ErrorCode.INVALID_PARAMS);
    if (typeof clientId !== 'string' || clientId.length === 0 || clientId.length > MOUNT_LIMITS.client_id) return fail(ErrorCode.INVALID_PARAMS);
    // Every replica in every reply repeats the segment's name and endpoint: bounded, so a reply is too.
    if ((req.te_endpoint ?? '').length > MOUNT_LIMITS.te_endpoint || (req.protocol ?? '').length > MOUNT_LIMITS.protocol) return fail(ErrorCode.INVALID_PARAMS);
    // repeated in replies: a string that is not Unicode text (bytes that were not UTF-8) cannot be encoded again
    if (!clientId.isWellFormed() || !(req.te_endpoint ?? '').isWellFormed() || !(req.protocol ?? '').isWellFormed()) return fail(ErrorCode.INVALID_PARAMS);
    if (!Number.isSafeInteger(size) || size <= 0) return fail(ErrorCode.INVALID_PARAMS);
    if (!Number.isSafeInteger(buffer) || buffer < 0 || !Number.isSafeInteger(buffer + size)) return fail(ErrorCode.INVALID_PARAMS);
    if (req.segment_id && !isUuid(req.segment_id)) return fail(ErrorCode.INVALID_PARAMS);
    const incarnation = Number(req.incarnation ?? 0);
    if (!Number.isSafeInteger(incarnation) || incarnation < 0) return fail(ErrorCode.INVALID_PARAMS);
    const te = req.te_endpoint || name; // without a transfer-engine endpoint the segment name is the endpoint (P2P handshake naming)
    const protocol = req.protocol || 'tcp';
    const restored = this.segments.byName(name);
    if (restored !== undefined && restored.status === 'RESTORED') {
      // Its owner is back (docs/ha.md): the same memory under a new registration serves its objects again.
      if (restored.clientId === clientId && restored.baseAddress === buffer && restored.size === size && (!req.segment_id || req.segment_id.toLowerCase() === restored.segmentId)) {
        const seg = this.segments.revive(restored, te, protocol, incarnation);
        this.clients.touch(clientId, now);
        this.sink?.mounted(segmentRecordOf(seg));
        return { status_code: ErrorCode.OK, segment_id: seg.segmentId };
      }
      this.finishUnmount(restored); // another client or other memory under the name: the old objects go first
    }
    if (this.segments.byName(name) !== undefined) return fail(ErrorCode.SEGMENT_ALREADY_EXISTS);
    if (req.segment_id && this.segments.hasSegmentId(req.segment_id.toLowerCase())) return fail(ErrorCode.SEGMENT_ALREADY_EXISTS);
    let segmentId = req.segment_id ? req.segment_id.toLowerCase() : randomUuid(this.rng);
    while (this.segments.hasSegmentId(segmentId)) segmentId = randomUuid(this.rng);
    const seg = this.segments.add(name, segmentId, clientId, buffer, size, te, protocol, incarnation);
    this.clients.touch(clientId, now);
    this.sink?.mounted(segmentRecordOf(seg));
    return { status_code: ErrorCode.OK, segment_id: segmentId };
  }

  unmountSegment(req: UnmountSegmentRequest__Output, now: number): UnmountSegmentResponse__Output {
    if (typeof req.segment_name !== 'string' || req.segment_name.length === 0) return { status_code: ErrorCode.INVALID_PARAMS };
    const seg = this.segments.byName(req.segment_name);
    if (seg === undefined) return { status_code: segmentNameProblem(req.segment_name) === undefined ? ErrorCode.SEGMENT_NOT_FOUND : ErrorCode.INVALID_PARAMS };
    // Only the owner unmounts (an empty client id included: it used to skip this check). Without
    // authentication this is an ownership check, not a credential: client ids are listed by
    // /get_segments_detail (docs/threat-model.md).
    if (req.client_id !== seg.clientId) return { status_code: ErrorCode.INVALID_PARAMS };
    const grace = req.grace_period_seconds;
    if (!Number.isFinite(grace) || grace < 0) return { status_code: ErrorCode.INVALID_PARAMS };
    if (grace === 0 || seg.status === 'RESTORED') {
      // a RESTORED segment's objects are not served: no grace period to give readers
      this.finishUnmount(seg);
    } else {
      const at = now + grace * 1000;
      this.segments.beginUnmount(seg, seg.status === 'UNMOUNTING' ? Math.min(seg.unmountAt, at) : at);
    }
    if (this.clients.has(seg.clientId)) this.clients.touch(seg.clientId, now);
    return { status_code: ErrorCode.OK };
  }

  // --- Reads ---

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

  /** getReplicaListByRegex in bounded steps (table-walk.ts); RESULT_TOO_LARGE past the reply limit. */
  getReplicaListByRegexSteps(req: GetReplicaListByRegexRequest__Output, _now: number): Steps<GetReplicaListByRegexResponse__Output> {
    const re = compileKeyRegex(req.key_regex);
    if (re === null) return answered({ status_code: ErrorCode.INVALID_PARAMS, object_map: {} });
    return queryByRegexSteps(this.walkHost, re);
  }

  // --- Writes ---

  putStart(req: PutStartRequest__Output, now: number): PutStartResponse__Output {
    const code = writeError(req);
    if (code !== ErrorCode.OK) return { status_code: code, replica_list: [] };
    return this.putStartOf(req, this.objects.get(req.key), now);
  }

  /**
   * PutStart per request, in order, with the same outcome as one putStart after another. The
   * keys are looked up together first (ObjectTable.getMany: their cache misses overlap); a
   * looked-up object stays valid until an object is deleted (eviction, a preempted zombie), after
   * which keys are looked up one by one again, and a key listed twice is looked up again.
   */
  batchPutStart(req: BatchPutStartRequest__Output, now: number): BatchPutStartResponse__Output {
    const requests = req.requests;
    if (!Array.isArray(requests)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const n = requests.length;
    const results = new Array<PutStartResponse__Output>(n);
    const keys = new Array<unknown>(n);
    for (let i = 0; i < n; i++) keys[i] = requests[i].key;
    const found = this.objects.getMany(keys);
    const removals = this.removals;
    const seen = this.batchSeen;
    try {
      for (let i = 0; i < n; i++) {
        const r = requests[i];
        const code = writeError(r);
        if (code !== ErrorCode.OK) {
          results[i] = { status_code: code, replica_list: [] };
          continue;
        }
        const key = r.key;
        let existing = this.removals === removals ? found[i] : this.objects.get(key);
        // Absent when looked up, but an earlier request of this batch may have put it.
        if (existing === undefined && n > 1 && !seen.add(key)) existing = this.objects.get(key);
        results[i] = this.putStartOf(r, existing, now);
      }
    } finally {
      seen.clear();
    }
    return { status_code: ErrorCode.OK, results };
  }

  /** PutStart of a valid request; `existing` is objects.get(req.key). */
  private putStartOf(req: PutStartRequest__Output, existing: ObjectMeta | undefined, now: number): PutStartResponse__Output {
    const key = req.key;
    const cfg = req.config;
    const sliceLengths = req.slice_lengths;
    const replicaNum = replicaNumOf(cfg);
    const preferred = cfg?.preferred_segment ?? '';
    let code: number | undefined;
    if (existing !== undefined) {
      if (existing.complete || !this.preemptible(existing, now)) return { status_code: ErrorCode.OBJECT_ALREADY_EXISTS, replica_list: [] };
      // The zombie writer may still write into its buffers: place first so the new space is not
      // the old space (spec: "the old space is not reused"), unless nothing else is left.
      code = this.place(sliceLengths, replicaNum, preferred, now);
      if (this.objects.get(key) === existing && !existing.complete) this.abortWrite(key, existing); // eviction may have released it
      if (this.objects.has(key)) {
        if (code === ErrorCode.OK) this.placer.free();
        return { status_code: ErrorCode.OBJECT_ALREADY_EXISTS, replica_list: [] };
      }
      if (code === ErrorCode.NO_AVAILABLE_HANDLE) code = undefined;
    }
    code ??= this.place(sliceLengths, replicaNum, preferred, now);
    if (code !== ErrorCode.OK) return { status_code: code, replica_list: [] };
    const flags = ReplicaStatus.INITIALIZED | pinFlags(cfg?.with_soft_pin === true, cfg?.with_hard_pin === true) | (this.placer.cxl ? FLAG_CXL : 0);
    const meta = this.insertWrite(key, sliceLengths.length, flags, now);
    return new PlacedReplicas(this.segments, meta);
  }

  putEnd(req: PutEndRequest__Output, now: number): PutEndResponse__Output {
    return { status_code: this.endWrite(req, now, req.slice_checksums) };
  }

  batchPutEnd(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.batchEndWrite(req, now);
  }

  putRevoke(req: PutRevokeRequest__Output, now: number): PutRevokeResponse__Output {
    this.suspect(req.failed_segments, now);
    return { status_code: this.revokeWrite(req) };
  }

  batchPutRevoke(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    this.suspect(req.failed_segments, now);
    return this.batchKeys(req, (call) => this.revokeWrite(call));
  }

  /**
   * Insert or update. Absent key: as PutStart. Complete, unleased object with the same slice
   * lengths: its placement is reused in place (replicas PROCESSING until UpsertEnd, `reused`).
   * Different layout: new space; the old placement is freed at UpsertEnd, restored by UpsertRevoke.
   * While the upsert is in flight the object is not readable.
   */
  upsertStart(req: UpsertStartRequest__Output, now: number): UpsertStartResponse__Output {
    const fail = (status_code: number): UpsertStartResponse__Output => ({ status_code, replica_list: [], reused: false });
    const v = validateWrite(req);
    if (!v.ok) return fail(v.code);
    const key = req.key;
    let meta = this.objects.get(key);
    if (meta !== undefined && !meta.complete) {
      if (!this.preemptible(meta, now)) return fail(ErrorCode.OBJECT_ALREADY_EXISTS);
      this.abortWrite(key, meta);
      meta = this.objects.get(key);
    }
    if (meta === undefined) {
      const code = this.place(v.sliceLengths, v.replicaNum, v.preferredSegment, now);
      if (code !== ErrorCode.OK) return fail(code);
      const flags = ReplicaStatus.INITIALIZED | FLAG_UPSERT | pinFlags(v.softPin, v.hardPin) | (this.placer.cxl ? FLAG_CXL : 0);
      const created = this.insertWrite(key, v.sliceLengths.length, flags, now);
      return { status_code: ErrorCode.OK, replica_list: this.view(created), reused: false };
    }
    if (meta.leased(now)) return fail(ErrorCode.OBJECT_HAS_LEASE);
    this.rereplicator.forget(key); // new bytes: a copy of the old ones must not join it
    const softPin = v.softPin ? FLAG_SOFT_PIN : 0;
    const old = meta.sliceLengths();
    // A replica on a RESTORED segment cannot be written in place: its owner has not registered it again.
    const sameLayout =
      old.length === v.sliceLengths.length && old.every((len, j) => len === v.sliceLengths[j]) && (this.segments.restored === 0 || servedView(this.segments, meta) === meta);
    if (sameLayout) {
      this.sink?.removed(key); // its bytes are about to be overwritten: no longer state until UpsertEnd
      this.order.remove(meta); // in flight: not a candidate until UpsertEnd
      this.setFlags(meta, meta.flags | FLAG_UPSERT | FLAG_REUSED | softPin);
      meta.status = ReplicaStatus.PROCESSING;
      meta.lastAccess = now;
      this.inFlight.add(meta);
      return { status_code: ErrorCode.OK, replica_list: this.view(meta), reused: true };
    }
    // Keep the object out of eviction while space is found for its new layout.
    const before = new PreviousPlacement(meta.h, meta.slices, meta.flags);
    meta.status = ReplicaStatus.PROCESSING;
    const code = this.place(v.sliceLengths, v.replicaNum, v.preferredSegment, now);
    if (code !== ErrorCode.OK) {
      meta.flags = before.flags; // only the status was changed; still listed, LRU place kept
      return fail(code);
    }
    this.order.remove(meta);
    this.sink?.removed(key); // not readable while the upsert runs; a revoke reports it again (abortWrite)
    this.previous.set(key, before);
    this.placer.into(meta);
    meta.slices = v.sliceLengths.length;
    this.setFlags(meta, (before.flags & (FLAG_HARD_PIN | FLAG_SOFT_PIN)) | softPin | FLAG_UPSERT | (this.placer.cxl ? FLAG_CXL : 0));
    meta.status = ReplicaStatus.INITIALIZED;
    meta.lastAccess = now;
    this.inFlight.add(meta);
    return { status_code: ErrorCode.OK, replica_list: this.view(meta), reused: false };
  }

  batchUpsertStart(req: BatchUpsertStartRequest__Output, now: number): BatchUpsertStartResponse__Output {
    if (!Array.isArray(req.requests)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    return { status_code: ErrorCode.OK, results: req.requests.map((r) => this.upsertStart(r, now)) };
  }

  upsertEnd(req: UpsertEndRequest__Output, now: number): UpsertEndResponse__Output {
    return { status_code: this.endWrite(req, now, req.slice_checksums) };
  }

  batchUpsertEnd(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.batchEndWrite(req, now);
  }

  upsertRevoke(req: UpsertRevokeRequest__Output, now: number): UpsertRevokeResponse__Output {
    this.suspect(req.failed_segments, now);
    return { status_code: this.revokeWrite(req) };
  }

  batchUpsertRevoke(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    this.suspect(req.failed_segments, now);
    return this.batchKeys(req, (call) => this.revokeWrite(call));
  }

  /**
   * Segments a writer could not reach get no new placement for suspectSegmentMs (or until their
   * owner mounts again), so the writer's retry and other puts go elsewhere instead of failing
   * until client_ttl drops the segment. Placement still uses them when nothing else has room.
   */
  private suspect(names: readonly string[] | undefined, now: number): void {
    if (names === undefined || names.length === 0 || this.config.suspectSegmentMs === 0) return;
    for (const name of names.slice(0, 64)) {
      const seg = typeof name === 'string' ? this.segments.byName(name) : undefined;
      if (seg !== undefined) this.segments.suspect(seg, now + this.config.suspectSegmentMs);
    }
  }

  // --- Removal ---

  remove(req: RemoveRequest__Output, now: number): RemoveResponse__Output {
    const meta = typeof req.key === 'string' ? this.objects.get(req.key) : undefined;
    const code = lookedUpKeyCode(req.key, meta);
    if (code !== ErrorCode.OK) return { status_code: code };
    if (meta === undefined) return { status_code: ErrorCode.OBJECT_NOT_FOUND };
    if (!meta.complete) return { status_code: ErrorCode.REPLICA_IS_NOT_READY };
    if (meta.hardPinned && req.force !== true) return { status_code: ErrorCode.OBJECT_HARD_PINNED };
    if (meta.leased(now)) return { status_code: ErrorCode.OBJECT_HAS_LEASE };
    this.deleteObject(req.key, meta);
    return { status_code: ErrorCode.OK };
  }

  /** Removes complete, unleased, not hard-pinned objects whose key matches. */
  removeByRegex(req: RemoveByRegexRequest__Output, now: number): RemoveByRegexResponse__Output {
    return runSteps(this.removeByRegexSteps(req, now), now);
  }

  /** removeByRegex in bounded steps (table-walk.ts). */
  removeByRegexSteps(req: RemoveByRegexRequest__Output, now: number): Steps<RemoveByRegexResponse__Output> {
    const re = compileKeyRegex(req.key_regex);
    if (re === null) return answered({ status_code: ErrorCode.INVALID_PARAMS, removed_count: 0 });
    return removeSteps(this.walkHost, (key, meta) => !meta.hardPinned && re.test(key), now);
  }

  /** Removes every complete object without an active lease, hard-pinned ones included. */
  removeAll(req: RemoveAllRequest__Output, now: number): RemoveAllResponse__Output {
    return runSteps(this.removeAllSteps(req, now), now);
  }

  /** removeAll in bounded steps (table-walk.ts). */
  removeAllSteps(_req: RemoveAllRequest__Output, now: number): Steps<RemoveAllResponse__Output> {
    return removeSteps(this.walkHost, () => true, now);
  }

  // --- Cluster queries ---

  batchQueryIp(req: BatchQueryIpRequest__Output, _now: number): BatchQueryIpResponse__Output {
    if (!Array.isArray(req.client_ids)) return { status_code: ErrorCode.INVALID_PARAMS, client_ip_map: {} };
    const wanted = new Set(req.client_ids);
    const hosts = new Map<string, Set<string>>();
    for (const seg of this.segments.all()) {
      if (!wanted.has(seg.clientId)) continue;
      let set = hosts.get(seg.clientId);
      if (set === undefined) hosts.set(seg.clientId, (set = new Set()));
      set.add(hostOf(seg.teEndpoint));
    }
    const client_ip_map: { [key: string]: IPAddressList__Output } = Object.create(null) as { [key: string]: IPAddressList__Output };
    for (const [client, set] of hosts) client_ip_map[client] = { ip_addresses: [...set] };
    return { status_code: ErrorCode.OK, client_ip_map };
  }

  /**
   * Clears replicas of the listed objects owned by client_id (an object is owned by a client when
   * it has a replica on one of that client's segments). Empty segment_name: whole objects are
   * deleted. Given: only replicas on that segment (which must be the client's). Objects leased,
   * still being written, hard-pinned, or not the client's are skipped silently.
   */
  batchReplicaClear(req: BatchReplicaClearRequest__Output, now: number): BatchReplicaClearResponse__Output {
    if (typeof req.client_id !== 'string' || req.client_id.length === 0 || !Array.isArray(req.object_keys)) {
      return { status_code: ErrorCode.INVALID_PARAMS, cleared_keys: [] };
    }
    const cleared: string[] = [];
    let target: Segment | undefined;
    if (req.segment_name) {
      target = this.segments.byName(req.segment_name);
      if (target === undefined || target.clientId !== req.client_id) return { status_code: ErrorCode.OK, cleared_keys: [] };
    }
    for (const key of req.object_keys) {
      const meta = this.objects.get(key);
      if (meta === undefined || !meta.complete || meta.leased(now) || meta.hardPinned) continue;
      if (target === undefined) {
        if (!this.ownedBy(meta, req.client_id)) continue;
        this.deleteObject(key, meta);
      } else {
        if (!meta.hasHandleOn(target.id)) continue;
        this.dropReplicas(key, meta, target.id);
      }
      cleared.push(key);
    }
    return { status_code: ErrorCode.OK, cleared_keys: cleared };
  }

  // --- Housekeeping ---

  /**
   * Housekeeping, bounded per call: drops silent clients (unmounting their segments), finishes
   * unmounts whose grace period ended, and evicts at most SWEEP_EVICTION_BATCH objects: the debt of
   * an eviction round already begun, or a new round when usage reached the high watermark.
   */
  sweep(now: number): SweepReport {
    const report: SweepReport = { droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: 0 };
    for (const client of this.clients.silent(now, this.config.clientTtlMs)) {
      for (const seg of [...this.segments.all()]) {
        if (seg.clientId !== client) continue;
        this.finishUnmount(seg);
        report.unmountedSegments.push(seg.name);
      }
      this.clients.delete(client);
      report.droppedClients.push(client);
    }
    for (const seg of [...this.segments.all()]) {
      // UNMOUNTING: its grace period ended. RESTORED: its owner did not mount it again within client_ttl.
      if ((seg.status === 'UNMOUNTING' || seg.status === 'RESTORED') && seg.unmountAt <= now) {
        this.finishUnmount(seg);
        report.unmountedSegments.push(seg.name);
      }
    }
    this.segments.clearSuspects(now);
    this.rereplicator.expire(now);
    this.leases.active(now); // lets expired lease entries go
    if (this.eviction.debt > 0 || this.usageRatio() >= this.config.evictionHighWatermarkRatio) {
      const e = this.evict(now, SWEEP_EVICTION_BATCH);
      report.evictedObjects = e.evicted;
      report.releasedZombies = e.released;
    }
    report.underReplicated = this.rereplicator.stats().underReplicated;
    return report;
  }

  /**
   * One bounded eviction step. Without a round in progress, starts one whose target is
   * evictionRatio of the objects. Then releases zombie writes (begun more than
   * putStartReleaseTimeout ago) and evicts candidates in spec order, at most `budget` objects in
   * all; zombies count toward the target. What is left of the target stays `pending`; a round
   * ends early when no candidate is left.
   */
  evict(now: number, budget: number = SWEEP_EVICTION_BATCH): EvictionResult {
    return this.eviction.step(now, budget);
  }

  // --- Read-only views (no lease granted) ---

  /**
   * Totals, O(segments). softPinned counts objects written with a soft pin (each pin lapses after
   * the soft-pin TTL without access and returns with the next access; eviction honours that).
   */
  stats(now: number): MasterStats {
    let capacityBytes = 0;
    let usedBytes = 0;
    for (const seg of this.segments.all()) {
      capacityBytes += seg.allocator.capacity;
      usedBytes += seg.allocator.used;
    }
    return {
      segments: this.segments.size,
      capacityBytes,
      usedBytes,
      objects: this.objects.size,
      activeLeases: this.leases.active(now),
      softPinned: this.softPinnedCount,
      hardPinned: this.hardPinnedCount,
      evictionsTotal: this.eviction.evictionsTotal,
      clients: this.clients.size,
      ...this.rereplicator.stats(),
    };
  }

  segmentsDetail(): SegmentDetail[] {
    return [...this.segments.all()].map((s) => ({
      segment_name: s.name,
      segment_id: s.segmentId,
      client_id: s.clientId,
      base_address: s.baseAddress,
      size_bytes: s.size,
      te_endpoint: s.teEndpoint,
      protocol: s.protocol,
      status: s.status,
      allocator_used_bytes: s.allocator.used,
      allocator_capacity_bytes: s.allocator.capacity,
    }));
  }

  /** Keys of complete (readable) objects. */
  *allKeys(): IterableIterator<string> {
    for (const [key, meta] of this.objects) if (meta.complete) yield key;
  }

  /** COMPLETE replicas of an object; [] while it is being written; undefined when absent. */
  queryKey(key: string): ReplicaInfo__Output[] | undefined {
    const meta = this.objects.get(key);
    if (meta === undefined) return undefined;
    if (!meta.complete) return [];
    const view = servedView(this.segments, meta);
    return view === null ? [] : replicaList(this.segments, view);
  }

  /** Keys on the eviction lists, least recently used first (diagnostics and scripts; O(objects)). */
  evictionOrder(): { plain: string[]; softPinned: string[] } {
    return { plain: [...this.order.plain].map((m) => m.key), softPinned: [...this.order.soft].map((m) => m.key) };
  }

  segmentNames(): string[] {
    return [...this.segments.all()].map((s) => s.name);
  }

  querySegment(name: string): { used: number; capacity: number } | undefined {
    const seg = this.segments.byName(name);
    return seg === undefined ? undefined : { used: seg.allocator.used, capacity: seg.allocator.capacity };
  }

  // --- State (docs/ha.md): changes out, a whole state in and out ---

  /** Reports every committed change from now on to `sink` (undefined: to nobody). */
  setChangeSink(sink: ChangeSink | undefined): void {
    this.sink = sink;
  }

  /**
   * Takes a state made by another master (a snapshot, a standby's copy) into this empty core. Its
   * segments are RESTORED: their objects are neither served nor placed on until each owner
   * mounts it again (same name, client, base and size; its new incarnation replaces the old), and
   * a segment not mounted again within client_ttl is dropped like a silent client's. Records
   * that do not fit (state-records.ts) are left out and listed in `dropped`. Reports nothing to
   * the change sink. Throws when the core is not empty.
   */
  importState(state: CoreState, now: number): { segments: number; objects: number; dropped: string[] } {
    if (this.objects.size !== 0 || this.segments.size !== 0) throw new Error('importState: the core is not empty');
    const plan = planImport(state);
    const ids = plan.segments.map(
      ({ rec, allocator }) =>
        this.segments.addRestored(
          rec.name,
          rec.segment_id.toLowerCase(),
          rec.client_id,
          rec.base,
          rec.size,
          rec.te_endpoint || rec.name,
          rec.protocol || 'tcp',
          rec.incarnation,
          allocator,
          now + this.config.clientTtlMs,
        ).id,
    );
    for (const o of plan.objects) {
      for (let i = 0; i < o.h.length; i += HANDLE_FIELDS) o.h[i] = ids[o.h[i]]!;
      const meta = ObjectMeta.create(o.h, o.slices, o.flags | ReplicaStatus.COMPLETE, 0, now - o.ageMs, o.key);
      meta.checksums = o.checksums;
      this.objects.set(o.key, meta);
      this.countPins(o.flags, 1);
      this.order.add(meta); // oldest access first: the lists stay in LRU order
    }
    return { segments: plan.segments.length, objects: plan.objects.length, dropped: plan.dropped };
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

  /** Reports an object's whole record to the sink. */
  private emitObject(meta: ObjectMeta): void {
    this.sink?.object(objectRecordOf(this.segments, meta), meta.lastAccess);
  }

  // --- Internals ---

  /** The replicas of an upsert just started, as its writer needs them (with the write's generation). */
  private view(meta: ObjectMeta): ReplicaInfo__Output[] {
    return replicaList(this.segments, meta, writeGeneration(meta));
  }

  /** An unfinished write may be taken over once the discard timeout has passed. */
  private preemptible(meta: ObjectMeta, now: number): boolean {
    return now - meta.lastAccess > this.config.putStartDiscardTimeoutMs;
  }

  private usageRatio(): number {
    let cap = 0;
    let used = 0;
    for (const seg of this.segments.allocatable()) {
      cap += seg.allocator.capacity;
      used += seg.allocator.used;
    }
    return cap === 0 ? 0 : used / cap;
  }

  private preferredFor(preferredSegment: string): readonly string[] {
    if (preferredSegment) {
      this.onePreferred[0] = preferredSegment;
      return this.onePreferred;
    }
    if (this.config.allocationStrategy === 'cxl') {
      // Without an explicit preference, the cxl strategy uses the segments mounted with protocol cxl.
      const open = this.segments.allocatable(); // a new array whenever the open segments change
      if (this.cxlOf !== open) {
        this.cxlSegments = open.filter((s) => s.protocol === 'cxl').map((s) => s.name);
        this.cxlOf = open;
      }
      return this.cxlSegments;
    }
    return NO_PREFERENCE;
  }

  /**
   * Places an object: ErrorCode.OK with its handles in this.placer (h, cxl), or the failure.
   * When nothing fits, the eviction round makes room for it (bounded, see eviction-round.ts) and
   * placement is retried; but not for an object that would not fit even in empty segments, for
   * which evicting would only lose objects.
   */
  private place(sliceLengths: readonly number[], replicaNum: number, preferredSegment: string, now: number): number {
    if (this.heap.full) return ErrorCode.NO_AVAILABLE_HANDLE;
    const preferred = this.preferredFor(preferredSegment);
    const placer = this.placer;
    let code = placer.place(sliceLengths, replicaNum, preferred);
    if (code === ErrorCode.NO_AVAILABLE_HANDLE && this.segments.suspects > 0) {
      // Only suspect segments had room: better than no placement (the writer may reach them).
      this.segments.includeSuspects = placer.allowSuspect = true;
      try {
        code = placer.place(sliceLengths, replicaNum, preferred);
      } finally {
        this.segments.includeSuspects = placer.allowSuspect = false;
      }
    }
    if (code !== ErrorCode.NO_AVAILABLE_HANDLE) return code;
    let bytes = 0;
    for (let j = 0; j < sliceLengths.length; j++) bytes += sliceLengths[j];
    if (!this.fitsWhenEmpty(sliceLengths, bytes)) return code;
    this.eviction.makeRoom(now, bytes * replicaNum, () => {
      code = placer.place(sliceLengths, replicaNum, preferred);
      return code === ErrorCode.OK;
    });
    return code;
  }

  /**
   * Whether one replica of the slices could be placed if the allocatable segments were empty:
   * every slice within the largest segment, and all of them within the segments together.
   */
  private fitsWhenEmpty(sliceLengths: readonly number[], bytes: number): boolean {
    let largest = 0;
    let total = 0;
    for (const seg of this.segments.allocatable()) {
      largest = Math.max(largest, seg.allocator.capacity);
      total += seg.allocator.capacity;
    }
    if (bytes > total) return false;
    for (let j = 0; j < sliceLengths.length; j++) if (sliceLengths[j] > largest) return false;
    return true;
  }

  /**
   * Creates the object of a write just placed (its placement is this.placer's). A spare
   * ObjectMeta is reused when there is one.
   */
  private insertWrite(key: string, slices: number, flags: number, now: number): ObjectMeta {
    let meta = this.spareMetas.pop();
    if (meta === undefined) {
      meta = ObjectMeta.create(NO_HANDLES, slices, flags, 0, now, key);
      this.placer.into(meta);
    } else {
      this.placer.into(meta);
      meta.slices = slices;
      meta.flags = flags;
      meta.leaseUntil = 0;
      meta.lastAccess = now;
      meta.key = key;
      meta.prev = null;
      meta.next = null;
      meta.checksums = null;
    }
    this.countPins(flags, 1);
    this.objects.set(key, meta);
    this.inFlight.add(meta);
    return meta;
  }

  /** One KeyResult per key, in request order. */
  private batchKeys(req: BatchKeysRequest__Output, one: (call: KeyCall) => number): BatchKeysResponse__Output {
    if (!Array.isArray(req.keys)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const replica_type = req.replica_type;
    return { status_code: ErrorCode.OK, results: req.keys.map((key) => ({ key, status_code: one({ key, replica_type }) })) };
  }

  /**
   * BatchPutEnd / BatchUpsertEnd: endWrite per key, with the objects of the whole batch looked up
   * first in one ObjectTable.getMany (their cache misses overlap; a lookup per key measured as the
   * largest cost of the put path). Ending a write never removes an object, so the looked-up
   * objects stay valid through the batch (a key listed twice finds its object complete the second time).
   */
  private batchEndWrite(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    const keys = req.keys;
    if (!Array.isArray(keys)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const found = this.lookUpEnds(keys);
    const replicaType = req.replica_type;
    const results = new Array<{ key: string; status_code: number }>(keys.length);
    const sums = req.checksums;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      results[i] = { key, status_code: this.endWriteOf(key, replicaType, found[i], now, sums?.[i]?.crc32c) };
    }
    return { status_code: ErrorCode.OK, results };
  }

  /**
   * objects.get(key) for every key of a batch end, found mostly without hashing. A batch usually
   * ends the writes one BatchPutStart began, in the same order, and those follow each other on the
   * in-flight list (appended in start order). So the object after key i's on its list is tried
   * first for key i+1: every object reachable through the list links is in the table, and keys
   * are unique there, so an equal key means the same object. Looked up before any write ends (ends
   * change the links). A batch in another order falls back to looking its keys up together.
   */
  private lookUpEnds(keys: readonly unknown[]): (ObjectMeta | undefined)[] {
    const n = keys.length;
    const found = new Array<ObjectMeta | undefined>(n);
    let next: ObjectMeta | null = null;
    let lookups = 0;
    for (let i = 0; i < n; i++) {
      const key = keys[i];
      let meta: ObjectMeta | undefined;
      if (next !== null && next.key === key) meta = next;
      else if (typeof key !== 'string') meta = undefined;
      else if (++lookups > END_CHAIN_LOOKUPS) return this.objects.getMany(keys, found);
      else meta = this.objects.get(key);
      found[i] = meta;
      next = meta === undefined ? null : meta.next;
    }
    return found;
  }

  /** PutEnd / UpsertEnd: the write is done, replicas COMPLETE. Ending a complete object is a no-op. */
  private endWrite(call: KeyCall, now: number, checksums?: readonly number[]): number {
    return this.endWriteOf(call.key, call.replica_type, typeof call.key === 'string' ? this.objects.get(call.key) : undefined, now, checksums);
  }

  /** endWrite of the object already looked up for `key` (`meta`: objects.get(key)). */
  private endWriteOf(key: string, replicaType: number, meta: ObjectMeta | undefined, now: number, checksums?: readonly number[]): number {
    const code = checkKey(key, replicaType, meta);
    if (code !== ErrorCode.OK) return code;
    if (meta === undefined) return ErrorCode.OBJECT_NOT_FOUND;
    if (meta.complete) return ErrorCode.OK;
    if (checksums !== undefined && checksums.length !== 0) {
      if (checksums.length !== meta.slices || !checksums.every((c) => Number.isInteger(c) && c >= 0 && c <= 0xffffffff)) return ErrorCode.INVALID_PARAMS;
      meta.checksums = checksums;
    } else {
      meta.checksums = null;
    }
    if (this.previous.size !== 0) {
      const prev = this.previous.get(key);
      if (prev !== undefined) {
        this.previous.delete(key);
        freeHandles(this.segments, prev.h);
      }
    }
    meta.flags &= ~(FLAG_UPSERT | FLAG_REUSED);
    meta.status = ReplicaStatus.COMPLETE;
    meta.lastAccess = now;
    this.inFlight.delete(meta);
    this.order.add(meta);
    if (this.sink !== undefined) this.emitObject(meta);
    return ErrorCode.OK;
  }

  /** PutRevoke / UpsertRevoke: the write is cancelled and its space returned. */
  private revokeWrite(call: KeyCall): number {
    const meta = typeof call.key === 'string' ? this.objects.get(call.key) : undefined;
    const code = checkKey(call.key, call.replica_type, meta);
    if (code !== ErrorCode.OK) return code;
    if (meta === undefined) return ErrorCode.OBJECT_NOT_FOUND;
    if (meta.complete) return ErrorCode.INVALID_PARAMS; // nothing in flight; Remove deletes objects
    this.abortWrite(call.key, meta);
    return ErrorCode.OK;
  }

  /**
   * Cancels an unfinished write: its space is freed. An upsert that moved the object gets its
   * previous placement back (still complete); any other write leaves no object behind (an
   * in-place upsert has overwritten the old bytes, so they cannot be trusted).
   */
  private abortWrite(key: string, meta: ObjectMeta): void {
    quarantineHandles(this.segments, meta.h, writeGeneration(meta)); // its writer may still be sending
    this.inFlight.delete(meta);
    const prev = this.previous.get(key);
    if (prev !== undefined) {
      this.previous.delete(key);
      meta.h = prev.h;
      meta.slices = prev.slices;
      this.setFlags(meta, prev.flags);
      this.order.add(meta); // complete again; its old LRU place is not kept
      if (this.sink !== undefined) this.emitObject(meta);
      return;
    }
    this.forgetObject(key, meta);
  }

  /** Deletes a complete object (removal, eviction, a replica clear) and frees its space. */
  private deleteObject(key: string, meta: ObjectMeta): void {
    this.sink?.removed(key);
    freeHandles(this.segments, meta.h);
    this.forgetObject(key, meta);
  }

  /** Drops an object from the map and from the lease and pin counts (its space is already freed). */
  private forgetObject(key: string, meta: ObjectMeta): void {
    this.rereplicator.forget(key);
    this.objects.delete(key);
    this.removals++;
    this.order.remove(meta);
    this.inFlight.delete(meta); // no-op unless a write on it was unfinished (both use meta.prev/next)
    const leased = meta.leaseUntil !== 0;
    this.leases.forget(meta);
    this.countPins(meta.flags, -1);
    if (!leased && this.spareMetas.length < SPARE_METAS) this.spareMetas.push(meta);
  }

  private countPins(flags: number, sign: 1 | -1): void {
    if (flags & FLAG_SOFT_PIN) this.softPinnedCount += sign;
    if (flags & FLAG_HARD_PIN) this.hardPinnedCount += sign;
  }

  /** Replaces an object's flags, keeping its eviction-list membership bit (lists own that bit). */
  private setFlags(meta: ObjectMeta, flags: number): void {
    this.countPins(meta.flags, -1);
    meta.flags = (flags & ~FLAG_LISTED) | (meta.flags & FLAG_LISTED);
    this.countPins(flags, 1);
  }

  /** Removes the replicas of a complete object that touch segmentId; no replica left, no object. */
  private dropReplicas(key: string, meta: ObjectMeta, segmentId: number): number {
    const had = meta.replicaCount;
    const kept = dropReplicasOn(this.segments, meta.h, meta.slices, segmentId);
    if (kept.length === 0) {
      this.sink?.removed(key);
      this.forgetObject(key, meta);
      return 0;
    }
    this.rereplicator.invalidate(key); // a copy may be reading a replica just dropped
    meta.h = kept;
    if (this.sink !== undefined) this.emitObject(meta);
    return had;
  }

  private ownedBy(meta: ObjectMeta, clientId: string): boolean {
    for (let k = 0; k < meta.handleCount; k++) if (this.segments.byId(meta.segAt(k))?.clientId === clientId) return true;
    return false;
  }

  /**
   * Unmounts now: writes in flight with space on the segment are revoked, every replica on it is
   * removed, objects left without a replica are deleted. One pass over all objects (an unmount is
   * rare; keeping a per-segment index instead cost every put a set insertion and stalls of 100+ ms
   * while those sets grew).
   */
  private finishUnmount(seg: Segment): void {
    const id = seg.id;
    const touched: ObjectMeta[] = [];
    for (const [, meta] of this.objects) if (meta.hasHandleOn(id)) touched.push(meta);
    for (const [key, prev] of this.previous) {
      const meta = this.objects.get(key);
      if (meta !== undefined && !meta.hasHandleOn(id) && handlesOn(prev.h, id)) touched.push(meta);
    }
    for (const meta of touched) {
      const key = meta.key;
      if (this.objects.get(key) !== meta) continue;
      if (!meta.complete && meta.hasHandleOn(id)) this.abortWrite(key, meta); // may restore the previous placement
      const prev = this.previous.get(key);
      if (prev !== undefined && handlesOn(prev.h, id)) {
        const kept = dropReplicasOn(this.segments, prev.h, prev.slices, id);
        if (kept.length === 0) this.previous.delete(key);
        else this.previous.set(key, new PreviousPlacement(kept, prev.slices, prev.flags));
      }
      if (meta.complete && meta.hasHandleOn(id)) {
        const had = this.dropReplicas(key, meta, id);
        if (had > 0) this.rereplicator.lost(key, had); // copied back elsewhere (re-replication.ts)
      }
    }
    this.segments.delete(seg);
    this.sink?.unmounted(seg.name);
  }

  /**
   * Cross-checks the derived structures against the object map (for tests and debugging; O(all
   * objects)). Returns one line per inconsistency; [] when the eviction lists
   * and the pin counts agree with the objects.
   */
  checkIndexes(): string[] {
    const problems: string[] = [];
    let listed = 0;
    let soft = 0;
    let hard = 0;
    for (const [key, meta] of this.objects) {
      if (meta.key !== key) problems.push(`${key}: meta.key is ${meta.key}`);
      const shouldList = meta.complete && !meta.hardPinned;
      if (meta.listed !== shouldList) problems.push(`${key}: listed=${meta.listed}, expected ${shouldList}`);
      if (meta.listed) listed++;
      if (meta.flags & FLAG_SOFT_PIN) soft++;
      if (meta.flags & FLAG_HARD_PIN) hard++;
      if (this.inFlight.has(meta) === meta.complete) problems.push(`${key}: in-flight set disagrees with status`);
    }
    if (this.order.size !== listed) problems.push(`eviction lists hold ${this.order.size} objects, expected ${listed}`);
    for (const list of [this.order.plain, this.order.soft]) {
      for (const meta of list) if (this.order.listOf(meta) !== list || this.objects.get(meta.key) !== meta) problems.push(`${meta.key}: on the wrong eviction list`);
    }
    if (soft !== this.softPinnedCount || hard !== this.hardPinnedCount) problems.push(`pin counts ${this.softPinnedCount}/${this.hardPinnedCount}, expected ${soft}/${hard}`);
    return problems;
  }
}
