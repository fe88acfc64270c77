// The leader-election state machine of an HA master: follower / candidate / leader, with the
// lease duration, renew deadline and retry period of the classic lease-based election. Pure: the
// shell (leader-elector.ts) asks next(now) what to do, runs the backend call, and reports the
// outcome with the time it was *started*; no I/O, no timers, no wall clock here.
//
// A follower tries to acquire every retry period; told that the leader is likely gone (hurry():
// its replication stream ended), it tries every tenth of that (at least 50 ms) for one lease and
// one retry period, so it takes over within ~100 ms of the old lease's expiry instead of up to a
// retry period later. Hurrying changes when attempts are made, never what an attempt may do.
//
// Safety argument: the backend's lease starts counting no earlier than the moment our acquire or
// renew request was sent, and lasts leaseDurationMs. We serve only until sentAt + renewDeadlineMs
// (< leaseDurationMs), so we stop serving before anyone else could obtain the lease.

export interface ElectionTimings {
  /** TTL written to the backend: how long others wait after our last successful renewal. */
  leaseDurationMs: number;
  /** A leader that has not renewed within this long after a renewal was sent stops serving. */
  renewDeadlineMs: number;
  /** Pause between acquire attempts (followers) and between renewals (leader). */
  retryPeriodMs: number;
}

/**
 * 4 s lease, stop serving 1.2 s before it could expire, renew (or retry) every 800 ms: a dead
 * leader's successor serves in under 5 s (docs/ha.md "Failover time"; 5 s did not, at 4.5-5.3 s).
 */
export const DEFAULT_TIMINGS: ElectionTimings = { leaseDurationMs: 4000, renewDeadlineMs: 2800, retryPeriodMs: 800 };

/**
 * The timings for a lease of `leaseMs` (--ha_lease_ms): stop serving at 70% of it without a
 * renewal, renew every fifth of it (at least every 100 ms). 4000 gives DEFAULT_TIMINGS.
 */
export function timingsForLease(leaseMs: number): ElectionTimings {
  return { leaseDurationMs: leaseMs, renewDeadlineMs: Math.round(leaseMs * 0.7), retryPeriodMs: Math.max(100, Math.round(leaseMs / 5)) };
}

export type Role = 'follower' | 'candidate' | 'leader';

export type Step = { do: 'acquire' } | { do: 'renew' } | { do: 'wait'; untilMs: number };

/** What changed as a result of an event: the shell starts or stops serving on these. */
export type Transition = 'elected' | 'deposed' | undefined;

/** Outcome of a renewal: still ours, definitely lost (someone else holds it / lease gone), or unknown (error). */
export type RenewOutcome = 'renewed' | 'lost' | 'error';

/** A hurried follower's pause between acquire attempts: a tenth of the retry period, at least 50 ms. */
export function hurriedRetryMs(t: ElectionTimings): number {
  return Math.max(50, Math.round(t.retryPeriodMs / 10));
}

export function validateTimings(t: ElectionTimings): void {
  if (!(t.retryPeriodMs > 0)) throw new Error(`retry period must be > 0 ms (got ${t.retryPeriodMs})`);
  if (!(t.renewDeadlineMs > t.retryPeriodMs)) throw new Error(`renew deadline (${t.renewDeadlineMs} ms) must exceed the retry period (${t.retryPeriodMs} ms)`);
  if (!(t.leaseDurationMs > t.renewDeadlineMs)) throw new Error(`lease duration (${t.leaseDurationMs} ms) must exceed the renew deadline (${t.renewDeadlineMs} ms)`);
}

export class Election {
  private role_: Role = 'follower';
  private inFlight = false;
  /** Follower: earliest next acquire attempt. Leader: next renewal. */
  private nextAttemptAt = 0;
  /** Leader only: serving is allowed strictly before this instant. */
  private servingUntil = 0;
  private leader_: string | undefined;
  private term_ = 0;
  /** Follower: acquire attempts are hurried until this instant (0: not hurried). */
  private hurryUntil = 0;

  constructor(readonly timings: ElectionTimings = DEFAULT_TIMINGS) {
    validateTimings(timings);
  }

  get role(): Role {
    return this.role_;
  }

  /** Number of times this process became leader (1 for its first term). */
  get term(): number {
    return this.term_;
  }

  /** The last leader address seen (ours while leading), if known. */
  get knownLeader(): string | undefined {
    return this.leader_;
  }

  /** True while this process may serve: leader and the renew deadline not reached. */
  isServing(now: number): boolean {
    return this.role_ === 'leader' && now < this.servingUntil;
  }

