// End to end, real processes (docs/tiers.md "File tier"): a master with --root_fs_dir, a store
// service with a small segment, and an embedded client. Objects pushed out of memory are read back
// bit-exact from their files; a full restart of master and store services over the same directory
// serves them; a torn or flipped file is never served; awkward keys are safe file names; Remove
// deletes the file; a file over the budget is refused and deleted. Run `npm run build` first.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { distRoot, LocalCluster, type ProcessHandle } from '../sidecar/local-cluster.js';
import { have, Processes } from './ha-backends.js';
import { Client } from '../client/client.js';
import { MasterClient } from '../client/master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { keyFileName } from '../common/file-tier-name.js';
import { StoreError } from '../client/errors.js';
import { SCAN_PARALLEL } from '../master/file-tier-dir.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';

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

const hasRedis = have('redis-server');

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

    // Checksums are off in this client, yet every Put's PutEnd carried its staged copy's CRCs:
    // the master can tell this value's file from a stale one of the same key.
    const master = await MasterClient.connect(cluster!.master.rpc);
    try {
      const last = await master.getReplicaList({ key: 'obj-39' });
      expect(last.replica_list[0].replica_type).toBe(0); // still in memory
      expect(last.slice_checksums).toHaveLength(1);
    } finally {
      master.close();
    }
    // The regex query lists each object's file as a DISK replica (file {path, size}), beside any memory replica.
    const listed = await client!.queryByRegex('^obj-');
    expect(listed.size).toBe(40);
    for (const [k, replicas] of listed) {
      const files = replicas.filter((r) => r.replica_type === ReplicaType.DISK && r.file);
      expect(files.map((r) => [r.file!.path, Number(r.file!.size), r.handles.length])).toEqual([[keyFileName(k), values.get(k)!.length, 0]]);
    }
    expect(listed.get('obj-0')!.map((r) => r.replica_type)).toEqual([ReplicaType.DISK]); // held only by its file
    expect(listed.get('obj-39')!.map((r) => r.replica_type)).toEqual([ReplicaType.MEMORY, ReplicaType.DISK]); // in memory too
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
    const text = await client!.metrics!.text();
    expect(text).toMatch(new RegExp(`store_client_file_tier_files_total\\{[^}]*outcome="written"[^}]*\\} ${values.size}\\b`));
    expect(text).toMatch(/store_client_file_tier_staged_bytes(\{[^}]*\})? 0\b/);
  }, 60_000);

  it('a full restart of master and store services over the same directory serves every object from its file', async () => {
    writeFileSync(join(dir(), '.tmp-left-by-a-crash'), 'half a value'); // a writer died before its rename
    await start();
    expect(existsSync(join(dir(), '.tmp-left-by-a-crash'))).toBe(false);
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

  it("an upsert writes its value's file like a put: out of memory, and after a full restart, the new value is served, never the old", async () => {
    await start();
    const a = randomBytes(200 * KiB);
    const b = randomBytes(200 * KiB); // same length: rewritten in place in memory
    const c = randomBytes(300 * KiB); // another length
    /** Pushes every earlier object out of the 4 MiB segment (eviction, least recently used first). */
    let fills = 0;
    const pushOut = async (): Promise<void> => {
      for (let i = 0; i < 24; i++) await client!.put(`up-fill-${fills++}`, randomBytes(256 * KiB));
    };
    const inMemory = async (key: string): Promise<boolean> => ((await client!.queryByRegex(`^${key}$`)).get(key) ?? []).some((r) => r.replica_type === ReplicaType.MEMORY);
    await client!.put('up/1', a);
    await client!.fileTierIdle();
    const written = client!.fileTierCounts!.written;
    await client!.upsert('up/1', b);
    await client!.fileTierIdle();
    expect(client!.fileTierCounts).toMatchObject({ written: written + 1, refused: 0, failed: 0 });
    // The upsert's rename replaced the old file. (The master deletes the old value's file when the
    // upsert starts; when that lags behind the new file, it moves the new one aside for a moment,
    // finds it is not the old value, and links it back: hence "until".)
    const holdsB = (): boolean => {
      const onDisk = existsSync(join(dir(), keyFileName('up/1'))) ? readFileSync(join(dir(), keyFileName('up/1'))) : Buffer.alloc(0);
      return onDisk.length > b.length && onDisk.subarray(onDisk.length - b.length).equals(b);
    };
    await until(holdsB, "the upsert's file");
    // Out of memory: the file serves the new value.
    await pushOut();
    expect(await inMemory('up/1')).toBe(false);
    expect((await client!.get('up/1')).equals(b)).toBe(true);
    // An upsert of an object held only by its file, to another length; batch upserts write files too.
    await client!.upsert('up/1', c);
    const batch = await client!.upsertBatch([
      { key: 'up/2', value: a },
      { key: 'up/3', value: b },
    ]);
    expect(batch.every((r) => r.error === undefined)).toBe(true);
    await client!.fileTierIdle();
    await pushOut();
    expect(await inMemory('up/1')).toBe(false);
    expect((await client!.get('up/1')).equals(c)).toBe(true);
    expect((await client!.get('up/2')).equals(a)).toBe(true);
    // A full restart: the directory holds only the current values.
    await client!.close();
    client = undefined;
    await cluster!.stop();
    cluster = undefined;
    await start();
    expect((await client!.get('up/1')).equals(c)).toBe(true);
    expect((await client!.get('up/3')).equals(b)).toBe(true);
  }, 60_000);

  const haIt = hasRedis
    ? it
    : (((name: string, fn?: jest.ProvidesCallback, timeout?: number) =>
        it.skip(`${name} (skipped: no redis-server on PATH; apt-get install redis-server)`, fn, timeout)) as jest.It);

  /**
   * Two HA masters (redis election) over one file-tier directory and a client that follows the
   * leader; `switched(rpc)` resolves once the client remounted on the master at `rpc`.
   */
  async function haPair(backends: Processes, name: string) {
    const haRoot = backends.tempDir(`kv-file-tier-${name}-`);
    const redis = await backends.redis(name);
    const masters: (ProcessHandle & { rpc: string; metrics: string })[] = [];
    for (let i = 0; i < 2; i++) {
      const h = backends.start(`master-${i}`, process.execPath, [
        join(distRoot(), 'master/main.js'),
        '--rpc_port=0',
        '--metrics_port=0',
        '--rpc_address=127.0.0.1',
        '--enable_ha=true',
        ...redis.masterArgs,
        '--enable_metric_reporting=false',
        `--root_fs_dir=${haRoot}`,
      ]);
      const m = await h.waitFor(/store_master listening: rpc=(\S+) metrics=(\S+)/);
      masters.push({ ...h, rpc: m[1], metrics: m[2] });
    }
    const lines: string[] = [];
    let onLine: ((l: string) => void) | undefined;
    const client = await Client.setup(
      {
        local_hostname: '127.0.0.1',
        metadata_server: 'P2PHANDSHAKE',
        global_segment_size: 16 * MiB,
        local_buffer_size: 8 * MiB,
        master_server_address: redis.discovery,
      },
      { heartbeatIntervalMs: 200, log: (_l, msg) => (lines.push(msg), onLine?.(msg)) },
    );
    const leader = await Promise.race(masters.map((m, i) => m.waitFor(/HA: elected leader/).then(() => i)));
    await masters[leader].waitFor(/HA: file tier \S+ rescanned as leader/); // its own rescan, at its election
    const switched = (rpc: string): Promise<void> => {
      const followed = `remounted 1 segment(s) on master leader ${rpc}`;
      return new Promise<void>((resolve) => {
        onLine = (l) => l.includes(followed) && resolve();
        if (lines.some((l) => l.includes(followed))) resolve();
      });
    };
    return { dir: join(haRoot, name), masters, leader, follower: masters[1 - leader], client, switched };
  }

  /** Puts `n` values under `prefix`, waits for their files, and clears them from memory: only the files hold them. */
  async function fileOnly(client: Client, prefix: string, n: number): Promise<Map<string, Buffer>> {
    const vals = new Map<string, Buffer>();
    for (let i = 0; i < n; i++) vals.set(`${prefix}/${i}`, randomBytes(100 * KiB + i));
    for (const [k, v] of vals) await client.put(k, v);
    await client.fileTierIdle();
    expect(client.fileTierCounts).toMatchObject({ written: vals.size });
    expect((await client.batchReplicaClear([...vals.keys()])).sort()).toEqual([...vals.keys()].sort());
    return vals;
  }

  /**
   * Makes the next rescan of `dir` wait until release(): a rescan reads SCAN_PARALLEL headers at
   * once, in directory order, and a FIFO's open blocks until its other end is opened. FIFOs are
   * added until the first SCAN_PARALLEL names (the order the master's readdir sees too) are all
   * FIFOs, so no object's file is read before release(), which removes the other FIFOs and opens
   * the blocked ones for writing (each then reads as a bad file, left out).
   */
  function blockScan(dir: string): () => Promise<void> {
    const fifos = new Set<string>();
    const blocking = (): string[] => readdirSync(dir).slice(0, SCAN_PARALLEL);
    while (!blocking().every((n) => fifos.has(n))) {
      if (fifos.size > 4096) throw new Error(`could not put ${SCAN_PARALLEL} FIFOs first in ${dir}`);
      const name = `fifo-${fifos.size}`;
      execFileSync('mkfifo', [join(dir, name)]);
      fifos.add(name);
    }
    const first = blocking();
    return async () => {
      for (const n of fifos) if (!first.includes(n)) rmSync(join(dir, n));
      for (const n of first) await (await open(join(dir, n), 'w')).close();
    };
  }

  haIt(
    'HA: a new leader rescans the directory and serves objects held only by files (skipped without redis-server)',
    async () => {
      const backends = new Processes();
      let ha: Client | undefined;
      try {
        const pair = await haPair(backends, 'ha_tier');
        ha = pair.client;
        const vals = await fileOnly(ha, 'ha', 5);
        const rescanned = pair.follower.waitFor(/HA: file tier \S+ rescanned as leader: 5 objects/);
        const switched = pair.switched(pair.follower.rpc);
        pair.masters[pair.leader].proc.kill('SIGKILL');
        await rescanned;
        await switched;
        for (const [k, v] of vals) expect((await ha.get(k)).equals(v)).toBe(true);
      } finally {
        await ha?.close();
        await backends.stopAll();
      }
    },
    60_000,
  );

  haIt(
    "HA: reads made while a new leader's rescan runs wait for it: the files' bytes, never a false not found (skipped without redis-server)",
    async () => {
      const backends = new Processes();
      let ha: Client | undefined;
      try {
        const pair = await haPair(backends, 'ha_hold');
        ha = pair.client;
        const vals = await fileOnly(ha, 'hold', 3);
        const release = blockScan(pair.dir);
        const switched = pair.switched(pair.follower.rpc);
        pair.masters[pair.leader].proc.kill('SIGKILL');
        await switched;
        const reads = [...vals.keys()].map((k) => ha!.get(k));
        const batch = ha.getBatch([...vals.keys()]);
        const exists = ha.isExist('hold/0');
        const held = async (): Promise<number> => {
          const text = await (await fetch(`http://${pair.follower.metrics}/metrics`)).text();
          return Number(/^store_master_calls_held_for_rescan (\S+)$/m.exec(text)?.[1] ?? 0);
        };
        for (const end = Date.now() + 10_000; (await held()) < 5;) {
          if (Date.now() > end) throw new Error(`the new leader held ${await held()} calls, not the 5 made during its rescan`);
          await new Promise((r) => setTimeout(r, 20));
        }
        const rescanned = pair.follower.waitFor(/HA: file tier \S+ rescanned as leader: 3 objects/);
        await release();
        await rescanned;
        const got = await Promise.all(reads);
        got.forEach((v, i) => expect(v.equals(vals.get(`hold/${i}`)!)).toBe(true));
        (await batch).forEach((r) => expect(r.value?.equals(vals.get(r.key)!)).toBe(true));
        expect(await exists).toBe(true);
        expect(await held()).toBe(0);
      } finally {
        await ha?.close();
        await backends.stopAll();
      }
    },
    60_000,
  );

  it('a --root_fs_dir the master cannot use is a startup error: exit 2 with a clear message', async () => {
    const notADir = join(root, 'plain-file');
    writeFileSync(notADir, 'x');
    const p = spawn(process.execPath, [join(distRoot(), 'master/main.js'), '--rpc_port=0', '--metrics_port=0', '--rpc_address=127.0.0.1', `--root_fs_dir=${notADir}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = (await once(p, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toMatch(/--root_fs_dir=.*plain-file: the file tier's directory .* is not accessible to the master/);
  }, 30_000);
});
