// The core's state as records (proto/master_state.proto) and back: a segment's and an object's
// record, and the plan of an import, which checks a state before any of it is used (a snapshot
// file or a standby's copy is input like any other). Pure: no I/O, no clock but the `now` given.
//
// An import keeps only what is consistent: a handle must lie inside its segment, 8-byte aligned;
// a replica with a handle on a segment the state lacks is dropped; an object whose ranges overlap
// another's is dropped with it (neither can be trusted to hold its own bytes); an object left with
// no replica is dropped. Each segment's allocator is then built from its objects' ranges in one
// pass (OffsetAllocator.fromUsed), so it holds exactly those ranges.
import type { ObjectRecord__Output } from '../../proto/gen/store/ObjectRecord.js';
import type { SegmentRecord__Output } from '../../proto/gen/store/SegmentRecord.js';
import { keyProblem, segmentNameProblem } from '../../common/key-rules.js';
import { FLAG_CXL, FLAG_HARD_PIN, FLAG_SOFT_PIN, HANDLE_FIELDS, type ObjectMeta } from './object-meta.js';
import { alignUp, OffsetAllocator } from '../../common/offset-allocator.js';
import type { Segment, SegmentRegistry } from './segment-registry.js';
import { isUuid } from './rng.js';

export type { ObjectRecord__Output as ObjectRecord } from '../../proto/gen/store/ObjectRecord.js';
export type { SegmentRecord__Output as SegmentRecord } from '../../proto/gen/store/SegmentRecord.js';

/** A whole state: what a snapshot holds and what a standby imports when it is elected. */
export interface CoreState {
  segments: readonly SegmentRecord__Output[];
  objects: readonly ObjectRecord__Output[];
}

export function segmentRecordOf(seg: Segment): SegmentRecord__Output {
  return {
    name: seg.name,
    segment_id: seg.segmentId,
    client_id: seg.clientId,
    base: seg.baseAddress,
    size: seg.size,
    te_endpoint: seg.teEndpoint,
    protocol: seg.protocol,
    incarnation: seg.incarnation,
  };
}

/** The record of a complete object; `age_ms` is the caller's (0 here). */
export function objectRecordOf(segments: SegmentRegistry, meta: ObjectMeta): ObjectRecord__Output {
  const n = meta.handleCount;
  const handles = new Array<{ segment: string; offset: number; size: number }>(n);
  for (let k = 0; k < n; k++) {
    const seg = segments.byId(meta.segAt(k))!;
    handles[k] = { segment: seg.name, offset: seg.allocator.addressOf(meta.blockAt(k)) - seg.baseAddress, size: meta.sizeAt(k) };
  }
  return {
    key: meta.key,
    slices: meta.slices,
    soft_pin: (meta.flags & FLAG_SOFT_PIN) !== 0,
    hard_pin: (meta.flags & FLAG_HARD_PIN) !== 0,
    cxl: (meta.flags & FLAG_CXL) !== 0,
    handles,
    checksums: meta.checksums,
    age_ms: 0,
  };
}

/** A segment of an import: its record and its allocator holding its objects' ranges. */
export interface PlannedSegment {
  rec: SegmentRecord__Output;
  allocator: OffsetAllocator;
}

/** An object of an import, its handles as (segment index in `segments`, block, size). */
export interface PlannedObject {
  key: string;
  slices: number;
  /** FLAG_* bits of its pins and memory type (the status is the importer's). */
  flags: number;
  /** HANDLE_FIELDS per handle: segment index, allocator block, size. */
  h: number[];
  checksums: readonly number[];
  ageMs: number;
}

export interface ImportPlan {
  segments: PlannedSegment[];
  /** Oldest access first: the order in which they join the eviction lists. */
  objects: PlannedObject[];
  /** One line per record left out, saying why. */
  dropped: string[];
}

function segmentProblem(s: SegmentRecord__Output): string | undefined {
  const name = segmentNameProblem(s.name);
  if (name !== undefined) return name;
  if (!isUuid(s.segment_id)) return `segment id ${JSON.stringify(s.segment_id)} is not a UUID`;
  if (typeof s.client_id !== 'string' || s.client_id.length === 0) return 'no client id';
  if (!Number.isSafeInteger(s.base) || s.base < 0 || !Number.isSafeInteger(s.size) || s.size <= 0 || !Number.isSafeInteger(s.base + s.size))
    return `bad range base=${s.base} size=${s.size}`;
  if (!Number.isSafeInteger(s.incarnation) || s.incarnation < 0) return `bad incarnation ${s.incarnation}`;
  return undefined;
}

