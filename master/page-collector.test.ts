import fc from 'fast-check';
import { PageCollector } from './page-collector.js';

function page(items: string[], after: string | undefined, limit: number) {
  const c = new PageCollector(after, limit);
  for (const i of items) c.offer(i);
  return c.result();
}

describe('PageCollector', () => {
  it('takes the smallest items after the cursor, in order, and says whether more follow', () => {
    const items = ['d', 'a', 'c', 'e', 'b'];
    expect(page(items, undefined, 2)).toEqual({ items: ['a', 'b'], more: true });
    expect(page(items, 'b', 2)).toEqual({ items: ['c', 'd'], more: true });
    expect(page(items, 'c', 2)).toEqual({ items: ['d', 'e'], more: false });
    expect(page(items, 'e', 2)).toEqual({ items: [], more: false });
    expect(page(items, 'bb', 10)).toEqual({ items: ['c', 'd', 'e'], more: false });
  });

  it('lists an item seen twice once (a table changing under the walk)', () => {
    expect(page(['b', 'a', 'b', 'a', 'c'], undefined, 2)).toEqual({ items: ['a', 'b'], more: true });
    expect(page(['b', 'b', 'b', 'b', 'b', 'b'], undefined, 1)).toEqual({ items: ['b'], more: false });
  });

  it('pages through any set exactly once, in order, keeping at most 2 x (limit + 1) items', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ maxLength: 6 }), { maxLength: 300 }), fc.integer({ min: 1, max: 20 }), (items, limit) => {
        const seen: string[] = [];
        let after: string | undefined;
        for (;;) {
          const c = new PageCollector(after, limit);
          let held = 0;
          for (const i of items) {
            c.offer(i);
            held = Math.max(held, (c as unknown as { buf: string[] }).buf.length);
          }
          expect(held).toBeLessThan(2 * (limit + 1));
          const r = c.result();
          seen.push(...r.items);
          if (!r.more) break;
          after = r.items[r.items.length - 1];
        }
        expect(seen).toEqual([...items].sort());
      }),
    );
  });

  it('refuses a limit that is not a positive integer', () => {
    expect(() => new PageCollector(undefined, 0)).toThrow(RangeError);
    expect(() => new PageCollector(undefined, 1.5)).toThrow(RangeError);
  });
});
