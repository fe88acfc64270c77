// Stands between the transports and the MasterCore in HA mode. While this process leads (and its
// renew deadline has not passed, checked on every call) RPCs reach the current core; otherwise
// every RPC answers UNAVAILABLE_IN_CURRENT_STATUS so clients retry against the leader, and the
// management view (stats, keys, segments) is empty. Each term gets a fresh core with a new
// view_version: it knows no client, so every client's next Ping says need_remount=true. A term
// may begin held (lead(now, true)): it answers UNAVAILABLE_IN_CURRENT_STATUS until open(), once
// the term is recorded in the election backend (docs/ha.md "Which image may be elected").
import { ErrorCode } from '../../common/error-code.js';
import type { MethodInfo } from '../../common/master-proto.js';
import { STEPPED_RPCS } from '../core/table-walk.js';
import type { MasterCorePort, SegmentDetail, SweepResult } from '../core-port.js';
import { EMPTY_STATS } from '../core/master-core-config.js';

type CoreMethod = (req: object, now: number) => unknown;

export type ServingCore = MasterCorePort & object;

function isSteps(v: unknown): v is Generator<void, unknown, number> {
  return typeof v === 'object' && v !== null && typeof (v as Generator).next === 'function' && typeof (v as Generator).return === 'function';
}

const EMPTY_SWEEP: SweepResult = { droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: 0 };

export class LeaderGate {
  private core: ServingCore | undefined;
  private viewVersion_ = 0;
  private held = false;
  /** Object with one method per RPC (named like MasterCore's), for RpcDispatcher. */
  readonly rpcTarget: Record<string, CoreMethod>;
  /** The MasterCorePort of whichever core serves now (empty while following). */
  readonly port: MasterCorePort;

  constructor(
    methods: readonly MethodInfo[],
    private readonly makeCore: (viewVersion: number) => ServingCore,
    /** True while the election allows serving at monotonic time `now`. */
    private readonly canServe: (now: number) => boolean,
  ) {
    this.rpcTarget = {};
    const gate = this;
    for (const m of methods) {
      this.rpcTarget[m.call] = (req, now) => {
        const core = this.core;
        if (!core || this.held || !this.canServe(now)) return { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS };
        const fn = (core as unknown as Record<string, unknown>)[m.call];
        if (typeof fn !== 'function') return { status_code: ErrorCode.NOT_IMPLEMENTED };
        return (fn as CoreMethod).call(core, req, now);
      };
      // RPCs in bounded steps (master/core/table-walk.ts): leadership is checked before every step
      if (!STEPPED_RPCS.includes(m.name)) continue;
      this.rpcTarget[`${m.call}Steps`] = function* (req: object, now: number): Generator<void, unknown, number> {
        const core = gate.core;
        if (!core || gate.held || !gate.canServe(now)) return { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS };
        const fn = (core as unknown as Record<string, unknown>)[`${m.call}Steps`] ?? (core as unknown as Record<string, unknown>)[m.call];
        if (typeof fn !== 'function') return { status_code: ErrorCode.NOT_IMPLEMENTED };
        const out: unknown = fn.call(core, req, now);
        if (!isSteps(out)) return out;
        for (let r = out.next(now); ; r = out.next(now)) {
          if (r.done) return r.value;
          now = yield;
          if (gate.core !== core || !gate.canServe(now)) {
            out.return(undefined);
            return { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS };
          }
        }
      };
    }
    this.port = {
      sweep: (now) => (gate.core && !gate.held && gate.canServe(now) ? gate.core.sweep(now) : EMPTY_SWEEP),
      stats: (now) => (gate.core ? gate.core.stats(now) : { ...EMPTY_STATS }),
      segmentsDetail: (): SegmentDetail[] => gate.core?.segmentsDetail() ?? [],
      allKeys: () => gate.core?.allKeys() ?? [],
      queryKey: (key) => gate.core?.queryKey(key),
      segmentNames: () => gate.core?.segmentNames() ?? [],
      querySegment: (name) => gate.core?.querySegment(name),
    };
  }

  get leading(): boolean {
    return this.core !== undefined;
  }

  /** view_version of the current term (0 before the first term). */
  get viewVersion(): number {
    return this.viewVersion_;
  }

  /** Starts a term: a fresh core whose view_version is strictly above any earlier one here; `held`: serving waits for open(). */
  lead(wallNowMs: number, held = false): number {
    this.viewVersion_ = Math.max(wallNowMs, this.viewVersion_ + 1);
    this.held = held;
    this.core = this.makeCore(this.viewVersion_);
    return this.viewVersion_;
  }

  /** Serving begins for the term `viewVersion` (if it is still the current one). */
  open(viewVersion: number): void {
    if (this.core !== undefined && this.viewVersion_ === viewVersion) this.held = false;
  }

  /** Whether a term is held (elected, not serving yet). */
  get isHeld(): boolean {
    return this.core !== undefined && this.held;
  }

  /** Ends the term at once: the core (and all it knew) is dropped. */
  follow(): void {
    this.core = undefined;
    this.held = false;
  }
}