  /** The monotonic instant up to which serving is allowed (0 when not leader). */
  get servingDeadline(): number {
    return this.role_ === 'leader' ? this.servingUntil : 0;
  }

  /** Deposes a leader whose renew deadline has passed. Call before next() and on every timer. */
  check(now: number): Transition {
    if (this.role_ === 'leader' && now >= this.servingUntil) return this.depose(now);
    return undefined;
  }

  /** What the shell should do now. While a call is in flight it only waits (for the deadline). */
  next(now: number): Step {
    if (this.inFlight) return { do: 'wait', untilMs: this.role_ === 'leader' ? this.servingUntil : Number.POSITIVE_INFINITY };
    if (now < this.nextAttemptAt) {
      return { do: 'wait', untilMs: this.role_ === 'leader' ? Math.min(this.nextAttemptAt, this.servingUntil) : this.nextAttemptAt };
    }
    return this.role_ === 'leader' ? { do: 'renew' } : { do: 'acquire' };
  }

  /**
   * The leader is likely gone (a follower's stream from it ended): try to acquire now and then
   * every hurriedRetryMs, for a lease and a retry period (by then a dead leader's record expired).
   * Ignored while leading.
   */
  hurry(now: number): void {
    if (this.role_ === 'leader') return;
    this.hurryUntil = now + this.timings.leaseDurationMs + this.timings.retryPeriodMs;
    this.nextAttemptAt = Math.min(this.nextAttemptAt, now);
  }

  /** True while acquire attempts are hurried. */
  isHurried(now: number): boolean {
    return this.role_ !== 'leader' && now < this.hurryUntil;
  }

  /** The shell sent an acquire request at `now`. */
  acquireStarted(now: number): void {
    if (this.inFlight || this.role_ === 'leader') throw new Error(`acquire cannot start as ${this.role_}${this.inFlight ? ' with a call in flight' : ''}`);
    void now;
    this.inFlight = true;
    this.role_ = 'candidate';
  }

  /**
   * Result of the acquire sent at `sentAt`. `leader` is who holds it when we did not get it.
   * A success that arrives after its own renew deadline is not trusted: we stay follower.
   */
  acquireDone(sentAt: number, now: number, acquired: boolean, leader?: string, self?: string): Transition {
    this.inFlight = false;
    if (acquired && now < sentAt + this.timings.renewDeadlineMs) {
      this.role_ = 'leader';
      this.term_++;
      this.leader_ = self;
      this.servingUntil = sentAt + this.timings.renewDeadlineMs;
      this.nextAttemptAt = now + this.timings.retryPeriodMs;
      this.hurryUntil = 0;
      return 'elected';
    }
    this.role_ = 'follower';
    if (!acquired) this.leader_ = leader;
    this.nextAttemptAt = now + (this.isHurried(now) ? hurriedRetryMs(this.timings) : this.timings.retryPeriodMs);
    return undefined;
  }

  /** The shell sent a renewal at `now`. */
  renewStarted(now: number): void {
    if (this.inFlight || this.role_ !== 'leader') throw new Error(`renew cannot start as ${this.role_}${this.inFlight ? ' with a call in flight' : ''}`);
    void now;
    this.inFlight = true;
  }

  /** Result of the renewal sent at `sentAt`. Ignored when we were deposed meanwhile. */
  renewDone(sentAt: number, now: number, outcome: RenewOutcome): Transition {
    this.inFlight = false;
    if (this.role_ !== 'leader') {
      this.nextAttemptAt = Math.max(this.nextAttemptAt, now);
      return undefined;
    }
    if (outcome === 'lost') return this.depose(now);
    if (outcome === 'renewed') this.servingUntil = Math.max(this.servingUntil, sentAt + this.timings.renewDeadlineMs);
    // After an error, retry sooner than a full period so a transient failure does not cost the term.
    const pause = outcome === 'renewed' ? this.timings.retryPeriodMs : Math.min(this.timings.retryPeriodMs, 200);
    this.nextAttemptAt = now + pause;
    return this.check(now);
  }

  /** Voluntary step-down (shutdown): stop serving now. */
  resign(now: number): Transition {
    return this.role_ === 'leader' ? this.depose(now) : undefined;
  }

  private depose(now: number): Transition {
    this.role_ = 'follower';
    this.servingUntil = 0;
    this.leader_ = undefined;
    this.nextAttemptAt = now + this.timings.retryPeriodMs;
    return 'deposed';
  }
}
