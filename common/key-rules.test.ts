import fc from 'fast-check';
import { keyProblem, MAX_KEY_BYTES, MAX_SEGMENT_NAME_BYTES, segmentNameProblem, textProblem } from './key-rules.js';

/** The rule restated the slow way: code points, their UTF-8 bytes, and the control ranges. */
function reference(s: string, maxBytes: number): boolean {
  if (s.length === 0 || !s.isWellFormed()) return false;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) return false;
  }
  return Buffer.byteLength(s, 'utf8') <= maxBytes;
}

describe('the key alphabet', () => {
  it('accepts printable text of any script, with spaces, commas, slashes and quotes', () => {
    for (const k of ['a', 'model/layer-0/block 7', 'a,b', 'x=1&y=2', '"quoted"', 'tab\\t (escaped)', 'ключ', '键/值', '🙂 emoji', '\u00a0nbsp', '\ufffd', '\u{10ffff}']) {
      expect(keyProblem(k)).toBeUndefined();
    }
  });

  it('refuses control characters: C0, DEL and C1', () => {
    for (const c of [0x00, 0x09, 0x0a, 0x0d, 0x1f, 0x7f, 0x80, 0x85, 0x9f]) {
      expect(keyProblem(`a${String.fromCharCode(c)}b`)).toMatch(new RegExp(`control character U\\+${c.toString(16).toUpperCase().padStart(4, '0')} at index 1`));
    }
    expect(keyProblem('\u00a0')).toBeUndefined(); // the first character past C1
    expect(keyProblem(' ')).toBeUndefined();
  });

  it('refuses unpaired surrogates, so alias\\ud800 and alias\\udfff are not one key', () => {
    expect(keyProblem('alias\ud800')).toMatch(/unpaired surrogate U\+D800 at index 5/);
    expect(keyProblem('alias\udfff')).toMatch(/unpaired surrogate U\+DFFF at index 5/);
    expect(keyProblem('\udc00\ud800')).toMatch(/unpaired surrogate U\+DC00 at index 0/);
    expect(keyProblem('\ud800x')).toMatch(/unpaired surrogate/);
    expect(keyProblem('\ud83d\ude42')).toBeUndefined(); // a pair is one code point
  });

  it('counts the length in UTF-8 bytes: 4096 is the most', () => {
    expect(keyProblem('k'.repeat(MAX_KEY_BYTES))).toBeUndefined();
    expect(keyProblem('k'.repeat(MAX_KEY_BYTES + 1))).toMatch(/is 4097 UTF-8 bytes long; at most 4096/);
    expect(keyProblem('é'.repeat(2048))).toBeUndefined(); // 2 bytes each
    expect(keyProblem('é'.repeat(2049))).toMatch(/is 4098 UTF-8 bytes/);
    expect(keyProblem('键'.repeat(1365) + 'a')).toBeUndefined(); // 4096 bytes
    expect(keyProblem('🙂'.repeat(1024))).toBeUndefined(); // 4 bytes each
    expect(keyProblem('🙂'.repeat(1024) + 'a')).toMatch(/is 4097 UTF-8 bytes/);
  });

  it('refuses the empty string and non-strings', () => {
    expect(keyProblem('')).toBe('is empty');
    expect(keyProblem(undefined)).toMatch(/is not a string \(got undefined\)/);
    expect(keyProblem(null)).toMatch(/got null/);
    expect(keyProblem(7)).toMatch(/got number/);
  });

  it('applies to segment names with their 1,024-byte limit', () => {
    expect(segmentNameProblem('10.0.0.1:7000')).toBeUndefined();
    expect(segmentNameProblem('seg\nname')).toMatch(/control character U\+000A/);
    expect(segmentNameProblem('s'.repeat(MAX_SEGMENT_NAME_BYTES))).toBeUndefined();
    expect(segmentNameProblem('s'.repeat(MAX_SEGMENT_NAME_BYTES + 1))).toMatch(/at most 1024/);
  });

  it('agrees with a restatement of the rule on arbitrary strings', () => {
    const units = fc.oneof(
      fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
      fc.constantFrom('a', ' ', ',', '\n', '\u0085', '\ud800', '\udc00', '\ud83d\ude42', '键'),
    );
    fc.assert(
      fc.property(fc.array(units, { maxLength: 40 }), fc.integer({ min: 1, max: 64 }), (parts, max) => {
        const s = parts.join('');
        expect(textProblem(s, max) === undefined).toBe(reference(s, max));
      }),
      { numRuns: 5000 },
    );
  });
});
