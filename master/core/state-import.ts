// A state made by another master (a snapshot, a standby's copy) taken into an empty core
// (docs/ha.md). Its segments come in RESTORED: their objects are neither served nor placed on
// until each owner mounts it again. The way out, the state as records, is state-export.ts.
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import type { CoreShared } from './core-shared.js';
import { FLAG_DISK_ONLY, HANDLE_FIELDS, ObjectMeta } from './object-meta.js';
import { planImport, type CoreState } from './state-records.js';

/** What an import took in, and the records it left out (one line each, why). */
export interface ImportReport {
  segments: number;
  objects: number;
  dropped: string[];
}

/**
 * Takes `state` into the empty core `s`. A segment not mounted again within client_ttl is
 * dropped like a silent client's. Records that do not fit (state-records.ts) are left out and
 * listed in `dropped`. Reports nothing to the change sink. Throws when the core is not empty.
 */
export function importState(s: CoreShared, state: CoreState, now: number): ImportReport {
  if (s.objects.size !== 0 || s.segments.size !== 0) throw new Error('importState: the core is not empty');
  const plan = planImport(state);
  const ids = plan.segments.map(
    ({ rec, allocator }) =>
      s.segments.addRestored(
        rec.name,
        rec.segment_id.toLowerCase(),
        rec.client_id,
        rec.base,
        rec.size,
        rec.te_endpoint || rec.name,
        rec.protocol || 'tcp',
        rec.incarnation,
        allocator,
        now + s.config.clientTtlMs,
      ).id,
  );
  for (const o of plan.objects) {
    for (let i = 0; i < o.h.length; i += HANDLE_FIELDS) o.h[i] = ids[o.h[i]]!;
    const meta = ObjectMeta.create(o.h, o.slices, o.flags | ReplicaStatus.COMPLETE, 0, now - o.ageMs, o.key);
    meta.checksums = o.checksums;
    meta.version = s.nextVersion(); // this master's own: another master's versions are not kept
    if (s.disk.onDiskOnly(meta)) meta.flags |= FLAG_DISK_ONLY; // on the disk eviction list (disk-tier.ts)
    s.objects.set(o.key, meta);
    s.countPins(o.flags, 1);
    s.order.add(meta); // oldest access first: the lists stay in LRU order
  }
  return { segments: plan.segments.length, objects: plan.objects.length, dropped: plan.dropped };
}
