// The work queue that drives reconcilers: keys (kind/namespace/name) are deduplicated, a key is
// never reconciled twice at once, failures retry with per-key exponential backoff, TerminalError
// stops retries, and requeueAfter schedules the next pass for expected waits.
import { realClock, type Cancel, type Clock } from '../../common/clock.js';
import { Backoff } from './backoff.js';
import { TerminalError, type Result } from './context.js';

export type ReconcileFn = (namespace: string, name: string) => Promise<Result>;

export class Controller {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly active = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, Cancel>();
  private running = false;
  private workers = 0;

  constructor(
    private readonly reconcilers: Record<string, ReconcileFn>,
    private readonly log: (m: string) => void,
    private readonly backoff = new Backoff(),
    private readonly concurrency = 2,
    private readonly clock: Clock = realClock,
  ) {}

  start(): void {
    this.running = true;
    this.pump();
  }

  stop(): void {
    this.running = false;
    for (const cancel of this.timers.values()) cancel();
    this.timers.clear();
  }

  enqueue(kind: string, namespace: string, name: string): void {
    const key = `${kind}/${namespace}/${name}`;
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  private later(key: string, ms: number): void {
    this.timers.get(key)?.();
    const cancel = this.clock.schedule(ms, () => {
      this.timers.delete(key);
      const [kind, ns, name] = key.split('/');
      this.enqueue(kind, ns, name);
    });
    this.timers.set(key, cancel);
  }

  private pump(): void {
    while (this.running && this.workers < this.concurrency && this.queue.length) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.active.add(key);
      this.workers++;
      void this.work(key).finally(() => {
        this.workers--;
        this.active.delete(key);
        if (this.dirty.delete(key)) {
          const [kind, ns, name] = key.split('/');
          this.enqueue(kind, ns, name);
        }
        this.pump();
      });
    }
  }

  private async work(key: string): Promise<void> {
    const [kind, ns, name] = key.split('/');
    const fn = this.reconcilers[kind];
    if (!fn) return;
    try {
      const res = await fn(ns, name);
      this.backoff.succeed(key);
      if (res.requeueAfterMs !== undefined) this.later(key, res.requeueAfterMs);
    } catch (e) {
      if (e instanceof TerminalError) {
        this.backoff.succeed(key);
        this.log(`${key}: ${e.message} (not retried until the object changes)`);
        return;
      }
      const delay = this.backoff.fail(key);
      this.log(`${key}: reconcile failed: ${(e as Error).message}; retry in ${delay}ms`);
      this.later(key, delay);
    }
  }
}
