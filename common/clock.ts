// The one clock of the project's shells: a monotonic `now()` in milliseconds and `schedule()` of a
// callback after a delay. The real one reads performance.now and arms Node timers; FakeClock is
// virtual time for tests: nothing fires until `advance()` moves it, then the due callbacks run in
// order (and callbacks they schedule within the window too), with promise jobs flushed between
// them, so a test of leases, elections or retries runs in microseconds and never races the machine.

/** Cancels a scheduled callback; calling it after the callback ran (or twice) does nothing. */
export type Cancel = () => void;

export interface Clock {
  /** Monotonic milliseconds (never goes back; unrelated to the wall clock). */
  now(): number;
  /**
   * Runs `fn` once after `ms`. The timer never keeps the process alive by itself unless
   * `keepAlive` (a server's own loop may want to).
   */
  schedule(ms: number, fn: () => void, opts?: { keepAlive?: boolean }): Cancel;
}

export const realClock: Clock = {
  now: () => performance.now(),
  schedule(ms, fn, opts) {
    const t = setTimeout(fn, Math.max(0, ms));
    if (!opts?.keepAlive) t.unref();
    return () => clearTimeout(t);
  },
};

/** The real clock's timers with another source of `now` (a shell whose time is injected as a function). */
export function clockWith(now: () => number): Clock {
  return { now, schedule: realClock.schedule };
}

/** Runs `fn` every `ms` on `clock` until the returned Cancel is called. */
export function every(clock: Clock, ms: number, fn: () => void, opts?: { keepAlive?: boolean }): Cancel {
  let cancel: Cancel | undefined;
  let stopped = false;
  const arm = () => {
    cancel = clock.schedule(
      ms,
      () => {
        if (stopped) return;
        arm();
        fn();
      },
      opts,
    );
  };
  arm();
  return () => {
    stopped = true;
    cancel?.();
  };
}

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/** Lets promise jobs queued by a callback (and the jobs those queue) run before the next one fires. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

export class FakeClock implements Clock {
  private time: number;
  private seq = 0;
  private timers: FakeTimer[] = [];

  constructor(start = 1_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  schedule(ms: number, fn: () => void): Cancel {
    const t: FakeTimer = { at: this.time + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(t);
    return () => {
      this.timers = this.timers.filter((x) => x !== t);
    };
  }

  /** Callbacks waiting to fire. */
  get pending(): number {
    return this.timers.length;
  }

  /**
   * Moves time forward by `ms`, firing every callback due by then in time order (ties in the
   * order they were scheduled), each at its own time, with promise jobs settled in between.
   */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await settle();
    for (;;) {
      const next = this.timers.reduce<FakeTimer | undefined>((a, t) => (a === undefined || t.at < a.at || (t.at === a.at && t.seq < a.seq) ? t : a), undefined);
      if (next === undefined || next.at > end) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.time = Math.max(this.time, next.at);
      next.fn();
      await settle();
    }
    this.time = end;
  }

  /** Advances in `step` increments until `done()` holds, at most `limitMs` of virtual time. */
  async until(done: () => boolean, limitMs: number, step = 1): Promise<void> {
    for (let waited = 0; !done(); waited += step) {
      if (waited >= limitMs) throw new Error(`FakeClock.until: not done after ${limitMs} ms of virtual time`);
      await this.advance(step);
    }
  }
}
