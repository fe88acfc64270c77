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
import type { FileEntry, FileIndex } from './file-index.js';
import { fileReplica } from './file-replica.js';
import type { ObjectMeta } from './object-meta.js';
import type { ObjectTable } from './object-table.js';
import { replicaList } from './replica-capture.js';
import type { Segment, SegmentRegistry } from './segment-registry.js';
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
 * Largest GetReplicaListByRegex answer: the reply frame limit (64 MiB, common/channel-frame.ts).
 * Past it the walk stops with RESULT_TOO_LARGE instead of building a reply no transport may send.
 * The walk adds up an upper bound of each entry's encoding as it goes: the UTF-8 bytes of the key,
 * the segment names and endpoints, and the file names, plus the most the fixed fields can take
 * (each tag, length and varint at its widest), so a reply it lets through always fits.
 */
export const MAX_QUERY_REPLY_BYTES = 64 * 1024 * 1024;
/** The reply's status_code (a negative int32 is a 10-byte varint). */
const REPLY_OVERHEAD = 11;
/** A map entry besides its key's bytes: entry tag and length, key tag and length, value tag and length. */
const ENTRY_OVERHEAD = 1 + 5 + 1 + 2 + 1 + 5;
/** A ReplicaInfo besides its handles and file: its tag and length, status, replica_type. */
const REPLICA_OVERHEAD = 1 + 3 + 2 + 2;
/**
 * A BufHandle besides its two strings: its tag and length, the strings' tags and lengths, size,
 * buffer and incarnation (10-byte varints at most), status, memory_type (read replies carry no
 * generation).
 */
const HANDLE_OVERHEAD = 1 + 2 + 3 + 3 + 11 + 11 + 11 + 2 + 2;
/** A file replica's FileReplica besides its path: its tag and length, the path's tag and length, size. */
const FILE_OVERHEAD = 1 + 2 + 3 + 11;

/** UTF-8 bytes of a segment's name and endpoint (repeated by every handle on it), computed once per registration. */
const segmentBytes = new WeakMap<Segment, number>();
function stringBytesOf(seg: Segment): number {
  let n = segmentBytes.get(seg);
  if (n === undefined) {
    n = Buffer.byteLength(seg.name) + Buffer.byteLength(seg.teEndpoint);
    segmentBytes.set(seg, n);
  }
  return n;
}

/** What a walk needs of the core. */
export interface WalkHost {
  readonly objects: ObjectTable;
  readonly segments: SegmentRegistry;
  /** The file tier's index: listed objects show their file too, and objects held only there are listed. */
  readonly files: FileIndex;
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

/**
 * The replica lists of complete objects whose key `re` matches (a query: no lease): memory and
 * SSD (DISK) replicas, and the object's file in the file tier as one more DISK replica; then the
 * objects held only by the file tier, in steps of STEP_OBJECTS keys. RESULT_TOO_LARGE when the
 * reply would pass `limit` bytes (tests pass a smaller one).
 */
export function* queryByRegexSteps(host: WalkHost, re: RegExp, limit = MAX_QUERY_REPLY_BYTES): Steps<GetReplicaListByRegexResponse__Output> {
  const walk = new Walk(host);
  const object_map: { [key: string]: ObjectReplicaList__Output } = Object.create(null) as { [key: string]: ObjectReplicaList__Output };
  const files = host.files;
  const segments = host.segments;
  let bytes = REPLY_OVERHEAD;
  /** Adds `key`'s list (the replicas of `view`, and `file`) to the reply; false when it would pass `limit`. */
  const add = (key: string, view: ObjectMeta | null, file: FileEntry | undefined): boolean => {
    bytes += ENTRY_OVERHEAD + Buffer.byteLength(key);
    if (view !== null) {
      bytes += REPLICA_OVERHEAD * view.replicaCount;
      for (let k = 0, n = view.handleCount; k < n; k++) bytes += HANDLE_OVERHEAD + stringBytesOf(segments.byId(view.segAt(k))!);
    }
    if (file !== undefined) bytes += REPLICA_OVERHEAD + FILE_OVERHEAD + file.name.length; // (an escaped name is ASCII)
    if (bytes > limit) return false;
    const replica_list = view === null ? [] : replicaList(segments, view); // a new array each call
    if (file !== undefined) replica_list.push(fileReplica(file));
    object_map[key] = { replica_list };
    return true;
  };
  for (const [key, meta] of host.objects) {
    if (walk.spent(key)) {
      yield;
      walk.resumed();
    }
    if (!walk.live(key, meta) || !meta.complete || !re.test(key)) continue;
    const view = servedView(segments, meta); // replicas on RESTORED segments are not handed out
    if (view === null) continue;
    if (!add(key, view, files.size === 0 ? undefined : files.get(key))) return { status_code: ErrorCode.RESULT_TOO_LARGE, object_map: {} };
  }
  if (files.size === 0) return { status_code: ErrorCode.OK, object_map };
  let visited = 0;
  let chars = 0;
  for (const [key, file] of files.all()) {
    chars += key.length;
    if (++visited >= STEP_OBJECTS || chars >= STEP_KEY_CHARS) {
      yield;
      visited = chars = 0;
    }
    if (host.objects.get(key) !== undefined || !re.test(key)) continue; // listed above with its memory replicas
    if (!add(key, null, file)) return { status_code: ErrorCode.RESULT_TOO_LARGE, object_map: {} };
  }
  return { status_code: ErrorCode.OK, object_map };
}

/** A reply known before any step (a refused request). */
// eslint-disable-next-line require-yield
export function* answered<R>(reply: R): Steps<R> {
  return reply;
}
