// The progress line: drawn only on a terminal and when enabled, cleared at the end.
import { Progress, renderBar } from './progress.js';

function sink(isTTY: boolean) {
  const out: string[] = [];
  return { out, s: { isTTY, columns: 120, write: (x: string) => out.push(x) } };
}

describe('progress', () => {
  it('renders phase, bar, percentage, bytes and rate', () => {
    expect(renderBar('reading', 512 * 1024 * 1024, 2 ** 30, 500, 10)).toBe('reading  [#####.....]  50%  512.00 MB / 1.00 GB  1.00 GB/s');
    expect(renderBar('reading', 3 * 1024 * 1024, 0, 1000, 4)).toBe('reading  3.00 MB  3.00 MB/s'); // total unknown (stdin)
  });

  it('draws on a terminal, at most every 100 ms but always the end, and clears the line', () => {
    let t = 0;
    const { out, s } = sink(true);
    const p = new Progress(s, true, () => t);
    p.start('reading', 100);
    t = 50;
    p.update(40, 100); // too soon: not drawn
    t = 150;
    p.update(60, 100);
    p.update(100, 100); // the end is always drawn
    p.done();
    const filled = (l: string): number => /\[(#*)\.*\]/.exec(l)![1].length;
    expect(out).toHaveLength(4);
    expect(out.slice(0, 3).map(filled)).toEqual([0, 18, 30]);
    expect(out[3]).toBe('\r\x1b[K');
    expect(out[0].startsWith('\r')).toBe(true);
  });

  it('draws nothing on a pipe or when disabled', () => {
    for (const [tty, on] of [
      [false, true],
      [true, false],
    ] as const) {
      const { out, s } = sink(tty);
      const p = new Progress(s, on, () => 0);
      p.start('writing', 10);
      p.update(10, 10);
      p.done();
      expect(out).toEqual([]);
    }
  });
});
