// The client's file tier against a real directory: a written file reads back bit-exact into the
// destination; torn, flipped, stale and foreign files are never served; an unusable directory is
// logged once and turns the tier off; staging is bounded (a Put waits, nothing is dropped).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode } from '../common/error-code.js';
import { keyFileName } from '../common/file-tier-name.js';
import { copyWithCrc32c, crc32c } from '../native/checksum.js';
import { ObjectNotFoundError, StoreError } from './errors.js';
import { FileTier, type FileTierDeps } from './file-tier.js';

describe('client file tier', () => {
  let dir: string;
  let reports: { key: string; checksums: number[] }[];
  let logs: string[];
  const deps = (extra: Partial<FileTierDeps> = {}): FileTierDeps => ({
    crc32c: (d) => crc32c(d),
    copyWithCrc32c: (dst, src) => copyWithCrc32c(dst, src),
    report: async (key, checksums) => {
      reports.push({ key, checksums });
      return ErrorCode.OK;
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
    await tier.stage(key, slices);
    slices[0].fill(0); // the caller reuses its buffer: the staged copy is what is written
    await tier.drain();
    expect(readdirSync(dir)).toEqual([keyFileName(key)]); // no temporary file left
    expect(reports).toEqual([{ key, checksums: [crc32c(first), 0, crc32c(slices[2])] }]);
    const out = Buffer.alloc(71_001);
    await tier.readInto(keyFileName(key), key, out, reports[0].checksums);
    expect(out.equals(Buffer.concat([first, slices[2]]))).toBe(true);
    expect(tier.counts).toMatchObject({ written: 1, read: 1, bad: 0 });
  });

  it('never serves a torn, flipped, stale or foreign file: not found or CHECKSUM_MISMATCH, counted', async () => {
    const tier = new FileTier(deps());
    await tier.setRoot(dir);
    const value = randomBytes(50_000);
    await tier.stage('k', [value]);
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
    await tier.stage('k', [Buffer.from('v')]);
    await tier.drain();
    expect(reports).toEqual([]);
    await expect(tier.readInto(keyFileName('k'), 'k', Buffer.alloc(1), [])).rejects.toBeInstanceOf(ObjectNotFoundError);
  });

  it('staging is bounded: a Put waits for room while earlier files are being written', async () => {
    const held: (() => void)[] = [];
    const tier = new FileTier(
      deps({
        stagingBytes: 100_000,
        report: (key, checksums) =>
          new Promise((resolve) => {
            reports.push({ key, checksums });
            held.push(() => resolve(ErrorCode.OK));
          }),
      }),
    );
    await tier.setRoot(dir);
    await tier.stage('a', [randomBytes(60_000)]);
    let second = false;
    const p = tier.stage('b', [randomBytes(60_000)]).then(() => (second = true));
    // 'a' is written and its report waits: 'b' cannot be staged until 'a' leaves staging.
    while (held.length === 0) await new Promise((r) => setImmediate(r));
    expect(second).toBe(false);
    expect(tier.counts.stagedBytes).toBe(60_000);
    held.shift()!();
    await p;
    expect(second).toBe(true);
    while (held.length === 0) await new Promise((r) => setImmediate(r));
    held.shift()!();
    await tier.drain();
    expect(reports.map((r) => r.key)).toEqual(['a', 'b']);
    expect(tier.counts).toMatchObject({ written: 2, stagedBytes: 0 });
  });
});
