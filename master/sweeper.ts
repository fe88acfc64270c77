// The one periodic driver of the core's time-based work: every interval it calls
// core.sweep(now) (lease and pin expiry, silent clients, zombie puts, eviction) and logs what
// happened. The core itself owns no timer. The sweep runs in the event loop's check phase, after
// the socket reads of the same turn: when the loop was held up (a long request, a GC pause), the
// heartbeats that arrived meanwhile are read before liveness is judged, so a stall of the master
// does not make its live clients look silent and get dropped with their segments.
import { every, type Cancel, type Clock } from '../common/clock.js';
import { errorCodeName } from '../common/error-code.js';
import type { Logger } from '../common/logger.js';
import type { MasterCorePort } from './core-port.js';

export class Sweeper {
  private timer: Cancel | undefined;
  private pending: NodeJS.Immediate | undefined;
  /** Objects waiting for a replica copy at the last sweep. */
  private short = 0;

  constructor(
    private readonly core: Pick<MasterCorePort, 'sweep'>,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer ??= every(this.clock, this.intervalMs, () => this.schedule());
  }

  stop(): void {
    this.timer?.();
    if (this.pending) clearImmediate(this.pending);
    this.timer = this.pending = undefined;
  }

  /** A tick after the I/O waiting in this turn of the event loop (see the opening comment). */
  private schedule(): void {
    this.pending ??= setImmediate(() => {
      this.pending = undefined;
      this.tick();
    }).unref();
  }

  /** One sweep; exceptions are logged, the next tick tries again. */
  tick(): void {
    try {
      const r = this.core.sweep(this.clock.now());
      if (r.droppedClients.length > 0) this.log.warn(`clients silent past --client_ttl, dropped: ${r.droppedClients.join(', ')}`);
      if (r.unmountedSegments.length > 0) this.log.info(`segments unmounted: ${r.unmountedSegments.join(', ')}`);
      if (r.evictedObjects > 0) this.log.info(`evicted ${r.evictedObjects} objects`);
      if (r.releasedZombies > 0) this.log.info(`released ${r.releasedZombies} uncompleted puts past --put_start_release_timeout_sec`);
      if (r.underReplicated > 0 && this.short === 0) this.log.warn(`${r.underReplicated} objects lost a replica; copying them to other segments`);
      if (r.underReplicated === 0 && this.short > 0) this.log.info('re-replication done: no object waits for a replica copy');
      this.short = r.underReplicated;
      const f = r.finishedTasks;
      if (f !== undefined) {
        for (const t of f.tasks) {
          const line = `task ${t.id} (${t.kind} of ${JSON.stringify(t.key)}) ${t.ok ? 'succeeded' : `failed: ${errorCodeName(t.errorCode)}`}`;
          if (t.ok) this.log.info(line);
          else this.log.warn(line);
        }
        if (f.more > 0) this.log.info(`${f.more} more tasks finished`);
      }
    } catch (e) {
      this.log.error(`sweep failed: ${(e as Error)?.stack ?? String(e)}`);
    }
  }
}
