// WriteFence: space of given-up writes is held until the owner acks a fence that refuses their
// generation; `below` moves only forward; revoked generations stay listed while above it.
import { WriteFence } from './write-fence.js';

describe('write fence', () => {
  it('holds blocks until an ack of a fence naming their generation, then frees exactly those', () => {
    const f = new WriteFence();
    expect(f.pending).toBe(false);
    f.hold(10, 105);
    f.hold(11, 105);
    f.hold(12, 107);
    expect(f.pending).toBe(true);
    const m = f.fence(100); // writes from 100 on are still open somewhere on the segment
    expect(m).toEqual({ version: 1, below: 100, revoked: [105, 107] });
    expect(f.fence(100)).toBe(m); // nothing changed: the same version
    expect(f.ack(99)).toEqual([]); // unknown version frees nothing
    expect(f.ack(1).sort()).toEqual([10, 11, 12]);
    expect(f.quarantinedBlocks).toBe(0);
    // 105 and 107 are above the acked `below`: the owner must keep refusing them
    expect(f.fence(100).revoked).toEqual([105, 107]);
    // once the open writes are done, `below` passes them and they leave the list
    const next = f.fence(200);
    expect(next).toMatchObject({ below: 200, revoked: [] });
    f.ack(next.version);
    expect(f.pending).toBe(false);
  });

  it('a block revoked after the fence was sent waits for the next ack', () => {
    const f = new WriteFence();
    f.hold(1, 50);
    const first = f.fence(40);
    f.hold(2, 60);
    expect(f.ack(first.version)).toEqual([1]);
    expect(f.quarantinedBlocks).toBe(1);
    const second = f.fence(40);
    expect(second.revoked).toEqual([50, 60]);
    expect(f.ack(second.version)).toEqual([2]);
  });

  it('a generation below the fence is covered by `below`; `below` never moves back', () => {
    const f = new WriteFence();
    f.hold(7, 30);
    const m = f.fence(31);
    expect(m).toEqual({ version: 1, below: 31, revoked: [] });
    expect(f.ack(1)).toEqual([7]);
    f.hold(8, 40);
    expect(f.fence(20).below).toBe(31); // an older `below` than the owner already has is raised
  });
});
