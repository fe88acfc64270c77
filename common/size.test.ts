import { formatSize, parseSize } from './size.js';

describe('parseSize', () => {
  it('reads units in any case, binary multiples', () => {
    expect(parseSize('4GB')).toBe(4 * 1024 ** 3);
    expect(parseSize('4gb')).toBe(4 * 1024 ** 3);
    expect(parseSize('512MB')).toBe(512 * 1024 ** 2);
    expect(parseSize('2mb')).toBe(2 * 1024 ** 2);
    expect(parseSize('1GiB')).toBe(1024 ** 3);
    expect(parseSize('64k')).toBe(65536);
    expect(parseSize('1.5KB')).toBe(1536);
  });

  it('reads plain bytes', () => {
    expect(parseSize('4096')).toBe(4096);
    expect(parseSize('8589934592')).toBe(8_589_934_592);
    expect(parseSize('0')).toBe(0);
  });

  it.each(['', 'GB', '-1GB', '4 XB', 'four'])('rejects %j', (text) => {
    expect(() => parseSize(text)).toThrow(/invalid size/);
  });

  it('formats human sizes', () => {
    expect(formatSize(4 * 1024 ** 3)).toBe('4.00 GB');
    expect(formatSize(1536)).toBe('1.50 KB');
    expect(formatSize(12)).toBe('12 B');
  });
});
