// Output formatting of the `store` CLI: one JSON document for --json, aligned text tables and
// human sizes otherwise. Pure string building; the commands write the strings.
import { formatSize } from '../common/size.js';

export { formatSize };

/** One JSON document, newline-terminated. */
export function jsonDoc(value: unknown): string {
  return JSON.stringify(value, null, 2) + '\n';
}

/** Rows under a header, columns padded to their widest cell; right-aligned where `right[i]`. */
export function table(header: readonly string[], rows: readonly (readonly string[])[], right: readonly boolean[] = []): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 && !right[i] ? c : right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** A percentage with one decimal, or "-" when the whole is 0. */
export function percent(part: number, whole: number): string {
  return whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : '-';
}

/** A rate per second with at most one decimal: 1234.5 -> "1,234.5". */
export function rate(perSecond: number): string {
  return perSecond.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 0 });
}

/** Bytes per second as "12.34 MB/s". */
export function byteRate(bytesPerSecond: number): string {
  return `${formatSize(Math.round(bytesPerSecond))}/s`;
}
