// Byte-size parsing for flags and settings: "4GB", "4gb", "512MB", "2mb", "1GiB", "64k", plain
// bytes "4096". Units are binary (1KB = 1024 bytes), as the spec's "4GB (4294967296)" shows.

const unitBytes: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
};

const pattern = /^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$/;

/** Parses `text` into a whole number of bytes; throws an Error naming the accepted forms. */
export function parseSize(text: string): number {
  const m = pattern.exec(text.trim().toLowerCase());
  if (!m) {
    throw new Error(`invalid size "${text}": expected a non-negative number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 4GB, 512MB, 4096`);
  }
  const factor = unitBytes[m[2]];
  if (factor === undefined) {
    throw new Error(`invalid size "${text}": unknown unit "${m[2]}" (accepted: B, KB, MB, GB, TB and the KiB/MiB/GiB/TiB spellings)`);
  }
  const bytes = Math.floor(Number(m[1]) * factor);
  if (!Number.isSafeInteger(bytes)) throw new Error(`invalid size "${text}": too large`);
  return bytes;
}

/** 4294967296 -> "4.00 GB": the size_human form of the management endpoints. */
export function formatSize(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${bytes} B` : `${v.toFixed(2)} ${units[i]}`;
}
