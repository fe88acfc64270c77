// The owner's side of write fences (docs/integrity.md): the master's Ping reply names, per segment
// of this client, the fence its engine must install (refuse writes of generations below `below`
// or in `revoked`); once the engine has installed it (and no refused write is still moving bytes),
// the next Ping acknowledges its version, and only then does the master reuse the fenced space.
// Installing never blocks the heartbeat; an ack lost with a failed ping is sent again when the
// master repeats the fence.
import type { FenceAck } from '../proto/gen/store/FenceAck.js';
import type { SegmentFence__Output } from '../proto/gen/store/SegmentFence.js';

export interface FencedSegment {
  readonly address: number;
  readonly incarnation: number;
}

export interface FenceKeeperDeps {
  /** The segment of this name as it is now, if this client holds it. */
  segment(name: string): FencedSegment | undefined;
  setFence(address: number, fence: { below: number; revoked: number[] }): Promise<void>;
  log?: (message: string) => void;
}

export class FenceKeeper {
  /** Per segment: the registration and fence version installed (or being installed). */
  private readonly installed = new Map<string, { incarnation: number; version: number; done: boolean }>();
  private acks: FenceAck[] = [];

  constructor(private readonly d: FenceKeeperDeps) {}

  /** Acks to send with the next Ping (taken: sent once; a repeated fence brings them back). */
  takeAcks(): FenceAck[] {
    const a = this.acks;
    this.acks = [];
    return a;
  }

  /** Installs the fences of a Ping reply (asynchronously); acks are queued as each completes. */
  install(fences: readonly SegmentFence__Output[] | undefined): void {
    for (const f of fences ?? []) {
      const seg = this.d.segment(f.segment_name);
      if (seg === undefined) continue;
      const version = Number(f.version);
      const had = this.installed.get(f.segment_name);
      if (had !== undefined && had.incarnation === seg.incarnation && had.version >= version) {
        if (had.done && had.version === version) this.acks.push({ segment_name: f.segment_name, version: f.version }); // our ack was lost
        continue;
      }
      const entry = { incarnation: seg.incarnation, version, done: false };
      this.installed.set(f.segment_name, entry);
      this.d.setFence(seg.address, { below: Number(f.below), revoked: f.revoked.map(Number) }).then(
        () => {
          entry.done = true;
          // Acknowledge only if the segment is still the one fenced (a remount re-registers it).
          if (this.d.segment(f.segment_name)?.incarnation === entry.incarnation) this.acks.push({ segment_name: f.segment_name, version: f.version });
        },
        (e: Error) => {
          if (this.installed.get(f.segment_name) === entry) this.installed.delete(f.segment_name);
          this.d.log?.(`installing the write fence of ${f.segment_name} failed: ${e.message}`);
        },
      );
    }
  }

  /** Forgets a segment's fences (it was registered again: its new registration starts unfenced). */
  forget(name: string): void {
    this.installed.delete(name);
  }
}
