// The core's state as records, walked in bounded steps (like table-walk.ts) so that a snapshot or
// a standby's initial copy never holds the master for more than one step: each next(now) visits
// at most STEP_OBJECTS objects or STEP_KEY_CHARS key characters and yields the records of the
// complete ones (unfinished writes are not state). Objects present for the whole walk are
// visited exactly once; objects changed meanwhile may be visited in their new state, which is
// why a walk is always followed by the changes made during it (their records are whole states,
// so applying them in order after the walk's records gives the state at the walk's end).
import type { ObjectMeta } from './object-meta.js';
import { objectRecordOf, segmentRecordOf, type ObjectRecord, type SegmentRecord } from './state-records.js';
import { STEP_KEY_CHARS, STEP_OBJECTS, type WalkHost } from './table-walk.js';

/** Every segment's record (few: taken at once). */
export function segmentRecords(host: WalkHost): SegmentRecord[] {
  return [...host.segments.all()].map(segmentRecordOf);
}

/** The record of a complete object with its age at `now`. */
export function objectRecordAt(host: WalkHost, meta: ObjectMeta, now: number): ObjectRecord {
  const rec = objectRecordOf(host.segments, meta);
  rec.age_ms = Math.max(0, now - meta.lastAccess);
  return rec;
}

/** The complete objects' records, one step's worth per yield (`now` of the step passed to next). */
export function* objectRecordSteps(host: WalkHost, now: number): Generator<ObjectRecord[], void, number> {
  let removals = host.removals;
  let verify = false;
  let out: ObjectRecord[] = [];
  let visited = 0;
  let chars = 0;
  for (const [key, meta] of host.objects) {
    if (++visited > STEP_OBJECTS || (chars += key.length) > STEP_KEY_CHARS) {
      now = yield out;
      out = [];
      visited = 1;
      chars = key.length;
      // the table may hold shard arrays from before a rehash: once anything was deleted, look up again
      if (host.removals !== removals) verify = true;
      removals = host.removals;
    }
    if (verify && host.objects.get(key) !== meta) continue;
    if (meta.complete) out.push(objectRecordAt(host, meta, now));
  }
  if (out.length > 0) yield out;
}
