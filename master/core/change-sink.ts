// Where MasterCore reports the changes of its committed state (docs/ha.md): the shell encodes
// them for the change log and the standbys. Called synchronously inside the core call that made
// the change, in the order the changes were made; a core without a sink does no work for it.
// Records are built for the call and never touched by the core again.
import type { ObjectRecord, SegmentRecord } from './state-records.js';

export interface ChangeSink {
  /**
   * An object was committed (PutEnd, UpsertEnd), given back its previous placement (an upsert
   * revoked), or its replicas changed (one added by re-replication, some dropped with a
   * segment). `rec.age_ms` is 0: `lastAccess` is the object's last access in the core's clock.
   */
  object(rec: ObjectRecord, lastAccess: number): void;
  /** The object is no longer state: removed, evicted, left with no replica, or an upsert of it began. */
  removed(key: string): void;
  /** A segment was mounted, or a RESTORED one mounted again by its owner with a new incarnation. */
  mounted(rec: SegmentRecord): void;
  /** A segment was unmounted (its objects' changes were reported before). */
  unmounted(name: string): void;
}
