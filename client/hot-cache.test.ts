// The local hot cache (hot-cache.ts): the staleness rule (a rewritten object never hits an old
// entry), admission by the sketch, block-granular LRU, and the environment settings.
import { ErrorCode } from '../common/error-code.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { HotCache, hotCacheId, hotCacheSettings } from './hot-cache.js';

const replica = (segment: string, incarnation: number, buffer: number, size: number): ReplicaInfo__Output => ({
  status: 4,
  replica_type: 1,
  file: null,
  handles: [{ segment_name: segment, incarnation, buffer, size, status: 1, te_endpoint: '', memory_type: 2, generation: 0 }],
});

describe('hot cache', () => {
  it('never serves a stale entry: a rewrite has a new version, even at the same place with the same checksum', () => {
    const cache = new HotCache(Buffer.alloc(64), 16, 1);
    const v1 = Buffer.from('first value');
    const id1 = hotCacheId('k', replica('ssd', 7, 4096, v1.length), [111], 5)!;
    expect(cache.get('k', id1)).toBeUndefined();
    expect(cache.admit('k', id1, v1)).toBe(true);
    expect(cache.get('k', id1)).toEqual(v1);
    // rewritten in place (an upsert) with bytes of the same CRC-32C: a new version
    expect(cache.get('k', hotCacheId('k', replica('ssd', 7, 4096, v1.length), [111], 6)!)).toBeUndefined();
    // moved, or the segment registered again (a restarted store service), or a new checksum
    expect(cache.get('k', hotCacheId('k', replica('ssd', 7, 8192, v1.length), [111], 5)!)).toBeUndefined();
    expect(cache.get('k', hotCacheId('k', replica('ssd', 8, 4096, v1.length), [111], 5)!)).toBeUndefined();
    expect(cache.get('k', hotCacheId('k', replica('ssd', 7, 4096, v1.length), [222], 5)!)).toBeUndefined();
    // another key at the same place
    expect(cache.get('k2', hotCacheId('k2', replica('ssd', 7, 4096, v1.length), [111], 5)!)).toBeUndefined();
    // a value written without checksums is cached by its version alone
    expect(hotCacheId('k', replica('ssd', 7, 4096, 5), [], 5)).toBeDefined();
    // a master that gives no version (0): the checksums stand in for it; without them, not cached
    const old = hotCacheId('k', replica('ssd', 7, 4096, 5), [111], 0);
    expect(old).toBeDefined();
    expect(old).not.toBe(hotCacheId('k', replica('ssd', 7, 4096, 5), [222], 0));
    expect(hotCacheId('k', replica('ssd', 7, 4096, 5), [], 0)).toBeUndefined();
  });

  it('copies a hit into a caller buffer (getInto, batch reads); a miss there counts as one', () => {
    const cache = new HotCache(Buffer.alloc(64), 16, 1);
    const v = Buffer.from('twenty bytes of data');
    const id = hotCacheId('k', replica('ssd', 1, 0, v.length), [], 3)!;
    const out = Buffer.alloc(32, 0xff);
    expect(cache.copyInto('k', id, out)).toBe(-1);
    cache.admit('k', id, v);
    expect(cache.copyInto('k', id, out)).toBe(v.length);
    expect(out.subarray(0, v.length).equals(v)).toBe(true);
    expect(out[v.length]).toBe(0xff);
    expect(cache.stats()).toMatchObject({ hits: 1, misses: 1 });
  });

  it('admits a key only after it missed the admission threshold times', () => {
    const cache = new HotCache(Buffer.alloc(64), 16, 3);
    const id = hotCacheId('k', replica('ssd', 1, 0, 4), [1], 1)!;
    const v = Buffer.from('abcd');
    for (let i = 0; i < 2; i++) {
      expect(cache.get('k', id)).toBeUndefined();
      expect(cache.admit('k', id, v)).toBe(false);
    }
    expect(cache.get('k', id)).toBeUndefined();
    expect(cache.admit('k', id, v)).toBe(true);
    expect(cache.get('k', id)).toEqual(v);
    expect(cache.stats()).toMatchObject({ hits: 1, misses: 3, admitted: 1, rejected: 2 });
  });

  it('gives up the least recently used entries, block by block, for a new one; a value larger than the cache is refused', () => {
    const cache = new HotCache(Buffer.alloc(64), 16, 1); // 4 blocks
    const ids = ['a', 'b', 'c'].map((k) => hotCacheId(k, replica('ssd', 1, k.charCodeAt(0), 20), [1], 1)!);
    const values = ['a', 'b', 'c'].map((k) => Buffer.alloc(20, k)); // 2 blocks each, split across blocks
    ['a', 'b'].forEach((k, i) => {
      cache.get(k, ids[i]);
      expect(cache.admit(k, ids[i], values[i])).toBe(true);
    });
    expect(cache.get('a', ids[0])).toEqual(values[0]); // a is now the most recent
    cache.get('c', ids[2]);
    expect(cache.admit('c', ids[2], values[2])).toBe(true); // b goes
    expect(cache.get('b', ids[1])).toBeUndefined();
    expect(cache.get('a', ids[0])).toEqual(values[0]);
    expect(cache.get('c', ids[2])).toEqual(values[2]);
    expect(cache.stats()).toMatchObject({ evicted: 1, usedBytes: 64, capacityBytes: 64 });
    const big = hotCacheId('big', replica('ssd', 1, 999, 65), [1], 1)!;
    cache.get('big', big);
    expect(cache.admit('big', big, Buffer.alloc(65))).toBe(false);
  });

  it('reads its settings from the environment; bad values are INVALID_PARAMS naming the variable', () => {
    expect(hotCacheSettings({})).toBeUndefined();
    expect(hotCacheSettings({ MC_STORE_LOCAL_HOT_CACHE_SIZE: '8gb' })).toEqual({ capacityBytes: 8 * 1024 ** 3, blockSize: 2 * 1024 ** 2, useShm: false, admissionThreshold: 2 });
    expect(
      hotCacheSettings({
        MC_STORE_LOCAL_HOT_CACHE_SIZE: '64mb',
        MC_STORE_LOCAL_HOT_BLOCK_SIZE: '1mb',
        MC_STORE_LOCAL_HOT_CACHE_USE_SHM: '1',
        MC_STORE_LOCAL_HOT_ADMISSION_THRESHOLD: '1',
      }),
    ).toEqual({ capacityBytes: 64 * 1024 ** 2, blockSize: 1024 ** 2, useShm: true, admissionThreshold: 1 });
    for (const env of [
      { MC_STORE_LOCAL_HOT_CACHE_SIZE: 'lots' },
      { MC_STORE_LOCAL_HOT_CACHE_SIZE: '1mb', MC_STORE_LOCAL_HOT_BLOCK_SIZE: '2mb' },
      { MC_STORE_LOCAL_HOT_CACHE_SIZE: '1mb', MC_STORE_LOCAL_HOT_ADMISSION_THRESHOLD: '0' },
    ]) {
      expect(() => hotCacheSettings(env)).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_PARAMS, message: expect.stringMatching(/^MC_STORE_LOCAL_HOT_/) }));
    }
  });
});
