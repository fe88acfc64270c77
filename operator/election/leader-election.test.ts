// Leader election state machine with a fake clock and a Lease store that enforces
// resourceVersion like the API server: two replicas, one leads; failover after the lease runs out.
import { LeaderElection, type LeaseSpec } from './leader-election.js';

class LeaseStore {
  spec: LeaseSpec | undefined;
  version = 0;
  read(): { spec: LeaseSpec | undefined; version: number } {
    return { spec: this.spec && { ...this.spec }, version: this.version };
  }
  write(spec: LeaseSpec, version: number): boolean {
    if (version !== this.version) return false; // 409 Conflict
    this.spec = spec;
    this.version++;
    return true;
  }
}

const cfg = (identity: string) => ({ identity, leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
const wall = (t: number) => new Date(1_700_000_000_000 + t).toISOString();

/** One retry-period step of a replica: read, decide, write (optimistically). */
function step(e: LeaderElection, store: LeaseStore, now: number, reachable = true): void {
  if (!reachable) {
    e.checkDeadline(now);
    return;
  }
  const { spec, version } = store.read();
  const d = e.decide(spec, now, wall(now));
  if (d.action === 'wait') return;
  e.written(store.write(d.spec, version), d.spec, now);
}

describe('LeaderElection', () => {
  it('exactly one of two replicas leads, and keeps leading while it renews', () => {
    const store = new LeaseStore();
    const a = new LeaderElection(cfg('a'));
    const b = new LeaderElection(cfg('b'));
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
    const a = new LeaderElection(cfg('a'));
    const b = new LeaderElection(cfg('b'));
    const ra = store.read();
    const rb = store.read();
    const da = a.decide(ra.spec, 0, wall(0));
    const db = b.decide(rb.spec, 0, wall(0));
    if (da.action === 'wait' || db.action === 'wait') throw new Error('both should try');
    a.written(store.write(da.spec, ra.version), da.spec, 0);
    b.written(store.write(db.spec, rb.version), db.spec, 0);
    expect(a.isLeader()).toBe(true);
    expect(b.isLeader()).toBe(false);
  });

  it('the follower takes over only after the leader has been silent for the lease duration', () => {
    const store = new LeaseStore();
    const a = new LeaderElection(cfg('a'));
    const b = new LeaderElection(cfg('b'));
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
    const a = new LeaderElection(cfg('a'));
    const b = new LeaderElection(cfg('b'));
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
    const b = new LeaderElection(cfg('b'));
    step(b, store, 100_000);
    expect(b.isLeader()).toBe(false); // an old-looking renewTime is not proof the holder is gone
    step(b, store, 115_000);
    expect(b.isLeader()).toBe(true);
    expect(store.spec?.leaseTransitions).toBe(5);
  });

  it('releases the lease on shutdown so a successor need not wait', () => {
    const store = new LeaseStore();
    const a = new LeaderElection(cfg('a'));
    step(a, store, 0);
    const released = a.release(wall(1));
    expect(released).toMatchObject({ holderIdentity: null, leaseDurationSeconds: 1 });
    store.write(released!, store.version);
    const b = new LeaderElection(cfg('b'));
    step(b, store, 2);
    expect(b.isLeader()).toBe(true);
  });

  it('rejects a renew deadline not shorter than the lease', () => {
    expect(() => new LeaderElection({ identity: 'a', leaseDurationMs: 10, renewDeadlineMs: 10, retryPeriodMs: 1 })).toThrow(/renewDeadline/);
  });
});
