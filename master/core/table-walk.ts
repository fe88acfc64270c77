// The RPCs that visit every object (GetReplicaListByRegex, RemoveByRegex, RemoveAll) as
// operations in bounded steps: each is a generator whose next(now) visits at most STEP_OBJECTS
// objects or STEP_KEY_CHARS key characters (a regex runs over each key), then yields. The shell
// (rpc-dispatcher.ts) lets the event loop serve other calls between steps, so a table of millions
// of objects never holds the master for more than one step (Redis' dictRehash(d, n)); tests and
// scripts run them to the end at once (runSteps).
//
// Between two steps other calls change the table. An object present and eligible for the whole
// walk is visited exactly once; objects put or removed meanwhile may or may not be. A walk can
// hold a shard's arrays from before a rehash (object-table.ts), where an object deleted since is
// still seen: once any object was deleted by someone else during the walk, each visited object
// is looked up again before it is used.
import { ErrorCode } from '../../common/error-code.js';
import type { GetReplicaListByRegexResponse__Output } from '../../proto/gen/store/GetReplicaListByRegexResponse.js';
import type { ObjectReplicaList__Output } from '../../proto/gen/store/ObjectReplicaList.js';
import type { RemoveAllResponse__Output } from '../../proto/gen/store/RemoveAllResponse.js';
import type { RemoveByRegexResponse__Output } from '../../proto/gen/store/RemoveByRegexResponse.js';
import type { ObjectMeta } from './object-meta.js';
import type { ObjectTable } from './object-table.js';
import { replicaList } from './replica-capture.js';
import type { SegmentRegistry } from './segment-registry.js';
import { servedView } from './served-view.js';

/** The RPCs that MasterCore also serves in steps (method `<rpc>Steps`, first letter lower case). */
export const STEPPED_RPCS: readonly string[] = ['GetReplicaListByRegex', 'RemoveByRegex', 'RemoveAll'];

/** An operation in bounded steps: next(now) runs one step; the return value is the reply. */
export type Steps<R> = Generator<void, R, number>;

/** Objects visited per step. */
export const STEP_OBJECTS = 4096;
/** Key characters visited per step (keys may be 4 KiB each; a regex reads all of a key). */
export const STEP_KEY_CHARS = 1 << 20;
/**
 * Largest GetReplicaListByRegex answer, estimated from key, segment-name and endpoint lengths:
 * the reply frame limit (64 MiB, common/channel-frame.ts). Past it the walk stops with
 * RESULT_TOO_LARGE instead of building a reply no transport may send.
 */
export const MAX_QUERY_REPLY_BYTES = 64 * 1024 * 1024;
/** Estimated encoding overhead per handle besides its strings (tags, lengths, numbers). */
const HANDLE_OVERHEAD = 40;

/** What a walk needs of the core. */
export interface WalkHost {
  readonly objects: ObjectTable;
  readonly segments: SegmentRegistry;
  /** Objects deleted so far (any cause); moves whenever one is. */
  readonly removals: number;
  deleteObject(key: string, meta: ObjectMeta): void;
}

/** Runs `steps` to the end within one call (tests, scripts, small tables). */
export function runSteps<R>(steps: Steps<R>, now: number): R {
  let r = steps.next(now);
  while (!r.done) r = steps.next(now);
  return r.value;
}

/** The step budget and the staleness check of one walk. */
class Walk {
  private visited = 0;
  private chars = 0;
  private expectedRemovals: number;
  private verify = false;

  constructor(private readonly host: WalkHost) {
    this.expectedRemovals = host.removals;
  }

  /** Counts `key` into this step; true when the step is spent (the walk yields before using it). */
  spent(key: string): boolean {
    this.chars += key.length;
    return ++this.visited >= STEP_OBJECTS || this.chars >= STEP_KEY_CHARS;
  }

  /** After a yield: a new step, and a deletion by someone else turns verification on. */
  resumed(): void {
    this.visited = 0;
    this.chars = 0;
    if (this.host.removals !== this.expectedRemovals) this.verify = true;
  }

  /** meta is still the object stored under key. */
  live(key: string, meta: ObjectMeta): boolean {
    return !this.verify || this.host.objects.get(key) === meta;
  }

  /** Deletes the object (this walk's own deletion does not call for verification). */
  delete(key: string, meta: ObjectMeta): void {
    this.host.deleteObject(key, meta);
    this.expectedRemovals = this.host.removals;
  }
}

/**
 * Removes the complete objects without an active lease that `eligible` accepts; replies with
 * the count.
 */
export function* removeSteps(host: WalkHost, eligible: (key: string, meta: ObjectMeta) => boolean, now: number): Steps<RemoveAllResponse__Output & RemoveByRegexResponse__Output> {
  const walk = new Walk(host);
  let removed = 0;
  for (const [key, meta] of host.objects) {
    if (walk.spent(key)) {
      now = yield;
      walk.resumed();
    }
    if (!walk.live(key, meta) || !meta.complete || meta.leased(now) || !eligible(key, meta)) continue;
    walk.delete(key, meta);
    removed++;
  }
  return { status_code: ErrorCode.OK, removed_count: removed };
}

/** The replica lists of complete objects whose key `re` matches (a query: no lease). */
export function* queryByRegexSteps(host: WalkHost, re: RegExp): Steps<GetReplicaListByRegexResponse__Output> {
  const walk = new Walk(host);
  const object_map: { [key: string]: ObjectReplicaList__Output } = Object.create(null) as { [key: string]: ObjectReplicaList__Output };
  let bytes = 0;
  for (const [key, meta] of host.objects) {
    if (walk.spent(key)) {
      yield;
      walk.resumed();
    }
    if (!walk.live(key, meta) || !meta.complete || !re.test(key)) continue;
    const view = servedView(host.segments, meta); // replicas on RESTORED segments are not handed out
    if (view === null) continue;
    const replica_list = replicaList(host.segments, view);
    bytes += key.length + 8;
    for (const r of replica_list) for (const h of r.handles) bytes += h.segment_name.length + h.te_endpoint.length + HANDLE_OVERHEAD;
    if (bytes > MAX_QUERY_REPLY_BYTES) return { status_code: ErrorCode.RESULT_TOO_LARGE, object_map: {} };
    object_map[key] = { replica_list };
  }
  return { status_code: ErrorCode.OK, object_map };
}

/** A reply known before any step (a refused request). */
// eslint-disable-next-line require-yield
export function* answered<R>(reply: R): Steps<R> {
  return reply;
}
