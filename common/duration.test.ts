import { formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it('reads every documented form in milliseconds', () => {
    expect(parseDuration('5000ms', 'ms')).toBe(5000);
    expect(parseDuration('5s', 'ms')).toBe(5000);
    expect(parseDuration('30m', 'ms')).toBe(1_800_000);
    expect(parseDuration('1h', 's')).toBe(3_600_000);
    expect(parseDuration('1.5s', 'ms')).toBe(1500);
    expect(parseDuration(' 2S ', 'ms')).toBe(2000);
  });

  it('takes a bare number in the flag unit', () => {
    expect(parseDuration('5000', 'ms')).toBe(5000);
    expect(parseDuration('10', 's')).toBe(10_000);
    expect(parseDuration('0', 's')).toBe(0);
  });

  it.each(['', 'abc', '-5s', '5 parsecs', '5x', 's', '1e3'])('rejects %j with a message naming the accepted forms', (text) => {
    expect(() => parseDuration(text, 'ms')).toThrow(/invalid duration/);
  });

  it('formats round values with the largest unit', () => {
    expect(formatDuration(5000)).toBe('5s');
    expect(formatDuration(1_800_000)).toBe('30m');
    expect(formatDuration(1500)).toBe('1500ms');
  });
});
