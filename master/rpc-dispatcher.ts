// Runs one RPC against the core for any transport: calls the core method named after the RPC
// with the monotonic clock, turns a thrown exception into INTERNAL_ERROR (never a crash), and
// records metrics. gRPC and the fast channel both go through here.
import { ErrorCode } from '../common/error-code.js';
import type { Logger } from '../common/logger.js';
import type { MethodInfo } from '../common/master-proto.js';
import type { MasterMetrics, Transport } from './master-metrics.js';

export interface StatusResponse {
  status_code: number;
  [field: string]: unknown;
}

type CoreMethod = (req: object, now: number) => StatusResponse;

export class RpcDispatcher {
  private readonly handlers: CoreMethod[];

  constructor(
    core: object,
    private readonly methods: readonly MethodInfo[],
    private readonly clock: () => number,
    private readonly metrics: MasterMetrics,
    private readonly log: Logger,
  ) {
    this.handlers = methods.map((m) => {
      const fn = (core as Record<string, unknown>)[m.call];
      if (typeof fn !== 'function') {
        log.warn(`MasterCore has no method ${m.call}: ${m.name} answers NOT_IMPLEMENTED`);
        return () => ({ status_code: ErrorCode.NOT_IMPLEMENTED });
      }
      return (fn as CoreMethod).bind(core);
    });
  }

  /** Serves one request; always returns a response carrying status_code. */
  invoke(methodIndex: number, req: object, transport: Transport): StatusResponse {
    const start = this.clock();
    let res: StatusResponse;
    try {
      res = this.handlers[methodIndex](req, start);
      if (res === undefined || res === null || typeof res !== 'object') throw new Error(`core returned ${String(res)}`);
      if (typeof res.status_code !== 'number') res.status_code = ErrorCode.OK;
    } catch (e) {
      this.log.error(`${this.methods[methodIndex].name} failed inside the master: ${(e as Error)?.stack ?? String(e)}`);
      res = { status_code: ErrorCode.INTERNAL_ERROR };
    }
    this.metrics.observe(methodIndex, transport, res.status_code, (this.clock() - start) / 1000);
    return res;
  }

  /** The reply to a request that could not be decoded: INVALID_PARAMS, counted like any RPC. */
  invalid(methodIndex: number, transport: Transport, why: string): StatusResponse {
    this.log.warn(`${this.methods[methodIndex].name} over ${transport}: malformed request: ${why}`);
    this.metrics.observe(methodIndex, transport, ErrorCode.INVALID_PARAMS, 0);
    return { status_code: ErrorCode.INVALID_PARAMS };
  }
}
