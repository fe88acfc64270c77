// RFC 6902 diff/apply on the rfc6902 library: applying diff(a, b) to a gives b, for hand-picked and
// generated documents; a patch that does not apply fails as a whole with a PatchError.
import fc from 'fast-check';
import { applyPatch, deepEqual, diff, PatchError, type Json } from './json-patch.js';

describe('diff', () => {
  it('emits add, remove and replace with escaped paths', () => {
    const before = { metadata: { annotations: { 'a/b': '1', 'c~d': 'x' } }, list: [1, 2, 3], keep: true };
    const after = { metadata: { annotations: { 'a/b': '2' }, labels: { l: 'v' } }, list: [1, 5], keep: true };
    expect(diff(before, after)).toEqual([
      { op: 'add', path: '/metadata/labels', value: { l: 'v' } },
      { op: 'remove', path: '/metadata/annotations/c~0d' },
      { op: 'replace', path: '/metadata/annotations/a~1b', value: '2' },
      { op: 'replace', path: '/list/1', value: 5 },
      { op: 'remove', path: '/list/2' },
    ]);
  });

  it('is empty for equal documents and ignores undefined members', () => {
    expect(diff({ a: [1, { b: null }] }, { a: [1, { b: null }] })).toEqual([]);
    expect(diff({ a: 1, b: undefined }, { a: 1 })).toEqual([]);
  });

  it('appends to arrays with "-"', () => {
    expect(diff({ c: [{ n: 'a' }] }, { c: [{ n: 'a' }, { n: 'b' }] })).toEqual([{ op: 'add', path: '/c/-', value: { n: 'b' } }]);
  });

  it('deepEqual is an empty diff: undefined members are absent', () => {
    expect(deepEqual({ a: [1, { b: 'x' }], u: undefined }, { a: [1, { b: 'x' }] })).toBe(true);
    expect(deepEqual({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(deepEqual({ a: 1 }, { a: '1' })).toBe(false);
  });

  const json: fc.Arbitrary<Json> = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), fc.integer(), fc.string(), tie('array'), tie('object')),
    array: fc.array(tie('value'), { maxLength: 4 }),
    object: fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 4 }),
  })).value as fc.Arbitrary<Json>;

  it('applyPatch(a, diff(a, b)) equals b for any two JSON objects', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 4 }), json, { maxKeys: 5 }), fc.dictionary(fc.string({ maxLength: 4 }), json, { maxKeys: 5 }), (a, b) => {
        expect(applyPatch(a, diff(a, b))).toEqual(b);
      }),
      { numRuns: 300 },
    );
  });
});

describe('applyPatch', () => {
  it('does not modify its input', () => {
    const doc = { a: { b: 1 } };
    applyPatch(doc, [{ op: 'replace', path: '/a/b', value: 2 }]);
    expect(doc).toEqual({ a: { b: 1 } });
  });

  it('refuses paths that do not resolve', () => {
    expect(() => applyPatch({ a: 1 }, [{ op: 'remove', path: '/b' }])).toThrow(PatchError);
    expect(() => applyPatch({ a: [1] }, [{ op: 'replace', path: '/a/3', value: 1 }])).toThrow('json-patch: replace /a/3 does not apply');
    expect(() => applyPatch({ a: 1 }, [{ op: 'add', path: '/x/y', value: 1 }])).toThrow('json-patch: add /x/y does not apply');
    expect(() => applyPatch({ a: 1 }, [{ op: 'test', path: '/a', value: 2 }])).toThrow('json-patch: test /a does not apply');
  });

  it('applies all or nothing, and can replace the root', () => {
    const doc = { a: 1 };
    expect(() =>
      applyPatch(doc, [
        { op: 'replace', path: '/a', value: 2 },
        { op: 'remove', path: '/b' },
      ]),
    ).toThrow(PatchError);
    expect(doc).toEqual({ a: 1 });
    expect(applyPatch(doc, [{ op: 'replace', path: '', value: [1] }])).toEqual([1]);
    expect(applyPatch({ a: { b: 1 } }, [{ op: 'move', from: '/a/b', path: '/c' }])).toEqual({ a: {}, c: 1 });
  });
});
