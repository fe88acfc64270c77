// The core's change sink in the shell (docs/ha.md): encodes each change once as a ChangeRecord
// and hands the bytes, in order, to every consumer (the change log, the standbys' streams). Each
// change gets the next sequence number; `lastRemoval` is the last change that freed space
// (an object removed or dropped, a segment unmounted), which must be durable everywhere before
// the space is handed out again (commit-barrier.ts). Consumers buffer what they get and write it
// out in flush(), which the barrier calls after every RPC and which is also scheduled once per
// turn of the event loop (changes made by the sweeper).
import { stateCodec, encodeWith } from '../../common/state-proto.js';
import type { ChangeSink } from '../core/change-sink.js';
import type { ObjectRecord, SegmentRecord } from '../core/state-records.js';

const changeCodec = stateCodec('ChangeRecord');

export interface ChangeConsumer {
  /** One encoded ChangeRecord, the `seq`-th change. */
  change(bytes: Buffer, seq: number): void;
  /** Writes out what was handed over (called once per RPC and per turn). */
  flush(): void;
  /** False while it wants no changes (a leader without standbys): absent means always. */
  active?(): boolean;
}

export class ChangeFanout implements ChangeSink {
  private seq_ = 0;
  private lastRemoval_ = 0;
  private readonly consumers = new Set<ChangeConsumer>();
  private scheduled = false;

  constructor(private readonly clock: () => number) {}

  /** Changes made so far. */
  get seq(): number {
    return this.seq_;
  }

  /** The last change that freed space (0: none yet). */
  get lastRemoval(): number {
    return this.lastRemoval_;
  }

  add(c: ChangeConsumer): void {
    this.consumers.add(c);
  }

  delete(c: ChangeConsumer): void {
    this.consumers.delete(c);
  }

  object(rec: ObjectRecord, lastAccess: number): void {
    rec.age_ms = Math.max(0, this.clock() - lastAccess);
    this.emit({ object: rec }, false);
  }

  removed(key: string): void {
    this.emit({ removed: key }, true);
  }

  mounted(rec: SegmentRecord): void {
    this.emit({ mounted: rec }, false);
  }

  unmounted(name: string): void {
    this.emit({ unmounted: name }, true);
  }

  /** Every consumer writes out what it holds. */
  flush(): void {
    this.scheduled = false;
    for (const c of this.consumers) c.flush();
  }

  private emit(change: object, frees: boolean): void {
    const seq = ++this.seq_;
    if (frees) this.lastRemoval_ = seq;
    let bytes: Buffer | undefined;
    for (const c of this.consumers) {
      if (c.active !== undefined && !c.active()) continue;
      bytes ??= encodeWith(changeCodec, change); // encoded once, and only when someone wants it
      c.change(bytes, seq);
    }
    if (bytes === undefined) return;
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
  }
}
