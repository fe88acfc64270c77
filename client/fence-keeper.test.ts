// The owner's write fences (fence-keeper.ts) as seen by writes this client makes itself without
// the engine (replica copies into its own SSD files): a fence refuses them from the moment it
// arrives, and is acknowledged only once the writes started before it have ended.
import { FenceKeeper } from './fence-keeper.js';

describe('FenceKeeper and own writes', () => {
  it('refuses generations the last fence names from its arrival, and acks only after the writes in flight', async () => {
    let endWrites: (() => void) | undefined;
    const settled = new Promise<void>((r) => (endWrites = r));
    const k = new FenceKeeper({
      segment: (name) => (name === 'ssd' ? { address: 0x1000, incarnation: 3 } : undefined),
      setFence: async () => {},
      settled: () => settled,
    });
    expect(k.refuses('ssd', 5, 3)).toBe(false); // no fence yet
    k.install([{ segment_name: 'ssd', version: 1, below: 10, revoked: [12] }]);
    expect(k.refuses('ssd', 5, 3)).toBe(true); // below
    expect(k.refuses('ssd', 12, 3)).toBe(true); // revoked
    expect(k.refuses('ssd', 11, 3)).toBe(false);
    expect(k.refuses('ssd', 5, 4)).toBe(false); // another registration starts unfenced
    await new Promise((r) => setImmediate(r));
    expect(k.takeAcks()).toEqual([]); // a write started before the fence may still land
    endWrites!();
    await new Promise((r) => setImmediate(r));
    expect(k.takeAcks()).toEqual([{ segment_name: 'ssd', version: 1 }]);
  });
});
