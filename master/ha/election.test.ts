// The election state machine with a fake clock: who leads, when a leader must stop serving, and
// that two machines sharing one simulated lease store never serve at the same instant.
import fc from 'fast-check';
import { DEFAULT_TIMINGS, Election, timingsForLease, validateTimings, type ElectionTimings } from './election.js';

const T: ElectionTimings = { leaseDurationMs: 5000, renewDeadlineMs: 3500, retryPeriodMs: 1000 };

describe('Election', () => {
  it('starts as follower and tries to acquire at once', () => {
    const e = new Election(T);
    expect(e.role).toBe('follower');
    expect(e.next(0)).toEqual({ do: 'acquire' });
    e.acquireStarted(0);
    expect(e.role).toBe('candidate');
    expect(e.next(10)).toEqual({ do: 'wait', untilMs: Number.POSITIVE_INFINITY });
  });

  it('becomes leader on a successful acquire and serves until sentAt + renew deadline', () => {
    const e = new Election(T);
    e.acquireStarted(100);
    expect(e.acquireDone(100, 150, true, undefined, '10.0.0.1:50051')).toBe('elected');
    expect(e.role).toBe('leader');
    expect(e.term).toBe(1);
    expect(e.knownLeader).toBe('10.0.0.1:50051');
    expect(e.isServing(3599)).toBe(true);
    expect(e.isServing(3600)).toBe(false);
    // Next renewal one retry period after the result.
    expect(e.next(200)).toEqual({ do: 'wait', untilMs: 1150 });
    expect(e.next(1150)).toEqual({ do: 'renew' });
  });

  it('a failed acquire leaves a follower that retries after the retry period and remembers the leader', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    expect(e.acquireDone(0, 20, false, '10.0.0.2:50051')).toBeUndefined();
    expect(e.role).toBe('follower');
    expect(e.knownLeader).toBe('10.0.0.2:50051');
    expect(e.next(500)).toEqual({ do: 'wait', untilMs: 1020 });
    expect(e.next(1020)).toEqual({ do: 'acquire' });
  });

  it('hurry: a follower tries at once, then every tenth of the retry period, for a lease and a retry period', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    e.acquireDone(0, 20, false, '10.0.0.2:50051');
    expect(e.next(300)).toEqual({ do: 'wait', untilMs: 1020 });
    e.hurry(300);
    expect(e.isHurried(300)).toBe(true);
    expect(e.next(300)).toEqual({ do: 'acquire' });
    e.acquireStarted(300);
    e.acquireDone(300, 310, false, '10.0.0.2:50051');
    expect(e.next(310)).toEqual({ do: 'wait', untilMs: 410 });
    // The window ends at 300 + 5000 + 1000: back to the retry period.
    e.acquireStarted(6300);
    e.acquireDone(6300, 6310, false, '10.0.0.2:50051');
    expect(e.isHurried(6310)).toBe(false);
    expect(e.next(6310)).toEqual({ do: 'wait', untilMs: 7310 });
  });

  it('hurry is ignored by a leader, and an election ends it', () => {
    const e = new Election(T);
    e.hurry(0);
    e.acquireStarted(0);
    expect(e.acquireDone(0, 10, true)).toBe('elected');
    expect(e.isHurried(10)).toBe(false);
    e.hurry(20);
    expect(e.next(20)).toEqual({ do: 'wait', untilMs: 1010 });
    expect(e.isHurried(20)).toBe(false);
  });

  it('does not trust an acquire whose answer came after its own renew deadline', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    expect(e.acquireDone(0, 3500, true)).toBeUndefined();
    expect(e.role).toBe('follower');
  });

  it('each successful renewal moves the serving deadline to its send time + renew deadline', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    e.acquireDone(0, 10, true);
    e.renewStarted(1010);
    expect(e.renewDone(1010, 1030, 'renewed')).toBeUndefined();
    expect(e.servingDeadline).toBe(4510);
    expect(e.isServing(4509)).toBe(true);
  });

  it('a leader whose renewals fail stops serving exactly at the deadline, before the lease can expire', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    e.acquireDone(0, 10, true);
    e.renewStarted(1010);
    expect(e.renewDone(1010, 1500, 'error')).toBeUndefined();
    expect(e.role).toBe('leader');
    // An error retries sooner than a full period.
    expect(e.next(1500)).toEqual({ do: 'wait', untilMs: 1700 });
    e.renewStarted(1700);
    // The renewal hangs: the shell waits for the deadline, not for the answer.
    expect(e.next(2000)).toEqual({ do: 'wait', untilMs: 3500 });
    // It serves until the renew deadline of its last renewal (the acquisition at 0), which falls
    // before a rival may take the lease (0 + leaseDurationMs).
    expect(e.servingDeadline).toBe(T.renewDeadlineMs);
    expect(e.servingDeadline).toBeLessThan(0 + T.leaseDurationMs);
    expect(e.check(3499)).toBeUndefined();
    expect(e.check(3500)).toBe('deposed');
    expect(e.role).toBe('follower');
    expect(e.isServing(3500)).toBe(false);
    // The late answer of the hung renewal is ignored.
    expect(e.renewDone(1700, 3600, 'renewed')).toBeUndefined();
    expect(e.role).toBe('follower');
  });

  it('a renewal that finds the record taken deposes at once', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    e.acquireDone(0, 10, true);
    e.renewStarted(1010);
    expect(e.renewDone(1010, 1020, 'lost')).toBe('deposed');
    expect(e.isServing(1020)).toBe(false);
    expect(e.next(1020)).toEqual({ do: 'wait', untilMs: 2020 });
  });

  it('resign stops a leader and is a no-op for a follower', () => {
    const e = new Election(T);
    expect(e.resign(0)).toBeUndefined();
    e.acquireStarted(0);
    e.acquireDone(0, 1, true);
    expect(e.resign(5)).toBe('deposed');
    expect(e.role).toBe('follower');
  });

  it('counts terms across re-elections', () => {
    const e = new Election(T);
    e.acquireStarted(0);
    e.acquireDone(0, 1, true);
    e.resign(2);
    e.acquireStarted(1002);
    e.acquireDone(1002, 1003, true);
    expect(e.term).toBe(2);
  });

  it('refuses calls out of order and inconsistent timings', () => {
    const e = new Election(T);
    expect(() => e.renewStarted(0)).toThrow(/renew cannot start as follower/);
    e.acquireStarted(0);
    expect(() => e.acquireStarted(1)).toThrow(/in flight/);
    expect(() => validateTimings({ leaseDurationMs: 3000, renewDeadlineMs: 3000, retryPeriodMs: 1000 })).toThrow(/lease duration/);
    expect(() => validateTimings({ leaseDurationMs: 5000, renewDeadlineMs: 900, retryPeriodMs: 1000 })).toThrow(/renew deadline/);
    expect(() => new Election({ leaseDurationMs: 5000, renewDeadlineMs: 3000, retryPeriodMs: 0 })).toThrow(/retry period/);
  });

  // Two candidates against one simulated TTL store with random call latencies, failures and
  // pauses: at no instant do both consider themselves serving.
  it('never lets two machines serve at once over a shared TTL lease', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 4000 }), fc.integer({ min: 0, max: 4 })), { minLength: 5, maxLength: 120 }),
        (script) => {
          let holder: number | undefined;
          let expiresAt = 0;
          const store = {
            // The store applies a request when it arrives (sentAt + latency).
            acquire(who: number, at: number): boolean {
              if (holder !== undefined && at < expiresAt) return false;
              holder = who;
              expiresAt = at + T.leaseDurationMs;
              return true;
            },
            renew(who: number, at: number): boolean {
              if (holder !== who || at >= expiresAt) return false;
              expiresAt = at + T.leaseDurationMs;
              return true;
            },
          };
          const machines = [new Election(T), new Election(T)];
          let now = 0;
          for (const [who, latency, kind] of script) {
            const e = machines[who];
            now += 1 + (latency % 700);
            e.check(now);
            const step = e.next(now);
            if (step.do === 'wait') continue;
            const sentAt = now;
            const arrives = sentAt + latency;
            // kind 0: the call errors without reaching the store; others: it is applied.
            if (step.do === 'acquire') {
              e.acquireStarted(sentAt);
              const ok = kind !== 0 && store.acquire(who, arrives);
              e.acquireDone(sentAt, arrives + 1, ok);
            } else {
              e.renewStarted(sentAt);
              const outcome = kind === 0 ? 'error' : store.renew(who, arrives) ? 'renewed' : 'lost';
              e.renewDone(sentAt, arrives + 1, outcome);
            }
            now = arrives + 1;
            for (const m of machines) m.check(now);
            // Safety at this instant: whoever serves must be the store's unexpired holder.
            machines.forEach((m, i) => {
              if (m.isServing(now)) {
                expect(holder).toBe(i);
                expect(now).toBeLessThan(expiresAt);
              }
            });
            expect(machines.filter((m) => m.isServing(now)).length).toBeLessThanOrEqual(1);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('timingsForLease (--ha_lease_ms)', () => {
  it('gives the default timings for 5 s and valid ones for every lease the flag accepts', () => {
    expect(timingsForLease(4000)).toEqual(DEFAULT_TIMINGS);
    for (const ms of [1000, 1001, 2500, 3000, 60_000]) {
      const t = timingsForLease(ms);
      expect(() => validateTimings(t)).not.toThrow();
      expect(t.renewDeadlineMs / t.leaseDurationMs).toBeCloseTo(0.7, 2);
    }
  });
});
