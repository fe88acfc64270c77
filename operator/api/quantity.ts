// Byte quantities as the CRDs accept them: Kubernetes quantities ("64Gi" binary, "64G" decimal,
// "1.5Gi") and the spec's own spelling ("4GB" = 4 * 2^30, as the store's flags read it).

const factors: Record<string, number> = {
  '': 1,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  k: 1e3,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  KB: 2 ** 10,
  MB: 2 ** 20,
  GB: 2 ** 30,
  TB: 2 ** 40,
};

/** The CRD schema's pattern for a byte quantity (keep in sync with crds/*.yaml; a test checks). */
export const QUANTITY_PATTERN = '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kKMGTPE]|[KMGT]B)?$';
const re = new RegExp(QUANTITY_PATTERN.replace('([KMGTPE]i|[kKMGTPE]|[KMGT]B)', '(?<unit>[KMGTPE]i|[kKMGTPE]|[KMGT]B)'));

/** Bytes of a quantity, or an Error saying which forms are accepted. */
export function parseQuantity(q: number | string): number {
  if (typeof q === 'number') {
    if (!Number.isSafeInteger(q) || q < 0) throw new Error(`invalid byte quantity ${q}: expected a non-negative integer`);
    return q;
  }
  const m = re.exec(q.trim());
  if (!m) throw new Error(`invalid byte quantity "${q}": expected e.g. 4Gi, 512Mi, 64G or 4GB`);
  const bytes = Math.floor(parseFloat(q) * factors[m.groups?.unit ?? '']);
  if (!Number.isSafeInteger(bytes)) throw new Error(`invalid byte quantity "${q}": too large`);
  return bytes;
}

/** The most readable exact binary form: 17179869184 -> "16Gi", 1000 -> "1000". */
export function formatQuantity(bytes: number): string {
  for (const [u, f] of [
    ['Ei', 2 ** 60],
    ['Pi', 2 ** 50],
    ['Ti', 2 ** 40],
    ['Gi', 2 ** 30],
    ['Mi', 2 ** 20],
    ['Ki', 2 ** 10],
  ] as const) {
    if (bytes >= f && bytes % f === 0) return `${bytes / f}${u}`;
  }
  return String(bytes);
}

/** Human figure for status columns: 68719476736 -> "64.0Gi". */
export function humanBytes(bytes: number): string {
  const units = ['B', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${bytes}B` : `${v.toFixed(1)}${units[i]}`;
}
