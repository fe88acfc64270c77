import { orderReplicas, replicaPieces, transferOps, leaseDeadline, withinLease, replicaSize } from './transfer-plan.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../proto/gen/store/ReplicaStatus.js';

const h = (segment: string, buffer: number, size: number) => ({ segment_name: segment, buffer, size, status: 1, te_endpoint: `${segment}-ep`, memory_type: 0 }) as const;
const replica = (status: number, ...handles: ReturnType<typeof h>[]): ReplicaInfo__Output => ({ status, handles: [...handles] }) as ReplicaInfo__Output;

describe('replica order', () => {
  it('tries complete replicas only, own segments first, then the master order', () => {
    const a = replica(ReplicaStatus.COMPLETE, h('far', 1, 10));
    const b = replica(ReplicaStatus.PROCESSING, h('mine', 1, 10));
    const c = replica(ReplicaStatus.COMPLETE, h('mine', 2, 10));
    const d = replica(ReplicaStatus.COMPLETE, h('far2', 3, 5), h('mine', 4, 5));
    expect(orderReplicas([a, b, c, d], (s) => s === 'mine')).toEqual([c, d, a]);
    expect(orderReplicas([b], () => true)).toEqual([]);
  });

  it('reads a DISK (SSD tier) replica only after every complete MEMORY one, even its own', () => {
    const disk = { ...replica(ReplicaStatus.COMPLETE, h('mine-ssd', 1, 10)), replica_type: 1 } as ReplicaInfo__Output;
    const far = replica(ReplicaStatus.COMPLETE, h('far', 1, 10));
    expect(orderReplicas([disk, far], (s) => s === 'mine-ssd')).toEqual([far, disk]);
    expect(orderReplicas([disk], () => false)).toEqual([disk]);
  });
});

describe('pieces and transfer ops', () => {
  it('maps each slice to its handle at increasing offsets and skips local pieces', () => {
    const r = replica(ReplicaStatus.COMPLETE, h('far', 1000, 100), h('mine', 2000, 50), h('far', 3000, 30));
    const pieces = replicaPieces(r, (s) => s === 'mine', [100, 50, 30]);
    expect(pieces.map((p) => [p.offset, p.length, p.local])).toEqual([
      [0, 100, false],
      [100, 50, true],
      [150, 30, false],
    ]);
    expect(replicaSize(r)).toBe(180);
    expect(
      transferOps(
        'write',
        pieces,
        (p) => 5000 + p.offset,
        (x) => x.te_endpoint,
      ),
    ).toEqual([
      { op: 'write', endpoint: 'far-ep', remoteAddress: 1000, localAddress: 5000, length: 100 },
      { op: 'write', endpoint: 'far-ep', remoteAddress: 3000, localAddress: 5150, length: 30 },
    ]);
  });

  it('refuses a layout that does not hold the slices', () => {
    const r = replica(ReplicaStatus.INITIALIZED, h('far', 1, 10));
    expect(() => replicaPieces(r, () => false, [10, 10])).toThrow(/1 handles for 2 slices/);
    expect(() => replicaPieces(r, () => false, [11])).toThrow(/10 B handle for a 11 B slice/);
  });
});

describe('lease deadline', () => {
  it('a read is good strictly before start + ttl, and a missing ttl means the 5 s default', () => {
    expect(withinLease(1999, leaseDeadline(1000, 1000))).toBe(true);
    expect(withinLease(2000, leaseDeadline(1000, 1000))).toBe(false);
    expect(leaseDeadline(0, 0)).toBe(5000);
  });
});
