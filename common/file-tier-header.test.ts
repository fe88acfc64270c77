import { crc32c } from '../native/checksum.js';
import { decodeHeader, encodeHeader, HEADER_VERSION } from './file-tier-header.js';

describe('file-tier header codec', () => {
  it('round-trips key, slice lengths and checksums', () => {
    const b = encodeHeader('a/ключ', [3, 0, 70000], [1, 0, 0xffffffff], crc32c);
    const d = decodeHeader(b, crc32c);
    expect(d).toEqual({ ok: true, header: { key: 'a/ключ', sliceLengths: [3, 0, 70000], checksums: [1, 0, 0xffffffff], valueLength: 70003, headerLength: b.length } });
  });

  it('asks for more bytes while the header is incomplete, fixed part first', () => {
    const b = encodeHeader('k'.repeat(5000), [10], [7], crc32c);
    expect(decodeHeader(b.subarray(0, 10), crc32c)).toEqual({ ok: false, need: 28 });
    expect(decodeHeader(b.subarray(0, 4096), crc32c)).toEqual({ ok: false, need: b.length });
    expect(decodeHeader(b, crc32c).ok).toBe(true);
  });

  it('refuses a flipped byte anywhere in the header, a wrong magic or version', () => {
    const b = encodeHeader('key', [5, 6], [11, 12], crc32c);
    for (let i = 0; i < b.length; i++) {
      const c = Buffer.from(b);
      c[i] ^= 0x40;
      const d = decodeHeader(c, crc32c);
      expect(d.ok).toBe(false);
    }
    const v = Buffer.from(b);
    v.writeUInt16LE(HEADER_VERSION + 1, 4);
    expect(decodeHeader(v, crc32c)).toEqual({ ok: false, bad: `header version ${HEADER_VERSION + 1} (this build reads ${HEADER_VERSION})` });
    expect(decodeHeader(Buffer.alloc(64), crc32c)).toEqual({ ok: false, bad: 'no file-tier magic' });
  });
});
