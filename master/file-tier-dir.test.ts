// The master's deletion of doomed file-tier files (file-tier-dir.ts): a file goes only while its
// name holds the value it was doomed as; a newer value's file that replaced it stays.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeHeader } from '../common/file-tier-header.js';
import { crc32c } from '../native/checksum.js';
import { deleteDoomed } from './file-tier-dir.js';

describe('deleting doomed files', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kv-doomed-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Writes the file of `key` holding `value` (one slice), as a client would. */
  const write = (key: string, value: string): number => {
    const v = Buffer.from(value);
    const sum = crc32c(v) >>> 0;
    writeFileSync(join(dir, key), Buffer.concat([encodeHeader(key, [v.length], [sum], crc32c), v]));
    return sum;
  };

  it('deletes the file while it holds the doomed value; keeps one that holds another (a newer write renamed over it)', async () => {
    const old = write('k', 'old value');
    await deleteDoomed(dir, { name: 'k', checksums: [old] });
    expect(readdirSync(dir)).toEqual([]);
    write('k', 'old value');
    const now = write('k', 'the upsert value'); // renamed over the old one before the deletion ran
    expect(now).not.toBe(old);
    await deleteDoomed(dir, { name: 'k', checksums: [old] });
    expect(readdirSync(dir)).toEqual(['k']);
    expect(readFileSync(join(dir, 'k')).subarray(-16).toString()).toBe('the upsert value');
  });

  it('a doom without checksums deletes whatever the name holds; a missing file is no error', async () => {
    write('a', 'x');
    await deleteDoomed(dir, { name: 'a', checksums: [] });
    await deleteDoomed(dir, { name: 'gone', checksums: [1] });
    expect(readdirSync(dir)).toEqual([]);
  });
});
