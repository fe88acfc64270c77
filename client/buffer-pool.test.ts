import { BufferPool, type PoolRegion } from './buffer-pool.js';
import { OffsetAllocator } from '../common/offset-allocator.js';
import { BufferExhaustedError, InvalidParamsError } from './errors.js';
import { FakeClock } from '../common/clock.js';

function bufferView(b: Buffer): (offset: number, length: number) => Buffer {
  return (offset, length) => b.subarray(offset, offset + length);
}

/** Plain memory standing for a registered region; `released` records the overflow unmaps. */
function region(address: number, size: number, released: number[] = []): PoolRegion {
  return { address, size, view: bufferView(Buffer.alloc(size)), release: () => released.push(address) };
}

function pool(size: number, extra: Partial<ConstructorParameters<typeof BufferPool>[0]> = {}) {
  return new BufferPool({ primary: region(0x10000, size), allocator: new OffsetAllocator('local', 0, size), ...extra });
}

describe('buffer pool', () => {
  it('cuts disjoint leases from the registered region and reuses released space', () => {
    const p = pool(1024);
    const a = p.tryAcquire(512)!;
    const b = p.tryAcquire(512)!;
    expect(a.address).toBeGreaterThanOrEqual(0x10000);
    expect(Math.abs(a.address - b.address)).toBeGreaterThanOrEqual(512);
    a.buffer.fill(1);
    b.buffer.fill(2);
    expect(a.buffer.every((x) => x === 1)).toBe(true);
    expect(p.tryAcquire(8)).toBeNull();
    a.release();
    expect(p.tryAcquire(512)).not.toBeNull();
  });

  it('refuses use and double release of a released lease', () => {
    const p = pool(1024);
    const a = p.tryAcquire(100)!;
    a.release();
    expect(() => a.buffer).toThrow(/used after release/);
    expect(() => a.release()).toThrow(/released twice/);
    expect(() => p.tryAcquire(0)).toThrow(InvalidParamsError);
  });

  it('maps a temporary overflow region when full and releases it with its lease', () => {
    const released: number[] = [];
    let next = 0x900000;
    const p = pool(1024, { mapOverflow: (size) => region(next++ * 0x1000, size, released) });
    const a = p.tryAcquire(1024)!;
    const big = p.tryAcquire(4096)!;
    expect(a.overflow).toBe(false);
    expect(big.overflow).toBe(true);
    expect(big.buffer.length).toBe(4096);
    expect(p.stats().overflowRegions).toBe(1);
    big.release();
    expect(released).toEqual([big.address]);
    expect(p.stats()).toMatchObject({ overflowRegions: 0, leases: 1 });
  });

  it('without overflow, a lease larger than the buffer fails at once', () => {
    expect(() => pool(1024).tryAcquire(2048)).toThrow(BufferExhaustedError);
  });

  it('caps leases by max_regions and max_bytes and serves waiters in FIFO order on release', async () => {
    const p = pool(1 << 20, { maxRegions: 2, maxBytes: 3000 });
    const a = p.tryAcquire(1000)!;
    const b = p.tryAcquire(1000)!;
    expect(p.tryAcquire(10)).toBeNull(); // max_regions
    const order: string[] = [];
    const w1 = p.acquire(1500).then((l) => (order.push('w1'), l));
    const w2 = p.acquire(10).then((l) => (order.push('w2'), l));
    a.release(); // w1 fits max_regions but 1000 + 1500 <= 3000; w2 must wait behind it
    const l1 = await w1;
    expect(p.stats().waiting).toBe(1);
    b.release();
    const l2 = await w2;
    expect(order).toEqual(['w1', 'w2']);
    expect(() => p.tryAcquire(5000)).toThrow(/max_bytes/);
    l1.release();
    l2.release();
  });

  it('a blocking acquire fails with BufferExhaustedError when its timeout fires', async () => {
    const clock = new FakeClock();
    const p = pool(1024, { clock });
    const a = p.tryAcquire(1024)!;
    const waiting = p.acquire(512, 50);
    let settled = false;
    void waiting.catch(() => (settled = true));
    await clock.advance(49);
    expect(settled).toBe(false);
    await clock.advance(1);
    await expect(waiting).rejects.toThrow(BufferExhaustedError);
    expect(p.stats().waiting).toBe(0);
    a.release();
  });

  it('close fails every waiter', async () => {
    const p = pool(64);
    p.tryAcquire(64);
    const w = p.acquire(64);
    p.close();
    await expect(w).rejects.toThrow(/closed/);
  });
});
