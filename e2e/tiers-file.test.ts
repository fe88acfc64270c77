// End to end, real processes (docs/tiers.md "File tier"): a master with --root_fs_dir, a store
// service with a small segment, and an embedded client. Objects pushed out of memory are read back
// bit-exact from their files; a full restart of master and store services over the same directory
// serves them; a torn or flipped file is never served; awkward keys are safe file names; Remove
// deletes the file; a file over the budget is refused and deleted. Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { ErrorCode } from '../common/error-code.js';
import { keyFileName } from '../common/file-tier-name.js';
import { StoreError } from '../client/errors.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const CLUSTER = 'tiers_file';

/** Polls `cond` (a file system change has no event to await here) until true, at most `ms`. */
async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function metric(cluster: LocalCluster, name: string): Promise<number> {
  const text = await cluster.admin('/metrics');
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (!m) throw new Error(`no metric ${name}`);
  return Number(m[1]);
}

describe('file tier', () => {
  let root: string;
  let cluster: LocalCluster | undefined;
  let client: Client | undefined;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'kv-file-tier-'));
  });
  afterEach(async () => {
    await client?.close();
    client = undefined;
    await cluster?.stop();
    cluster = undefined;
  }, 30_000);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const start = async (extra: string[] = []): Promise<void> => {
    cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '4MB', masterArgs: [`--root_fs_dir=${root}`, `--cluster_id=${CLUSTER}`, ...extra] });
    client = await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }));
  };
  const dir = () => join(root, CLUSTER);
  const values = new Map<string, Buffer>();

  it('objects pushed out of memory read back bit-exact from their files, batch forms too; awkward keys are safe names', async () => {
    await start();
    const awkward = ['dir/sub/obj', '..', '.', 'ünïcødé/鍵/🚀', 'k'.repeat(300)];
    for (const k of awkward) values.set(k, randomBytes(3 * KiB + k.length));
    // 10 MiB through a 4 MiB segment: most of these leave memory.
    for (let i = 0; i < 40; i++) values.set(`obj-${i}`, randomBytes(256 * KiB + i));
    for (const [k, v] of values) await client!.put(k, v);
    await client!.fileTierIdle();
    expect(client!.fileTierCounts).toMatchObject({ written: values.size, refused: 0, failed: 0 });
    const names = readdirSync(dir());
    expect(names.sort()).toEqual([...values.keys()].map(keyFileName).sort());
    expect(existsSync(join(root, 'dir'))).toBe(false); // nothing escaped the tier's directory
    const inMemory = await metric(cluster!, 'store_master_objects');
    expect(inMemory).toBeLessThan(values.size);
    expect(await metric(cluster!, 'store_master_file_tier_objects')).toBe(values.size);
    const bytes = [...values.values()].reduce((n, v) => n + v.length, 0);
    expect(await metric(cluster!, 'store_master_file_tier_used_bytes')).toBe(bytes);
    expect(await cluster!.admin('/metrics/summary')).toMatch(/file tier: \S+ \S+ \/ 4\.00 GB \(45 objects; files written 45, refused 0, bad 0\)/);

    for (const [k, v] of values) expect((await client!.get(k)).equals(v)).toBe(true);
    const keys = [...values.keys()];
    const batch = await client!.getBatch(keys);
    batch.forEach((r, i) => expect(r.value?.equals(values.get(keys[i])!)).toBe(true));
    const target = Buffer.alloc(300 * KiB);
    expect(await client!.getInto('obj-0', target)).toBe(values.get('obj-0')!.length);
    expect(target.subarray(0, values.get('obj-0')!.length).equals(values.get('obj-0')!)).toBe(true);
    expect(await client!.isExist('obj-0')).toBe(true);
    expect(await client!.getSize('obj-1')).toBe(values.get('obj-1')!.length);
    // An object in the file tier exists: a second Put of it is refused.
    await expect(client!.put('obj-0', Buffer.from('other'))).rejects.toMatchObject({ code: ErrorCode.OBJECT_ALREADY_EXISTS });
    expect(client!.fileTierCounts!.read).toBeGreaterThan(0);
  }, 60_000);

  it('a full restart of master and store services over the same directory serves every object from its file', async () => {
    await start();
    expect(await metric(cluster!, 'store_master_objects')).toBe(0); // memory is empty: new processes
    expect(await metric(cluster!, 'store_master_file_tier_objects')).toBe(values.size);
    for (const [k, v] of values) expect((await client!.get(k)).equals(v)).toBe(true);
  }, 60_000);

  it('a torn or flipped file is never served: not found or CHECKSUM_MISMATCH, never other bytes', async () => {
    await start();
    const torn = join(dir(), keyFileName('obj-2'));
    truncateSync(torn, readFileSync(torn).length - 100);
    const flipped = join(dir(), keyFileName('obj-3'));
    const b = readFileSync(flipped);
    b[b.length - 7] ^= 0x10;
    writeFileSync(flipped, b);
    for (const key of ['obj-2', 'obj-3']) {
      const e = (await client!.get(key).then(
        () => undefined,
        (err: unknown) => err,
      )) as StoreError;
      expect(e).toBeInstanceOf(StoreError);
      expect([ErrorCode.OBJECT_NOT_FOUND, ErrorCode.CHECKSUM_MISMATCH]).toContain(e.code);
    }
    const batch = await client!.getBatch(['obj-2', 'obj-3', 'obj-4']);
    expect(batch[0].error).toBeDefined();
    expect(batch[1].error).toBeDefined();
    expect(batch[2].value?.equals(values.get('obj-4')!)).toBe(true);
    // The torn file is left out by the next rescan, and counted.
    await cluster!.stop();
    cluster = undefined;
    await client!.close();
    client = undefined;
    await start();
    expect(await metric(cluster!, 'store_master_file_tier_files_bad_total')).toBe(1);
    expect(await client!.isExist('obj-2')).toBe(false);
  }, 60_000);

  it('Remove deletes the file; RemoveByRegex the matching ones', async () => {
    await start();
    await client!.remove('dir/sub/obj');
    await until(() => !existsSync(join(dir(), keyFileName('dir/sub/obj'))), "the removed object's file to go");
    expect(await client!.isExist('dir/sub/obj')).toBe(false);
    expect(await client!.removeByRegex('^obj-1')).toBe(11); // obj-1, obj-10 .. obj-19
    await until(() => !existsSync(join(dir(), keyFileName('obj-15'))), 'the matching files to go');
    expect(existsSync(join(dir(), keyFileName('obj-20')))).toBe(true);
  }, 60_000);

  it('a file over --global_file_segment_size is refused and deleted, counted; the object still works from memory', async () => {
    rmSync(dir(), { recursive: true, force: true });
    await start(['--global_file_segment_size=1MB']);
    const a = randomBytes(600 * KiB);
    const b = randomBytes(600 * KiB);
    await client!.put('fits', a);
    await client!.fileTierIdle();
    await client!.put('too-much', b);
    await client!.fileTierIdle();
    expect(client!.fileTierCounts).toMatchObject({ written: 1, refused: 1 });
    expect(await metric(cluster!, 'store_master_file_tier_files_refused_total')).toBe(1);
    expect(await metric(cluster!, 'store_master_file_tier_objects')).toBe(1);
    await until(() => !existsSync(join(dir(), keyFileName('too-much'))), 'the refused file to go');
    expect((await client!.get('too-much')).equals(b)).toBe(true);
  }, 60_000);
});
