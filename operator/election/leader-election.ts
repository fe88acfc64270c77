// Leader election on a coordination.k8s.io/v1 Lease, as a pure state machine: given the Lease
// as last read and the time, it says what to write (create, take over, renew) or to wait, and
// whether this replica leads. The shell (lease-lock.ts) does the reads, writes and sleeps.
// Expiry is judged by when THIS replica saw the record change (local monotonic time), not by the
// renewTime written by another clock, so clock skew between nodes cannot split the brain.

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number | null;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number | null;
}

export interface ElectionConfig {
  identity: string;
  /** How long a holder's claim stands without renewal (ms). */
  leaseDurationMs: number;
  /** The leader gives up if it could not renew for this long (ms); < leaseDurationMs. */
  renewDeadlineMs: number;
  /** Pause between attempts (ms). */
  retryPeriodMs: number;
}

export type Decision =
  | { action: 'create'; spec: LeaseSpec }
  | { action: 'update'; spec: LeaseSpec }
  | { action: 'wait'; holder: string | undefined };

export class LeaderElection {
  private observed: LeaseSpec | undefined;
  private observedAt = 0;
  private lastRenewAt: number | undefined;
  private leading = false;

  constructor(readonly config: ElectionConfig) {
    if (!(config.renewDeadlineMs < config.leaseDurationMs)) throw new Error('leader election: renewDeadline must be shorter than leaseDuration');
    if (!(config.retryPeriodMs > 0)) throw new Error('leader election: retryPeriod must be positive');
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * Next step, from the Lease as just read (undefined: it does not exist) at time `now` (ms,
   * monotonic, wall-clock ISO `wallNow` for the record).
   */
  decide(lease: LeaseSpec | undefined, now: number, wallNow: string): Decision {
    const me = this.config.identity;
    const durationS = Math.ceil(this.config.leaseDurationMs / 1000);
    if (!lease) return { action: 'create', spec: { holderIdentity: me, leaseDurationSeconds: durationS, acquireTime: wallNow, renewTime: wallNow, leaseTransitions: 0 } };
    if (!this.observed || !sameRecord(this.observed, lease)) {
      this.observed = lease;
      this.observedAt = now;
    }
    const holder = lease.holderIdentity ?? undefined;
    const heldByMe = holder === me;
    const duration = (lease.leaseDurationSeconds ?? durationS) * 1000;
    const expired = !holder || now >= this.observedAt + duration;
    if (!heldByMe && !expired) {
      this.leading = false;
      return { action: 'wait', holder };
    }
    return {
      action: 'update',
      spec: {
        holderIdentity: me,
        leaseDurationSeconds: durationS,
        acquireTime: heldByMe ? lease.acquireTime ?? wallNow : wallNow,
        renewTime: wallNow,
        leaseTransitions: heldByMe ? lease.leaseTransitions ?? 0 : (lease.leaseTransitions ?? 0) + 1,
      },
    };
  }

  /** Result of writing a create/update decision: true when the API server accepted it. */
  written(ok: boolean, spec: LeaseSpec, now: number): void {
    if (ok) {
      this.observed = spec;
      this.observedAt = now;
      this.lastRenewAt = now;
      this.leading = true;
    } else {
      this.checkDeadline(now);
    }
  }

  /** A read failed or nothing could be written: leadership lapses past the renew deadline. */
  checkDeadline(now: number): void {
    if (this.leading && (this.lastRenewAt === undefined || now - this.lastRenewAt >= this.config.renewDeadlineMs)) this.leading = false;
  }

  /** Record for a voluntary step-down (shutdown): give the Lease up so another takes over at once. */
  release(wallNow: string): LeaseSpec | undefined {
    if (!this.leading || !this.observed) return undefined;
    this.leading = false;
    return { ...this.observed, holderIdentity: null, leaseDurationSeconds: 1, renewTime: wallNow };
  }
}

function sameRecord(a: LeaseSpec, b: LeaseSpec): boolean {
  return a.holderIdentity === b.holderIdentity && a.renewTime === b.renewTime && a.acquireTime === b.acquireTime && a.leaseTransitions === b.leaseTransitions;
}
