// The file tier's file names (docs/tiers.md "File tier"): every object key maps to one safe path
// component under <root_fs_dir>/<cluster_id>, the same on the master and every client. Bytes of
// the key's UTF-8 form other than [A-Za-z0-9_-] are written %XX, so no name contains '/', NUL or
// a leading '.', and "." or ".." cannot occur; the mapping is reversible (fileNameKey). A name
// whose escaped form would pass NAME_MAX is cut and suffixed with a hash of the whole key: still
// one deterministic name per key, but only the key stored in the file's header gives the key back
// (which is what the master's rescan reads anyway). Temporary files start with TEMP_PREFIX, a
// character no object's name starts with.

import { createHash } from 'node:crypto';

/** Longest escaped name kept whole (bytes); NAME_MAX is 255 on Linux file systems. */
export const NAME_LIMIT = 240;
/** Start of a long key's cut name, before the '~' and the hash (cut on an escape boundary). */
const CUT_PREFIX = 160;
/** Names of files still being written (never an object's: '.' is always escaped). */
export const TEMP_PREFIX = '.tmp-';

const SAFE = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-') SAFE[c.charCodeAt(0)] = 1;
const HEX = '0123456789ABCDEF';

function escapeBytes(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += SAFE[b] ? String.fromCharCode(b) : '%' + HEX[b >> 4] + HEX[b & 15];
  return out;
}

/** The file name of `key` (a non-empty string without NUL; keys are checked before they get here). */
export function keyFileName(key: string): string {
  const escaped = escapeBytes(Buffer.from(key, 'utf8'));
  if (escaped.length <= NAME_LIMIT) return escaped;
  let cut = CUT_PREFIX;
  // Never cut inside a %XX escape.
  if (escaped[cut - 1] === '%') cut -= 1;
  else if (escaped[cut - 2] === '%') cut -= 2;
  const hash = createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 40);
  return `${escaped.slice(0, cut)}~${hash}`;
}

/**
 * The key a file name stands for; undefined for a temporary file, a hashed (long-key) name (its
 * key is in the file's header) or a name this module never makes.
 */
export function fileNameKey(name: string): string | undefined {
  if (name.length === 0 || name.startsWith(TEMP_PREFIX) || name.includes('~')) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x25) {
      const hex = name.slice(i + 1, i + 3);
      if (!/^[0-9A-F]{2}$/.test(hex)) return undefined;
      const b = parseInt(hex, 16);
      if (SAFE[b]) return undefined; // not the canonical form
      bytes.push(b);
      i += 2;
    } else if (c < 256 && SAFE[c]) bytes.push(c);
    else return undefined;
  }
  const buf = Buffer.from(bytes);
  const key = buf.toString('utf8');
  return Buffer.from(key, 'utf8').equals(buf) ? key : undefined;
}

/** A fresh temporary name in the same directory for a write of `name` (unique per writer and call). */
export function tempFileName(unique: string): string {
  return `${TEMP_PREFIX}${unique}`;
}
