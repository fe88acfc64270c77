// Runs one RPC against the core for any transport: calls the core method named after the RPC
// with the monotonic clock, turns a thrown exception into INTERNAL_ERROR (never a crash), and
// records metrics. gRPC and the fast channel both go through here. An RPC that walks the whole
// object table has a core method `<name>Steps` returning a generator of bounded steps
// (master/core/table-walk.ts): serve() runs one step per turn of the event loop, so other calls
// are answered in between, and resolves with the reply. RPCs the operator disabled (e.g.
// RemoveAll with --enable_remove_all=false) are answered NOT_IMPLEMENTED without reaching the core.
// With a commit barrier (master/state/commit-barrier.ts) a reply that must wait until the changes
// it depends on are durable (change log, standbys) is a promise too. With a hold
// (master/rescan-hold.ts), a reply of UNAVAILABLE_IN_CURRENT_STATUS given while a new leader's
// file-tier rescan runs waits for the rescan and the call is made once more.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ErrorCode } from '../common/error-code.js';
import type { Logger } from '../common/logger.js';
import type { MethodInfo } from '../common/master-proto.js';
import type { MasterMetrics, Transport } from './master-metrics.js';

/** Holds replies a core cannot give yet (master/rescan-hold.ts): a promise to wait for, or undefined. */
export interface ReplyHold {
  wait(): Promise<void> | undefined;
}

/** Decides when a reply may leave (master/state/commit-barrier.ts). */
export interface ReplyBarrier {
  readonly seq: number;
  settle<T>(methodIndex: number, res: T, seqBefore: number): T | Promise<T>;
}

export interface StatusResponse {
  status_code: number;
  [field: string]: unknown;
}

type CoreMethod = (req: object, now: number) => StatusResponse;
type SteppedMethod = (req: object, now: number) => Generator<void, StatusResponse, number>;

export class RpcDispatcher {
  private readonly handlers: CoreMethod[];
  /** Per method: the core's `<call>Steps` when it has one. */
  private readonly stepped: (SteppedMethod | undefined)[];

  constructor(
    core: object,
    private readonly methods: readonly MethodInfo[],
    private readonly clock: () => number,
    private readonly metrics: MasterMetrics,
    private readonly log: Logger,
    /** RPC names refused on this master (NOT_IMPLEMENTED), whatever the core has. */
    disabled: ReadonlySet<string> = new Set(),
    private readonly barrier?: ReplyBarrier,
    private readonly hold?: ReplyHold,
  ) {
    this.handlers = methods.map((m) => {
      if (disabled.has(m.name)) return () => ({ status_code: ErrorCode.NOT_IMPLEMENTED });
      const fn = (core as Record<string, unknown>)[m.call];
      if (typeof fn !== 'function') {
        log.warn(`MasterCore has no method ${m.call}: ${m.name} answers NOT_IMPLEMENTED`);
        return () => ({ status_code: ErrorCode.NOT_IMPLEMENTED });
      }
      return (fn as CoreMethod).bind(core);
    });
    this.stepped = methods.map((m) => {
      if (disabled.has(m.name)) return undefined;
      const fn = (core as Record<string, unknown>)[`${m.call}Steps`];
      if (typeof fn !== 'function') return undefined;
      const bound: SteppedMethod = (fn as SteppedMethod).bind(core);
      return bound;
    });
  }

  /** Serves one request: the reply at once, or (an RPC in steps, a held reply) a promise of it. Never rejects. */
  serve(methodIndex: number, req: object, transport: Transport): StatusResponse | Promise<StatusResponse> {
    const stepped = this.stepped[methodIndex];
    const barrier = this.barrier;
    if (stepped === undefined && this.hold !== undefined) return this.serveHeld(methodIndex, req, transport);
    if (barrier === undefined) return stepped === undefined ? this.invoke(methodIndex, req, transport) : this.runSteps(methodIndex, stepped, req, transport);
    const before = barrier.seq;
    if (stepped !== undefined) return this.runSteps(methodIndex, stepped, req, transport).then((r) => barrier.settle(methodIndex, r, before));
    return barrier.settle(methodIndex, this.invoke(methodIndex, req, transport), before);
  }

