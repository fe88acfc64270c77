// Whether this operator replica leads, as a pure state machine over the outcomes of its Lease
// claims (common/k8s-lease.ts decides and writes the Lease; leader-elector.ts is the timer shell).
// A claim accepted by the API server lets the replica lead until the renew deadline counted from
// when that claim was SENT: the Lease's holders are judged expired only after the lease duration
// from when they see the record change, which is no earlier than the send, so with
// renewDeadline < leaseDuration a leader stops before anyone else may start.

export interface ElectionConfig {
  /** How long a holder's claim stands without renewal (ms): written into the Lease. */
  leaseDurationMs: number;
  /** The leader stops leading this long after its last accepted claim was sent (ms); < leaseDurationMs. */
  renewDeadlineMs: number;
  /** Pause between attempts (ms). */
  retryPeriodMs: number;
}

/** How a claim (acquire or renew) came back: ours, someone else's, or unknown (an error). */
export type ClaimOutcome = 'held' | 'lost' | 'error';

export class LeaderElection {
  private leading = false;
  private leadUntil = 0;

  constructor(readonly config: ElectionConfig) {
    if (!(config.renewDeadlineMs < config.leaseDurationMs)) throw new Error('leader election: renewDeadline must be shorter than leaseDuration');
    if (!(config.retryPeriodMs > 0)) throw new Error('leader election: retryPeriod must be positive');
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** The monotonic instant this replica stops leading unless a claim is accepted first (0 when not leading). */
  get deadline(): number {
    return this.leading ? this.leadUntil : 0;
  }

  /** The claim sent at `sentAt` came back at `now` with `outcome`. */
  claimed(outcome: ClaimOutcome, sentAt: number, now: number): void {
    if (outcome === 'lost') {
      this.leading = false;
      return;
    }
    if (outcome === 'held') {
      const until = sentAt + this.config.renewDeadlineMs;
      // An acceptance arriving after its own deadline proves nothing about now.
      if (now < until) {
        this.leadUntil = this.leading ? Math.max(this.leadUntil, until) : until;
        this.leading = true;
      }
    }
    this.checkDeadline(now);
  }

  /** Leadership lapses once the renew deadline has passed without an accepted claim. */
  checkDeadline(now: number): void {
    if (this.leading && now >= this.leadUntil) this.leading = false;
  }

  /** Voluntary step-down (shutdown). */
  stepDown(): void {
    this.leading = false;
  }
}
