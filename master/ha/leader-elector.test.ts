// The elector shell over an in-memory backend, in virtual time (FakeClock): it campaigns, renews
// every retry period, steps down exactly at the renew deadline when a renewal hangs, at once when
// it finds the record taken, and releases on stop.
import type { AcquireResult, ElectionBackend } from './election-backend.js';
import { LeaderElector } from './leader-elector.js';
import { FakeClock } from '../../common/clock.js';

class MemoryBackend implements ElectionBackend {
  readonly description = 'memory';
  holder: string | undefined;
  hangRenewals = false;
  stealOnRenew = false;
  released = 0;
  renewals = 0;
  attempts = 0;
  async tryAcquire(address: string): Promise<AcquireResult> {
    this.attempts++;
    if (this.holder && this.holder !== address) return { acquired: false, leader: this.holder };
    this.holder = address;
    return { acquired: true };
  }
  renew(address: string): Promise<boolean> {
    this.renewals++;
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
  readonly records = new Map<string, string>();
  async putRecord(name: string, value: string): Promise<void> {
    this.records.set(name, value);
  }
  async putLeaderRecord(name: string, value: string): Promise<void> {
    this.records.set(name, value);
  }
  async readRecords(): Promise<Map<string, string>> {
    return new Map(this.records);
  }
  async close(): Promise<void> {}
}

const quiet = { info: () => undefined, warn: () => undefined };
// The production-like timings: virtual time makes them as fast to test as short ones.
const TIMINGS = { leaseDurationMs: 10_000, renewDeadlineMs: 5_000, retryPeriodMs: 2_000 };

function elector(b: MemoryBackend, timings = TIMINGS, address = 'me:1') {
  const clock = new FakeClock();
  const events: string[] = [];
  let wake: (() => void) | undefined;
  const next = (): Promise<void> => new Promise((r) => (wake = r));
  const e = new LeaderElector(b, address, timings, clock, quiet, {
    elected: () => {
      events.push('elected');
      wake?.();
    },
    deposed: (reason) => {
      events.push(`deposed: ${reason}`);
      wake?.();
    },
  });
  return { e, events, next, clock };
}

describe('LeaderElector', () => {
  it('is elected when the record is free and keeps renewing it', async () => {
    const b = new MemoryBackend();
    const { e, events, next, clock } = elector(b);
    const elected = next();
    e.start();
    await elected;
    expect(events).toEqual(['elected']);
    expect(e.isServing(clock.now())).toBe(true);
    expect(b.holder).toBe('me:1');
    await clock.advance(3 * TIMINGS.retryPeriodMs);
    expect(b.renewals).toBe(3);
    await clock.advance(60_000); // far past any lease: renewals keep it
    expect(e.isServing(clock.now())).toBe(true);
    await e.stop();
    expect(events).toEqual(['elected', 'deposed: shutting down']);
    expect(b.holder).toBeUndefined();
  });

  it('stays follower while someone else holds the record', async () => {
    const b = new MemoryBackend();
    b.holder = 'other:1';
    const { e, events, clock } = elector(b);
    e.start();
    await clock.advance(2 * TIMINGS.retryPeriodMs);
    expect(b.attempts).toBe(3);
    expect(await b.readLeader()).toBe('other:1');
    expect(e.election.knownLeader).toBe('other:1');
    expect(e.isServing(clock.now())).toBe(false);
    await e.stop();
    expect(events).toEqual([]);
    expect(b.released).toBe(0);
  });

  it('hurried (its stream from the leader ended), a follower takes a record freed within a tenth of the retry period', async () => {
    const b = new MemoryBackend();
    b.holder = 'other:1';
    const { e, events, next, clock } = elector(b);
    const elected = next();
    e.start();
    await clock.advance(100); // the first attempt failed: the next is a retry period (2 s) after it
    e.hurry(); // tries at once, then every 200 ms
    expect(b.attempts).toBe(2);
    await clock.advance(300);
    b.holder = undefined; // the old leader's record expired at t=400
    await clock.advance(200);
    await elected;
    expect(events).toEqual(['elected']);
    expect(clock.now()).toBeLessThan(TIMINGS.retryPeriodMs); // not hurried: no attempt before t=2000
    await e.stop();
  });

  it('is hurried for one lease and one retry period, then tries every retry period again', async () => {
    const b = new MemoryBackend();
    b.holder = 'other:1'; // alive: the stream ended for another reason
    const { e, clock } = elector(b);
    e.start();
    e.hurry();
    await clock.advance(TIMINGS.leaseDurationMs + TIMINGS.retryPeriodMs);
    const hurried = b.attempts;
    expect(hurried).toBeGreaterThanOrEqual((TIMINGS.leaseDurationMs + TIMINGS.retryPeriodMs) / 200);
    await clock.advance(4 * TIMINGS.retryPeriodMs);
    expect(b.attempts - hurried).toBeLessThanOrEqual(4);
    await e.stop();
  });

  it('steps down at the renew deadline when a renewal hangs', async () => {
    const b = new MemoryBackend();
    const { e, events, next, clock } = elector(b);
    const w = next();
    e.start();
    await w;
    const electedAt = clock.now();
    b.hangRenewals = true;
    await clock.advance(TIMINGS.renewDeadlineMs - 1);
    expect(events).toEqual(['elected']);
    expect(e.isServing(clock.now())).toBe(true);
    await clock.advance(1);
    expect(clock.now() - electedAt).toBe(TIMINGS.renewDeadlineMs);
    expect(events[1]).toBe('deposed: renew deadline passed without a successful renewal');
    expect(e.isServing(clock.now())).toBe(false);
    await e.stop();
  });

  it('steps down at once when a renewal finds the record taken', async () => {
    const b = new MemoryBackend();
    const { e, events, next, clock } = elector(b);
    const w = next();
    e.start();
    await w;
    b.stealOnRenew = true;
    await clock.advance(TIMINGS.retryPeriodMs);
    expect(events[1]).toBe('deposed: the leader record is no longer ours');
    expect(b.holder).toBe('other:1');
    await e.stop();
  });
});
