// A master's state held as records (docs/ha.md): what a standby keeps while it follows the leader,
// and what a restart rebuilds from a snapshot and the change log before importing it into a core.
// Changes are whole records applied in order (a later record of a key replaces the earlier one),
// so the image after the records of a walk and the changes made during it is the state at the
// walk's end. Ages become times of this process's clock on arrival and ages again on export.
// Pure: no I/O; `now` is given.
import type { ChangeRecord__Output } from '../../proto/gen/store/ChangeRecord.js';
import type { CoreState, ObjectRecord, SegmentRecord } from '../core/state-records.js';

interface HeldObject {
  rec: ObjectRecord;
  /** Last access in this process's monotonic clock (ms). */
  lastAccess: number;
}

export class StateImage {
  private readonly segs = new Map<string, SegmentRecord>();
  private readonly objs = new Map<string, HeldObject>();

  get segmentCount(): number {
    return this.segs.size;
  }

  get objectCount(): number {
    return this.objs.size;
  }

  /** Forgets everything (a new leader's stream begins). */
  reset(): void {
    this.segs.clear();
    this.objs.clear();
  }

  /** Applies one change received at `now`. */
  apply(c: ChangeRecord__Output, now: number): void {
    if (c.object !== null && c.object !== undefined) {
      this.objs.set(c.object.key, { rec: c.object, lastAccess: now - c.object.age_ms });
    } else if (c.removed) {
      this.objs.delete(c.removed);
    } else if (c.mounted !== null && c.mounted !== undefined) {
      this.segs.set(c.mounted.name, c.mounted);
    } else if (c.unmounted) {
      this.segs.delete(c.unmounted);
    }
  }

  hasObject(key: string): boolean {
    return this.objs.has(key);
  }

  /** The state at `now`, ages measured from then (records are shared, not copied: read them only). */
  toState(now: number): CoreState {
    const segments = [...this.segs.values()];
    const objects: ObjectRecord[] = [];
    for (const { rec, lastAccess } of this.objs.values()) objects.push({ ...rec, age_ms: Math.max(0, now - lastAccess) });
    return { segments, objects };
  }
}
