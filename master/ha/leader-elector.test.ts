// The elector shell over an in-memory backend with short timings: it campaigns, renews, steps
// down when a renewal hangs past the deadline or finds the record taken, and releases on stop.
// Every wait is on an event (elected/deposed), never on a fixed delay.
import type { AcquireResult, ElectionBackend } from './election-backend.js';
import { LeaderElector } from './leader-elector.js';

class MemoryBackend implements ElectionBackend {
  readonly description = 'memory';
  holder: string | undefined;
  hangRenewals = false;
  stealOnRenew = false;
  released = 0;
  renewals = 0;
  attempts = 0;
  /** Resolves once `n` more calls of kind happened. */
  private waiters: Array<{ kind: 'acquire' | 'renew'; at: number; resolve: () => void }> = [];
  calls(kind: 'acquire' | 'renew', n: number): Promise<void> {
    const at = (kind === 'acquire' ? this.attempts : this.renewals) + n;
    return new Promise((resolve) => this.waiters.push({ kind, at, resolve }));
  }
  private notify(): void {
    this.waiters = this.waiters.filter((w) => {
      const done = (w.kind === 'acquire' ? this.attempts : this.renewals) >= w.at;
      if (done) w.resolve();
      return !done;
    });
  }
  async tryAcquire(address: string): Promise<AcquireResult> {
    this.attempts++;
    queueMicrotask(() => this.notify());
    if (this.holder && this.holder !== address) return { acquired: false, leader: this.holder };
    this.holder = address;
    return { acquired: true };
  }
  renew(address: string): Promise<boolean> {
    this.renewals++;
    queueMicrotask(() => this.notify());
    if (this.hangRenewals) return new Promise(() => undefined);
    if (this.stealOnRenew) this.holder = 'other:1';
    return Promise.resolve(this.holder === address);
  }
  async release(address: string): Promise<void> {
    if (this.holder === address) this.holder = undefined;
    this.released++;
  }
  async readLeader(): Promise<string | undefined> {
    return this.holder;
  }
  async close(): Promise<void> {}
}

const quiet = { info: () => undefined, warn: () => undefined };
// Generous deadline so a loaded machine cannot depose a healthy leader; a short one where the
// deadline itself is under test.
const RELAXED = { leaseDurationMs: 10_000, renewDeadlineMs: 5_000, retryPeriodMs: 20 };
const SHORT = { leaseDurationMs: 400, renewDeadlineMs: 250, retryPeriodMs: 20 };

function elector(b: MemoryBackend, timings = RELAXED, address = 'me:1') {
  const events: string[] = [];
  let wake: (() => void) | undefined;
  const next = (): Promise<void> => new Promise((r) => (wake = r));
  const e = new LeaderElector(b, address, timings, () => performance.now(), quiet, {
    elected: () => {
      events.push('elected');
      wake?.();
    },
    deposed: (reason) => {
      events.push(`deposed: ${reason}`);
      wake?.();
    },
  });
  return { e, events, next };
}

describe('LeaderElector', () => {
  it('is elected when the record is free and keeps renewing it', async () => {
    const b = new MemoryBackend();
    const { e, events, next } = elector(b);
    const elected = next();
    e.start();
    await elected;
    expect(events).toEqual(['elected']);
    expect(e.isServing(performance.now())).toBe(true);
    expect(b.holder).toBe('me:1');
    await b.calls('renew', 3);
    expect(e.isServing(performance.now())).toBe(true);
    await e.stop();
    expect(events).toEqual(['elected', 'deposed: shutting down']);
    expect(b.holder).toBeUndefined();
  });

  it('stays follower while someone else holds the record', async () => {
    const b = new MemoryBackend();
    b.holder = 'other:1';
    const { e, events } = elector(b);
    const tries = b.calls('acquire', 3);
    e.start();
    await tries;
    expect(await b.readLeader()).toBe('other:1');
    expect(e.election.knownLeader).toBe('other:1');
    expect(e.isServing(performance.now())).toBe(false);
    await e.stop();
    expect(events).toEqual([]);
    expect(b.released).toBe(0);
  });

  it('steps down at the renew deadline when a renewal hangs', async () => {
    const b = new MemoryBackend();
    const { e, events, next } = elector(b, SHORT);
    let w = next();
    e.start();
    await w;
    b.hangRenewals = true;
    w = next();
    await w;
    expect(events[1]).toBe('deposed: renew deadline passed without a successful renewal');
    expect(e.isServing(performance.now())).toBe(false);
    await e.stop();
  });

  it('steps down at once when a renewal finds the record taken', async () => {
    const b = new MemoryBackend();
    const { e, events, next } = elector(b);
    let w = next();
    e.start();
    await w;
    b.stealOnRenew = true;
    w = next();
    await w;
    expect(events[1]).toBe('deposed: the leader record is no longer ours');
    expect(b.holder).toBe('other:1');
    await e.stop();
  });
});
