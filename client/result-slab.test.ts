import { ResultSlab, RESULT_SLAB_BYTES, RESULT_SLAB_MAX_ITEM } from './result-slab.js';

describe('ResultSlab', () => {
  it('hands out non-overlapping buffers of the requested size', () => {
    const slab = new ResultSlab();
    const bufs = Array.from({ length: 40 }, (_, i) => slab.alloc(4096 + (i % 3)));
    bufs.forEach((b, i) => {
      expect(b.length).toBe(4096 + (i % 3));
      b.fill(i);
    });
    bufs.forEach((b, i) => expect(b.every((x) => x === i)).toBe(true));
  });

  it('starts every result on an 8-byte boundary', () => {
    const slab = new ResultSlab();
    for (const n of [1, 7, 13, 4096, 3]) expect(slab.alloc(n).byteOffset % 8).toBe(0);
  });

  it('gives large results a buffer of their own', () => {
    const slab = new ResultSlab();
    const big = slab.alloc(RESULT_SLAB_MAX_ITEM + 1);
    expect(big.length).toBe(RESULT_SLAB_MAX_ITEM + 1);
    expect(big.buffer.byteLength).toBeLessThan(RESULT_SLAB_BYTES);
  });

  it('opens a new slab when the current one is full, leaving old results intact', () => {
    const slab = new ResultSlab(16 * 1024, 8 * 1024);
    const a = slab.alloc(8 * 1024).fill(1);
    const b = slab.alloc(8 * 1024).fill(2);
    const c = slab.alloc(8 * 1024).fill(3);
    expect(c.buffer).not.toBe(a.buffer);
    expect(a.every((x) => x === 1) && b.every((x) => x === 2) && c.every((x) => x === 3)).toBe(true);
  });

  it('takes slabs from the source while it has room, with addresses, then falls back to its own memory', () => {
    const memory = Buffer.alloc(3 * 1024);
    let taken = 0;
    const source = {
      take(n: number) {
        if (taken + n > memory.length) return undefined;
        taken += n;
        return memory.subarray(taken - n, taken);
      },
      addressOf: (b: Buffer) => 0x9000 + b.byteOffset,
    };
    const slab = new ResultSlab(1024, 512, source);
    const a = slab.take(100);
    const b = slab.take(200);
    expect(a.out.buffer).toBe(memory.buffer);
    expect(a.address).toBe(0x9000);
    expect(b.address).toBe(0x9000 + 104); // 8-byte aligned after a
    expect(b.out.byteOffset).toBe(104);
    for (let i = 0; i < 8; i++) slab.take(512); // past the 3 source slabs
    const own = slab.take(8);
    expect(own.address).toBeUndefined();
    expect(own.out.buffer).not.toBe(memory.buffer);
    expect(slab.take(513).address).toBeUndefined(); // above maxItem: a buffer of its own
  });
});
