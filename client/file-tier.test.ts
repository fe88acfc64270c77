// The client's file tier against a real directory: a written file reads back bit-exact into the
// destination; torn, flipped, stale and foreign files are never served; an unusable directory is
// logged once and turns the tier off; staging is bounded (a Put waits, nothing is dropped).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode } from '../common/error-code.js';
import { keyFileName } from '../common/file-tier-name.js';
import { copyWithCrc32c, crc32c } from '../native/checksum.js';
import { ObjectNotFoundError, StoreError } from './errors.js';
import { FileTier, MISSING_FILE_RETRY_MS, type FileTierDeps } from './file-tier.js';

/** A Put's staging whose PutEnd succeeded at once: the file is queued. */
async function stageNow(tier: FileTier, key: string, slices: Uint8Array[]): Promise<void> {
  (await tier.stage(key, slices))?.commit();
}

describe('client file tier', () => {
  let dir: string;
  let reports: { key: string; checksums: number[] }[];
  let logs: string[];
  const deps = (extra: Partial<FileTierDeps> = {}): FileTierDeps => ({
    crc32c: (d) => crc32c(d),
    copyWithCrc32c: (dst, src) => copyWithCrc32c(dst, src),
    report: async (files) => {
      reports.push(...files);
      return files.map(() => ErrorCode.OK);
    },
    log: (_level, msg) => logs.push(msg),
    ...extra,
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'file-tier-'));
    reports = [];
    logs = [];
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("writes header + value under the key's name, reports the slices' CRCs, and reads it back into the destination", async () => {
    const tier = new FileTier(deps());
    await tier.setRoot(dir);
    expect(tier.enabled).toBe(true);
    const slices = [randomBytes(1000), randomBytes(0), randomBytes(70_001)];
    const key = 'a/../ключ';
    const first = Buffer.from(slices[0]);
    await stageNow(tier, key, slices);
    slices[0].fill(0); // the caller reuses its buffer: the staged copy is what is written
    await tier.drain();
    expect(readdirSync(dir)).toEqual([keyFileName(key)]); // no temporary file left
    expect(reports).toEqual([{ key, checksums: [crc32c(first), 0, crc32c(slices[2])] }]);
    const out = Buffer.alloc(71_001);
    await tier.readInto(keyFileName(key), key, out, reports[0].checksums);
    expect(out.equals(Buffer.concat([first, slices[2]]))).toBe(true);
    expect(tier.counts).toMatchObject({ written: 1, read: 1, bad: 0 });
  });

  it('a file missing for a moment (the master moved it aside to check it) is looked for once more; one still missing is not found', async () => {
    const tier = new FileTier(deps());
    await tier.setRoot(dir);
    const value = randomBytes(5000);
    await stageNow(tier, 'k', [value]);
    await tier.drain();
    const path = join(dir, keyFileName('k'));
    renameSync(path, join(dir, '.tmp-aside'));
    setTimeout(() => renameSync(join(dir, '.tmp-aside'), path), MISSING_FILE_RETRY_MS / 4);
    const out = Buffer.alloc(5000);
    await tier.readInto(keyFileName('k'), 'k', out, reports[0].checksums);
    expect(out.equals(value)).toBe(true);
    rmSync(path);
    await expect(tier.readInto(keyFileName('k'), 'k', out, reports[0].checksums)).rejects.toBeInstanceOf(ObjectNotFoundError);
  });

  it('never serves a torn, flipped, stale or foreign file: not found or CHECKSUM_MISMATCH, counted', async () => {
    const tier = new FileTier(deps());
    await tier.setRoot(dir);
    const value = randomBytes(50_000);
    await stageNow(tier, 'k', [value]);
    await tier.drain();
    const path = join(dir, keyFileName('k'));
    const good = readFileSync(path);
    const sums = reports[0].checksums;
    const attempt = async (expected = sums): Promise<StoreError> => {
      const out = Buffer.alloc(value.length);
      const e = await tier.readInto(keyFileName('k'), 'k', out, expected).then(
        () => undefined,
        (err: StoreError) => err,
      );
      expect(e).toBeInstanceOf(StoreError);
      return e!;
    };
    truncateSync(path, good.length - 1);
    expect(await attempt()).toBeInstanceOf(ObjectNotFoundError);
    const flipped = Buffer.from(good);
    flipped[flipped.length - 10] ^= 1;
    writeFileSync(path, flipped);
    expect((await attempt()).code).toBe(ErrorCode.CHECKSUM_MISMATCH);
    const header = Buffer.from(good);
    header[6] ^= 1;
    writeFileSync(path, header);
    expect(await attempt()).toBeInstanceOf(ObjectNotFoundError);
    writeFileSync(path, good);
    expect((await attempt([sums[0] ^ 1])).code).toBe(ErrorCode.CHECKSUM_MISMATCH); // the master recorded another value
    rmSync(path);
    expect(await attempt()).toBeInstanceOf(ObjectNotFoundError);
    // A name that is not the key's is refused before any I/O.
    await expect(tier.readInto('../etc/passwd', 'k', Buffer.alloc(1), [])).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(tier.counts.bad).toBe(4);
  });

  it('an unusable directory is logged once: nothing written, reads refused', async () => {
    const tier = new FileTier(deps());
    const missing = join(dir, 'not-here');
    await tier.setRoot(missing);
    await tier.setRoot(missing); // the next Ping names it again: no second line
    expect(tier.enabled).toBe(false);
    expect(logs).toEqual([expect.stringContaining(`${missing} is not usable on this host`)]);
    await stageNow(tier, 'k', [Buffer.from('v')]);
    await tier.drain();
    expect(reports).toEqual([]);
    await expect(tier.readInto(keyFileName('k'), 'k', Buffer.alloc(1), [])).rejects.toBeInstanceOf(ObjectNotFoundError);
  });

  it('staging is bounded: a Put waits for room until earlier values are written, nothing dropped', async () => {
    const tier = new FileTier(deps({ stagingBytes: 100_000 }));
    await tier.setRoot(dir);
    await stageNow(tier, 'a', [randomBytes(60_000)]);
    expect(tier.counts.stagedBytes).toBe(60_000);
    // 'b' does not fit beside 'a': it is staged only once 'a' is in its file.
    const b = stageNow(tier, 'b', [randomBytes(60_000)]).then(() => readdirSync(dir).includes(keyFileName('a')));
    expect(await b).toBe(true);
    await tier.drain();
    expect(reports.map((r) => r.key).sort()).toEqual(['a', 'b']);
    expect(tier.counts).toMatchObject({ written: 2, stagedBytes: 0 });
  });

  it('a Put whose PutEnd failed drops its staged copy: no file, staging given back', async () => {
    const tier = new FileTier(deps({ stagingBytes: 100_000 }));
    await tier.setRoot(dir);
    const v = await tier.stage('failed-put', [randomBytes(60_000)]);
    expect(v!.checksums).toHaveLength(1);
    expect(tier.counts.stagedBytes).toBe(60_000);
    v!.cancel();
    v!.commit(); // too late: settled
    await tier.drain();
    expect(tier.counts.stagedBytes).toBe(0);
    expect(readdirSync(dir)).toEqual([]);
    expect(reports).toEqual([]);
  });

  it('files written while a report is on its way are reported together in the next batch', async () => {
    const held: (() => void)[] = [];
    const batches: string[][] = [];
    const tier = new FileTier(
      deps({
        report: (files) =>
          new Promise((resolve) => {
            batches.push(files.map((f) => f.key));
            held.push(() => resolve(files.map(() => ErrorCode.OK)));
          }),
      }),
    );
    await tier.setRoot(dir);
    await stageNow(tier, 'first', [randomBytes(10)]);
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    for (let i = 0; i < 6; i++) await stageNow(tier, `next-${i}`, [randomBytes(10)]);
    // Wait until all six are written (their files exist), then let the first report answer.
    // (polled: a file's appearance has no event here; a setImmediate loop would starve the fs callbacks)
    while (readdirSync(dir).filter((n) => n.startsWith('next-')).length < 6) await new Promise((r) => setTimeout(r, 5));
    let drained = false;
    const d = tier.drain().then(() => (drained = true));
    held.shift()!();
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    expect(drained).toBe(false); // the second batch is still unanswered
    held.shift()!();
    await d;
    expect(batches.map((b) => b.sort())).toEqual([['first'], ['next-0', 'next-1', 'next-2', 'next-3', 'next-4', 'next-5']]);
    expect(tier.counts.written).toBe(7);
  });
});
