// What of an object may be handed out while some segments are RESTORED (imported from another
// master's state, their owner not back yet: docs/ha.md): only its replicas with no handle on such
// a segment. A reader given a replica there would read memory whose registration the owner is
// about to replace, and a writer would write where the owner may not have the object any more.
import { HANDLE_FIELDS, ObjectMeta } from './object-meta.js';
import type { SegmentRegistry } from './segment-registry.js';

/**
 * `meta` itself when every replica may be served (always when no segment is RESTORED: one
 * comparison), a copy holding only the servable replicas, or null when none is.
 */
export function servedView(segments: SegmentRegistry, meta: ObjectMeta): ObjectMeta | null {
  if (segments.restored === 0) return meta;
  const slices = meta.slices;
  const n = meta.handleCount;
  let kept: number[] | undefined;
  for (let r = 0; r < n; r += slices) {
    let ok = true;
    for (let k = r; k < r + slices && ok; k++) ok = segments.byId(meta.segAt(k))?.status !== 'RESTORED';
    if (ok) {
      kept ??= [];
      for (let k = r; k < r + slices; k++) kept.push(meta.segAt(k), meta.blockAt(k), meta.sizeAt(k));
    }
  }
  if (kept === undefined) return null;
  if (kept.length === n * HANDLE_FIELDS) return meta;
  const view = ObjectMeta.create(kept, slices, meta.flags, 0, meta.lastAccess, meta.key);
  view.checksums = meta.checksums;
  view.version = meta.version;
  return view;
}
