import { compileKeyRegex } from './key-regex.js';

describe('compileKeyRegex', () => {
  it('compiles for the linear-time engine', () => {
    expect(compileKeyRegex('^model/.*/block-[0-9]{3,5}$')?.flags).toBe('l');
    expect(compileKeyRegex('^model/.*/block-[0-9]{3,5}$')?.test('model/x/block-1234')).toBe(true);
  });

  it('returns null for an empty, malformed or non-linear pattern, or a non-string', () => {
    for (const p of ['', '(', '[a-', '(a)\\1', 'a(?=b)', 42, undefined]) expect(compileKeyRegex(p)).toBeNull();
  });
});
