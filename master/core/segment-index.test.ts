// The per-segment object index: membership follows every placement change exactly.
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { ObjectMeta } from './object-meta.js';
import { SegmentIndex, segmentIdsOf } from './segment-index.js';

const meta = (key: string, h: number[]) => new ObjectMeta(h, 1, ReplicaStatus.COMPLETE, 0, 0, key);
const keysOn = (index: SegmentIndex, id: number) => index.objectsOn(id).map((m) => m.key).sort();

describe('SegmentIndex', () => {
  it('lists the objects with a buffer on a segment, each once, and forgets them when told', () => {
    const index = new SegmentIndex();
    // a: replicas on segments 1 and 2; b: two slices, both on segment 2
    const a = meta('a', [1, 0, 8, 2, 0, 8]);
    const b = meta('b', [2, 1, 8, 2, 2, 8]);
    index.add(a, a.h);
    index.add(b, b.h);
    expect([keysOn(index, 1), keysOn(index, 2), keysOn(index, 3)]).toEqual([['a'], ['a', 'b'], []]);
    expect(index.entries).toBe(3);
    // a loses its replica on segment 2
    index.remove(a, a.h);
    a.h = [1, 0, 8];
    index.add(a, a.h);
    expect([keysOn(index, 1), keysOn(index, 2)]).toEqual([['a'], ['b']]);
    // a previous placement (upsert in flight) counts too
    index.remove(a, a.h);
    index.add(a, [3, 0, 16], a.h);
    expect([keysOn(index, 1), keysOn(index, 3)]).toEqual([['a'], ['a']]);
    index.remove(a, [3, 0, 16], a.h);
    index.remove(b, b.h);
    expect(index.entries).toBe(0);
  });

  it('returns a snapshot that stays valid while the index changes', () => {
    const index = new SegmentIndex();
    const objs = ['x', 'y', 'z'].map((k, i) => meta(k, [7, i, 8]));
    for (const m of objs) index.add(m, m.h);
    const seen: string[] = [];
    for (const m of index.objectsOn(7)) {
      seen.push(m.key);
      index.remove(m, m.h);
    }
    expect(seen.sort()).toEqual(['x', 'y', 'z']);
    index.dropSegment(7);
    expect(index.objectsOn(7)).toEqual([]);
  });

  it('names the distinct segments of handle arrays', () => {
    expect(segmentIdsOf([1, 0, 8, 2, 0, 8, 1, 8, 8], [3, 0, 8, 2, 8, 8])).toEqual([1, 2, 3]);
  });
});
