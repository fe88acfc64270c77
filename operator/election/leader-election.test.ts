// Leader election of operator replicas in virtual time: each replica decides its Lease claim with
// the shared LeaseClaim and leads by the outcomes (LeaderElection), against a Lease store that
// enforces resourceVersion like the API server. Two replicas, one leads; failover only after the
// lease runs out; a cut-off leader stops at its renew deadline, before anyone can take over.
import { claimedSpec, LeaseClaim, releasedSpec, type LeaseSpecFields } from '../../common/lease-claim.js';
import { LeaderElection, type ElectionConfig } from './leader-election.js';

type Spec = LeaseSpecFields<string>;

class LeaseStore {
  spec: Spec | undefined;
  version = 0;
  read(): { spec: Spec | undefined; version: number } {
    return { spec: this.spec && { ...this.spec }, version: this.version };
  }
  write(spec: Spec, version: number): boolean {
    if (version !== this.version) return false; // 409 Conflict
    this.spec = spec;
    this.version++;
    return true;
  }
}

const cfg: ElectionConfig = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
const wall = (t: number) => new Date(1_700_000_000_000 + t).toISOString();

class Replica {
  readonly claim: LeaseClaim;
  readonly election = new LeaderElection(cfg);
  constructor(readonly identity: string) {
    this.claim = new LeaseClaim(identity, cfg.leaseDurationMs);
  }
  isLeader() {
    return this.election.isLeader();
  }
  /** Reads and decides; returns the write it wants (or undefined: it waits). */
  plan(store: LeaseStore, now: number): { spec: Spec; version: number } | undefined {
    const { spec, version } = store.read();
    const c = this.claim.decide(spec && { holder: spec.holderIdentity, durationSeconds: spec.leaseDurationSeconds, version: String(version) }, now);
    if (c.do === 'wait') {
      this.election.claimed('lost', now, now);
      return undefined;
    }
    return { spec: claimedSpec(c.do, spec, this.identity, cfg.leaseDurationMs / 1000, wall(now)), version };
  }
}

/** One retry-period step of a replica: read, decide, write (optimistically). */
function step(r: Replica, store: LeaseStore, now: number, reachable = true): void {
  if (!reachable) {
    r.election.claimed('error', now, now);
    return;
  }
  const w = r.plan(store, now);
  if (w) r.election.claimed(store.write(w.spec, w.version) ? 'held' : 'lost', now, now);
}

describe('leader election on the shared Lease claim', () => {
  it('exactly one of two replicas leads, and keeps leading while it renews', () => {
    const store = new LeaseStore();
    const a = new Replica('a');
    const b = new Replica('b');
    for (let t = 0; t < 60_000; t += 2_000) {
      step(a, store, t);
      step(b, store, t + 1);
      expect([a.isLeader(), b.isLeader()].filter(Boolean)).toHaveLength(1);
    }
    expect(a.isLeader()).toBe(true);
    expect(store.spec?.holderIdentity).toBe('a');
    expect(store.spec?.leaseTransitions).toBe(0);
  });

  it('a conflicting write (stale resourceVersion) does not make a leader', () => {
    const store = new LeaseStore();
    const a = new Replica('a');
    const b = new Replica('b');
    const wa = a.plan(store, 0);
    const wb = b.plan(store, 0);
    if (!wa || !wb) throw new Error('both should try');
    a.election.claimed(store.write(wa.spec, wa.version) ? 'held' : 'lost', 0, 0);
    b.election.claimed(store.write(wb.spec, wb.version) ? 'held' : 'lost', 0, 0);
    expect(a.isLeader()).toBe(true);
    expect(b.isLeader()).toBe(false);
  });

  it('the follower takes over only after the leader has been silent for the lease duration', () => {
    const store = new LeaseStore();
    const a = new Replica('a');
    const b = new Replica('b');
    step(a, store, 0);
    step(b, store, 1);
    // a dies at t=0; b keeps observing the same record.
    for (let t = 2_000; t < 15_001; t += 2_000) {
      step(b, store, t);
      expect(b.isLeader()).toBe(false);
    }
    step(b, store, 16_001);
    expect(b.isLeader()).toBe(true);
    expect(store.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it('a leader cut off from the API server steps down at the renew deadline, before anyone can take over', () => {
    const store = new LeaseStore();
    const a = new Replica('a');
    const b = new Replica('b');
    step(a, store, 0);
    step(b, store, 1);
    let aStepDown = -1;
    let bTakeOver = -1;
    for (let t = 2_000; t <= 30_000; t += 1_000) {
      step(a, store, t, false);
      if (!a.isLeader() && aStepDown < 0) aStepDown = t;
      step(b, store, t);
      if (b.isLeader() && bTakeOver < 0) bTakeOver = t;
    }
    expect(aStepDown).toBe(10_000);
    expect(bTakeOver).toBeGreaterThan(aStepDown);
  });

  it('judges expiry by local observation, not by the renewTime another clock wrote', () => {
    const store = new LeaseStore();
    store.spec = { holderIdentity: 'x', leaseDurationSeconds: 15, renewTime: '2000-01-01T00:00:00.000Z', acquireTime: '2000-01-01T00:00:00.000Z', leaseTransitions: 4 };
    const b = new Replica('b');
    step(b, store, 100_000);
    expect(b.isLeader()).toBe(false); // an old-looking renewTime is not proof the holder is gone
    step(b, store, 115_000);
    expect(b.isLeader()).toBe(true);
    expect(store.spec?.leaseTransitions).toBe(5);
  });

  it('releases the lease on shutdown so a successor need not wait', () => {
    const store = new LeaseStore();
    const a = new Replica('a');
    step(a, store, 0);
    a.election.stepDown();
    const released = releasedSpec(store.spec, wall(1));
    expect(released).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1 });
    store.write(released, store.version);
    const b = new Replica('b');
    step(b, store, 2);
    expect(b.isLeader()).toBe(true);
  });

  it('counts the renew deadline from when the accepted claim was sent, not from when its answer came', () => {
    const e = new LeaderElection(cfg);
    e.claimed('held', 0, 9_000); // a slow answer: sent at 0, accepted, seen at 9 s
    expect(e.isLeader()).toBe(true);
    expect(e.deadline).toBe(10_000);
    e.checkDeadline(10_000);
    expect(e.isLeader()).toBe(false);
    e.claimed('held', 20_000, 30_001); // accepted, but seen after its own deadline: proves nothing now
    expect(e.isLeader()).toBe(false);
  });

  it('rejects a renew deadline not shorter than the lease', () => {
    expect(() => new LeaderElection({ leaseDurationMs: 10, renewDeadlineMs: 10, retryPeriodMs: 1 })).toThrow(/renewDeadline/);
  });
});