/** Checks a state and lays it out for MasterCore.importState (see the file's opening comment). */
export function planImport(state: CoreState): ImportPlan {
  const dropped: string[] = [];
  const segIndex = new Map<string, number>();
  const recs: SegmentRecord__Output[] = [];
  for (const s of state.segments) {
    const problem = segmentProblem(s);
    if (problem !== undefined) dropped.push(`segment ${JSON.stringify(s.name)}: ${problem}`);
    else if (segIndex.has(s.name) || recs.some((r) => r.segment_id === s.segment_id)) dropped.push(`segment ${s.name}: listed twice`);
    else {
      segIndex.set(s.name, recs.length);
      recs.push(s);
    }
  }
  const capacity = recs.map((r) => Math.floor(r.size / 8) * 8);

  // Objects by key (a later record of the same key replaces an earlier one), their replicas checked.
  const byKey = new Map<string, PlannedObject>();
  for (const o of state.objects) {
    const problem = keyProblem(o.key);
    if (problem !== undefined) {
      dropped.push(`object ${JSON.stringify(o.key)}: ${problem}`);
      continue;
    }
    const slices = o.slices;
    const n = o.handles.length;
    if (!Number.isInteger(slices) || slices <= 0 || n === 0 || n % slices !== 0) {
      dropped.push(`object ${o.key}: ${n} handles do not make whole replicas of ${slices} slices`);
      continue;
    }
    if (o.checksums.length !== 0 && o.checksums.length !== slices) {
      dropped.push(`object ${o.key}: ${o.checksums.length} checksums for ${slices} slices`);
      continue;
    }
    const h: number[] = [];
    for (let r = 0; r < n; r += slices) {
      const replica: number[] = [];
      for (let j = r; j < r + slices; j++) {
        const hd = o.handles[j];
        const si = segIndex.get(hd.segment);
        const ok =
          si !== undefined &&
          Number.isSafeInteger(hd.offset) &&
          hd.offset >= 0 &&
          hd.offset % 8 === 0 &&
          Number.isSafeInteger(hd.size) &&
          hd.size > 0 &&
          hd.offset + alignUp(hd.size) <= capacity[si];
        if (!ok) break;
        replica.push(si, hd.offset, hd.size); // the offset stands in the block's place until the allocators exist
      }
      if (replica.length === slices * HANDLE_FIELDS) h.push(...replica);
    }
    if (h.length === 0) {
      dropped.push(`object ${o.key}: no replica on a known segment within its range`);
      continue;
    }
    if (h.length !== n * HANDLE_FIELDS)
      dropped.push(`object ${o.key}: ${(n * HANDLE_FIELDS - h.length) / (slices * HANDLE_FIELDS)} replica(s) on unknown segments or out of range`);
    const flags = (o.soft_pin ? FLAG_SOFT_PIN : 0) | (o.hard_pin ? FLAG_HARD_PIN : 0) | (o.cxl ? FLAG_CXL : 0);
    byKey.set(o.key, { key: o.key, slices, flags, h, checksums: o.checksums, ageMs: Number.isSafeInteger(o.age_ms) && o.age_ms > 0 ? o.age_ms : 0 });
  }

  // Per segment: every range with its owner, sorted; owners of overlapping ranges are dropped.
  const ranges: { offset: number; end: number; obj: PlannedObject; at: number }[][] = recs.map(() => []);
  for (const obj of byKey.values()) {
    for (let i = 0; i < obj.h.length; i += HANDLE_FIELDS) ranges[obj.h[i]].push({ offset: obj.h[i + 1], end: obj.h[i + 1] + alignUp(obj.h[i + 2]), obj, at: i });
  }
  const bad = new Set<PlannedObject>();
  for (const list of ranges) {
    list.sort((a, b) => a.offset - b.offset);
    let reach = -1;
    let reacher: PlannedObject | undefined;
    for (const r of list) {
      if (r.offset < reach) {
        bad.add(r.obj);
        bad.add(reacher!);
      }
      if (r.end > reach) {
        reach = r.end;
        reacher = r.obj;
      }
    }
  }
  for (const obj of bad) {
    byKey.delete(obj.key);
    dropped.push(`object ${obj.key}: its space overlaps another object's`);
  }

  const segments: PlannedSegment[] = recs.map((rec, si) => {
    const list = ranges[si].filter((r) => !bad.has(r.obj));
    const used: number[] = [];
    for (const r of list) used.push(r.offset, r.end - r.offset);
    const { allocator, blocks } = OffsetAllocator.fromUsed(rec.name, rec.base, rec.size, used);
    list.forEach((r, i) => (r.obj.h[r.at + 1] = blocks[i]!));
    return { rec, allocator };
  });
  const objects = [...byKey.values()].sort((a, b) => b.ageMs - a.ageMs);
  return { segments, objects, dropped };
}
