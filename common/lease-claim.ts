// Who may write a coordination.k8s.io/v1 Lease, as a pure decision: given the Lease as just read
// (or its absence) and the local monotonic time, create it, renew our own hold, take it over
// (free, or expired), or wait for its holder. Expiry is judged by observation: another holder's
// claim stands until THIS process has seen the same record (holder and resourceVersion) unchanged
// for the lease duration on its own clock, so a renewTime written by a skewed clock on another
// node can neither end a live hold early nor keep a dead one alive. The I/O is k8s-lease.ts.

/** What the decision needs of a Lease as read. */
export interface LeaseView {
  /** holderIdentity; '' or absent when nobody holds it. */
  holder?: string | null;
  /** leaseDurationSeconds the holder wrote (how long its claim stands without renewal). */
  durationSeconds?: number | null;
  /** metadata.resourceVersion: changes with every write, so a renewal resets the observation. */
  version?: string;
}

export type Claim =
  | { do: 'create' }
  /** Our own hold: write a new renewTime, keeping acquireTime and leaseTransitions. */
  | { do: 'renew' }
  /** Free or expired: become the holder (acquireTime now, leaseTransitions + 1). */
  | { do: 'take' }
  | { do: 'wait'; holder: string };

export class LeaseClaim {
  private observed: { key: string; at: number } | undefined;

  /** `defaultDurationMs` applies when the Lease does not say its duration. */
  constructor(
    readonly identity: string,
    private readonly defaultDurationMs: number,
  ) {
    if (!identity) throw new Error('lease: the holder identity must not be empty');
  }

  decide(lease: LeaseView | undefined, now: number): Claim {
    if (!lease) return { do: 'create' };
    const holder = lease.holder ?? '';
    if (holder === this.identity) return { do: 'renew' };
    if (holder === '') return { do: 'take' };
    const key = `${holder}\n${lease.version ?? ''}`;
    if (!this.observed || this.observed.key !== key) this.observed = { key, at: now };
    const duration = lease.durationSeconds && lease.durationSeconds > 0 ? lease.durationSeconds * 1000 : this.defaultDurationMs;
    return now >= this.observed.at + duration ? { do: 'take' } : { do: 'wait', holder };
  }
}

/** The Lease spec fields a claim writes; times are the caller's type (V1MicroTime on the wire). */
export interface LeaseSpecFields<T> {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number | null;
  acquireTime?: T | null;
  renewTime?: T | null;
  leaseTransitions?: number | null;
}

/** The spec to write for a create, renew or take decision; other fields of `current` are kept. */
export function claimedSpec<T, S extends LeaseSpecFields<T>>(claim: 'create' | 'renew' | 'take', current: S | undefined, identity: string, durationSeconds: number, wall: T): S {
  const base = { ...(claim === 'create' ? {} : current) } as S;
  const taking = claim !== 'renew';
  return {
    ...base,
    holderIdentity: identity,
    leaseDurationSeconds: durationSeconds,
    acquireTime: taking ? wall : (base.acquireTime ?? wall),
    renewTime: wall,
    leaseTransitions: claim === 'create' ? 0 : taking ? (base.leaseTransitions ?? 0) + 1 : (base.leaseTransitions ?? 0),
  };
}

/** The spec that gives a Lease up: no holder, and a 1 s duration should anyone still count. */
export function releasedSpec<T, S extends LeaseSpecFields<T>>(current: S | undefined, wall: T): S {
  return { ...(current ?? {}), holderIdentity: '', leaseDurationSeconds: 1, renewTime: wall } as S;
}