  /** serve() with a hold: an UNAVAILABLE_IN_CURRENT_STATUS reply waits while the hold says so, then the call is made again (counted once). */
  private serveHeld(methodIndex: number, req: object, transport: Transport): StatusResponse | Promise<StatusResponse> {
    const start = this.clock();
    const before = this.barrier?.seq ?? 0;
    const res = this.call(methodIndex, req, start);
    const wait = res.status_code === ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS ? this.hold!.wait() : undefined;
    if (wait === undefined) return this.answered(methodIndex, transport, res, start, before);
    return wait.then(() => {
      const again = this.barrier?.seq ?? 0;
      return this.answered(methodIndex, transport, this.call(methodIndex, req, this.clock()), start, again);
    });
  }

  /** Counts a reply (its latency from `start`) and lets it leave once the barrier allows. */
  private answered(methodIndex: number, transport: Transport, res: StatusResponse, start: number, seqBefore: number): StatusResponse | Promise<StatusResponse> {
    this.metrics.observe(methodIndex, transport, res.status_code, (this.clock() - start) / 1000);
    return this.barrier === undefined ? res : this.barrier.settle(methodIndex, res, seqBefore);
  }

  private async runSteps(methodIndex: number, stepped: SteppedMethod, req: object, transport: Transport): Promise<StatusResponse> {
    const start = this.clock();
    let res: StatusResponse;
    try {
      const steps = stepped(req, start);
      let r = steps.next(start);
      while (!r.done) {
        await nextTurn();
        r = steps.next(this.clock());
      }
      res = r.value;
      if (res === undefined || res === null || typeof res !== 'object') throw new Error(`core returned ${String(res)}`);
      if (typeof res.status_code !== 'number') res.status_code = ErrorCode.OK;
    } catch (e) {
      this.log.error(`${this.methods[methodIndex].name} failed inside the master: ${(e as Error)?.stack ?? String(e)}`);
      res = { status_code: ErrorCode.INTERNAL_ERROR };
    }
    this.metrics.observe(methodIndex, transport, res.status_code, (this.clock() - start) / 1000);
    return res;
  }

  /** Serves one request at once (RPCs in steps included, run to the end); always returns a response carrying status_code. */
  invoke(methodIndex: number, req: object, transport: Transport): StatusResponse {
    const start = this.clock();
    const res = this.call(methodIndex, req, start);
    this.metrics.observe(methodIndex, transport, res.status_code, (this.clock() - start) / 1000);
    return res;
  }

  /** The core's reply to one request at `now`, INTERNAL_ERROR when it threw (not counted). */
  private call(methodIndex: number, req: object, now: number): StatusResponse {
    let res: StatusResponse;
    try {
      res = this.handlers[methodIndex](req, now);
      if (res === undefined || res === null || typeof res !== 'object') throw new Error(`core returned ${String(res)}`);
      if (typeof res.status_code !== 'number') res.status_code = ErrorCode.OK;
    } catch (e) {
      this.log.error(`${this.methods[methodIndex].name} failed inside the master: ${(e as Error)?.stack ?? String(e)}`);
      res = { status_code: ErrorCode.INTERNAL_ERROR };
    }
    return res;
  }

  /** The reply to a request that could not be decoded: INVALID_PARAMS, counted like any RPC. */
  invalid(methodIndex: number, transport: Transport, why: string): StatusResponse {
    this.log.warn(`${this.methods[methodIndex].name} over ${transport}: malformed request: ${why}`);
    this.metrics.observe(methodIndex, transport, ErrorCode.INVALID_PARAMS, 0);
    return { status_code: ErrorCode.INVALID_PARAMS };
  }
}
