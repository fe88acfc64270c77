// The client's liveness loop: ping the master every interval (well under its --client_ttl) and
// remount this client's segments when the master says it does not know them (a restarted master
// or a new leader). One beat at a time; a failed ping is reported and the loop keeps going.
import { realClock, type Clock } from '../common/clock.js';
import type { PingResponse__Output } from '../proto/gen/store/PingResponse.js';

export interface HeartbeatOptions {
  intervalMs: number;
  ping: () => Promise<PingResponse__Output>;
  remount: () => Promise<void>;
  onError?: (e: unknown) => void;
  /** Default the real clock (its timers never keep a process alive on their own). */
  clock?: Clock;
}

export class Heartbeat {
  private cancel: (() => void) | undefined;
  private running = false;
  private inFlight: Promise<void> | undefined;
  /** A nudge came while a ping was in flight: ping again once it is answered. */
  private again = false;
  /** Consecutive failed pings (0 when the master answers). */
  failures = 0;
  remounts = 0;

  constructor(private readonly opts: HeartbeatOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.arm();
  }

  private arm(): void {
    if (!this.running) return;
    this.cancel = (this.opts.clock ?? realClock).schedule(this.opts.intervalMs, () => {
      this.cancel = undefined;
      this.nudge();
    });
  }

  /** One ping (and remount if asked). Never throws. */
  async beat(): Promise<void> {
    try {
      const res = await this.opts.ping();
      this.failures = 0;
      if (res.need_remount) {
        this.remounts++;
        await this.opts.remount();
      }
    } catch (e) {
      this.failures++;
      this.opts.onError?.(e);
    }
  }

  /**
   * Pings now instead of at the end of the interval (unless the loop is stopped). With a ping in
   * flight, pings again as soon as it is answered: the reply on its way may predate what the
   * nudge is about (a copy notice sent after the master answered it).
   */
  nudge(): void {
    if (!this.running) return;
    if (this.inFlight !== undefined) {
      this.again = true;
      return;
    }
    this.cancel?.();
    this.cancel = undefined;
    this.inFlight = this.beat().finally(() => {
      this.inFlight = undefined;
      if (this.again) {
        this.again = false;
        this.nudge();
      } else this.arm();
    });
  }

  /** Stops the loop and waits for a beat in progress. */
  async stop(): Promise<void> {
    this.running = false;
    this.cancel?.();
    await this.inFlight;
  }
}
