import { fileNameKey, keyFileName, NAME_LIMIT, TEMP_PREFIX } from './file-tier-name.js';

describe('file-tier names', () => {
  it('escape every key to one safe path component and back', () => {
    const keys = ['plain-key_1', 'a/b/c', '..', '.', '.hidden', 'x..y', 'ünïcødé/ключ/鍵', 'emoji 🚀 key', 'per%cent', '~tilde', 'a\\b', 'sp ace\ttab\nnl'];
    for (const key of keys) {
      const name = keyFileName(key);
      expect(name).not.toMatch(/[/\0]/);
      expect(name.startsWith('.')).toBe(false);
      expect(name).not.toBe('..');
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255);
      expect(fileNameKey(name)).toBe(key);
    }
  });

  it('different keys get different names (case and escapes included)', () => {
    const keys = ['a', 'A', '%41', 'a/', 'a%2F', 'a.', 'a%2E'];
    expect(new Set(keys.map(keyFileName)).size).toBe(keys.length);
  });

  it('cuts a key whose escaped name passes the limit and suffixes a hash: deterministic, short, distinct', () => {
    const long = 'k'.repeat(300);
    const name = keyFileName(long);
    expect(name.length).toBeLessThanOrEqual(NAME_LIMIT);
    expect(name).toBe(keyFileName(long));
    expect(keyFileName(long + 'x')).not.toBe(name);
    expect(fileNameKey(name)).toBeUndefined(); // its key is in the file's header
    const uni = '鍵'.repeat(100); // 9 bytes each escaped: cut on an escape boundary
    const n2 = keyFileName(uni);
    expect(n2).toMatch(/^(%[0-9A-F]{2})+~[0-9a-f]{40}$/);
  });

  it('names that are not canonical escapes are not read as keys', () => {
    for (const bad of [TEMP_PREFIX + 'x', '%4', '%zz', '%41' /* "A" escaped: not canonical */, 'a.b', '', '%C3']) expect(fileNameKey(bad)).toBeUndefined();
  });
});
