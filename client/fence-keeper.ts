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
  /**
   * Resolves once this client's own writes into the segment that bypass the engine (offload-file-writer.ts)
   * have ended: a fence is acknowledged only after the writes it may refuse.
   */
  settled?: (name: string) => Promise<void>;
  log?: (message: string) => void;
}

export class FenceKeeper {
  /** Per segment: the registration and fence version installed (or being installed). */
  private readonly installed = new Map<string, { incarnation: number; version: number; done: boolean; below: number; revoked: Set<number> }>();
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
      const below = Number(f.below);
      const revoked = f.revoked.map(Number);
      const entry = { incarnation: seg.incarnation, version, done: false, below, revoked: new Set(revoked) };
      this.installed.set(f.segment_name, entry);
      const settled = this.d.settled;
      const installed = this.d.setFence(seg.address, { below, revoked });
      (settled === undefined ? installed : Promise.all([installed, settled(f.segment_name)])).then(
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

  /**
   * Whether a write of generation `gen` into segment `name` must be refused: the last fence the
   * master sent for it (installed or being installed) covers it. For writes this client makes
   * itself without the engine, which checks its own fences.
   */
  refuses(name: string, gen: number, incarnation: number): boolean {
    const f = this.installed.get(name);
    if (f === undefined || f.incarnation !== incarnation) return false;
    return gen < f.below || f.revoked.has(gen);
  }

  /** Forgets a segment's fences (it was registered again: its new registration starts unfenced). */
  forget(name: string): void {
    this.installed.delete(name);
  }
}
