// The pure Lease claim decision and the specs it writes.
import { claimedSpec, LeaseClaim, releasedSpec } from './lease-claim.js';

describe('LeaseClaim', () => {
  it('creates a missing Lease, renews its own, takes a free one', () => {
    const c = new LeaseClaim('me', 15_000);
    expect(c.decide(undefined, 0)).toEqual({ do: 'create' });
    expect(c.decide({ holder: 'me', durationSeconds: 15, version: '3' }, 0)).toEqual({ do: 'renew' });
    expect(c.decide({ holder: '', durationSeconds: 1, version: '4' }, 0)).toEqual({ do: 'take' });
    expect(c.decide({ holder: null, version: '5' }, 0)).toEqual({ do: 'take' });
  });

  it("waits out another holder's duration from when it first saw the record, restarting on every change", () => {
    const c = new LeaseClaim('me', 15_000);
    expect(c.decide({ holder: 'x', durationSeconds: 10, version: '1' }, 1_000)).toEqual({ do: 'wait', holder: 'x' });
    expect(c.decide({ holder: 'x', durationSeconds: 10, version: '1' }, 10_999)).toEqual({ do: 'wait', holder: 'x' });
    expect(c.decide({ holder: 'x', durationSeconds: 10, version: '2' }, 11_000)).toEqual({ do: 'wait', holder: 'x' }); // renewed
    expect(c.decide({ holder: 'x', durationSeconds: 10, version: '2' }, 20_999)).toEqual({ do: 'wait', holder: 'x' });
    expect(c.decide({ holder: 'x', durationSeconds: 10, version: '2' }, 21_000)).toEqual({ do: 'take' });
  });

  it('uses its own duration when the Lease names none, and refuses an empty identity', () => {
    const c = new LeaseClaim('me', 5_000);
    c.decide({ holder: 'x', version: '1' }, 0);
    expect(c.decide({ holder: 'x', version: '1' }, 5_000)).toEqual({ do: 'take' });
    expect(() => new LeaseClaim('', 5_000)).toThrow(/identity/);
  });
});

describe('claim specs', () => {
  const held = { holderIdentity: 'x', leaseDurationSeconds: 15, acquireTime: 't0', renewTime: 't1', leaseTransitions: 2, strategy: 'OldestEmulationVersion' };
  it('create starts at 0 transitions; renew keeps acquireTime and transitions; take counts a transition', () => {
    expect(claimedSpec('create', undefined, 'me', 15, 'now')).toEqual({
      holderIdentity: 'me',
      leaseDurationSeconds: 15,
      acquireTime: 'now',
      renewTime: 'now',
      leaseTransitions: 0,
    });
    expect(claimedSpec('renew', { ...held, holderIdentity: 'me' }, 'me', 20, 'now')).toEqual({ ...held, holderIdentity: 'me', leaseDurationSeconds: 20, renewTime: 'now' });
    expect(claimedSpec('take', held, 'me', 15, 'now')).toEqual({ ...held, holderIdentity: 'me', acquireTime: 'now', renewTime: 'now', leaseTransitions: 3 });
  });

  it('a release leaves no holder and a 1 s duration', () => {
    expect(releasedSpec(held, 'now')).toEqual({ ...held, holderIdentity: '', leaseDurationSeconds: 1, renewTime: 'now' });
  });
});
