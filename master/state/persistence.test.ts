// Snapshots and the change log of a single master (docs/master.md "Snapshots and the change log"),
// with a real MasterCore and real files in a temporary directory: a master that stops without
// closing anything (as a SIGKILL leaves it) comes back with exactly its committed state; a torn
// last log frame, a snapshot cut short and a stray temporary file are all survived; retention,
// the backup directory and the Redis catalog (a real redis-server) keep what they should.
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, truncateSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Logger } from '../../common/logger.js';
import type { MasterCore } from '../core/master-core.js';
import { makeCore, mountReq, putObject } from '../core/master-core-fixture.js';
import type { CoreState } from '../core/state-records.js';
import { ChangeFanout } from './change-fanout.js';
import { logFileName } from './change-log.js';
import { CommitBarrier } from './commit-barrier.js';
import { Persistence, type PersistenceOptions } from './persistence.js';
import { EmbeddedCatalog, snapshotFileName } from './snapshot-store.js';
import { writeSnapshot } from './snapshot-writer.js';
import { restoreState } from './restore.js';

const MiB = 1 << 20;
const TTL = 10_000;

type Flags = PersistenceOptions['flags'];

function flags(over: Partial<Flags> = {}): Flags {
  return {
    enable_snapshot: true,
    enable_snapshot_restore: false,
    snapshot_interval_seconds: 3_600_000, // the tests take snapshots themselves
    snapshot_child_timeout_seconds: 60_000,
    snapshot_retention_count: 10,
    snapshot_catalog_store_type: 'embedded',
    snapshot_catalog_store_connstring: '',
    snapshot_backup_dir: '',
    change_log_sync: 'placement',
    cluster_id: 'test_cluster',
    ...over,
  };
}

function canonical(s: CoreState): { segments: unknown[]; objects: unknown[] } {
  return {
    segments: [...s.segments].sort((a, b) => a.name.localeCompare(b.name)),
    objects: [...s.objects].map((o) => ({ ...o, age_ms: 0 })).sort((a, b) => (a.key < b.key ? -1 : 1)),
  };
}

let now = 0;
const clock = (): number => now;
let dir: string;
let logs: string[];
const open: Persistence[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'snapshots-'));
  logs = [];
  now = 1000;
});
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(f: Flags, core = makeCore({ clientTtlMs: TTL })): Promise<{ core: MasterCore; p: Persistence; fanout: ChangeFanout; barrier: CommitBarrier }> {
  const fanout = new ChangeFanout(clock);
  const barrier = new CommitBarrier(fanout, ['PutStart', 'PutEnd', 'GetReplicaList', 'Remove']);
  const log = new Logger({ program: 't', stderr: (l) => logs.push(l) });
  const p = await Persistence.open({ flags: f, dir, log, clock, viewVersion: 1 }, core, fanout, barrier);
  open.push(p);
  return { core, p, fanout, barrier };
}

/** Mounts two segments and stores `n` objects; removes every 7th. */
function fill(core: MasterCore, n: number, prefix = 'k'): void {
  if (core.exportSegments().length === 0) {
    core.mountSegment(mountReq('a', 16 * MiB, 'ca', 0x1000_0000, 'a:1', 5), now);
    core.mountSegment(mountReq('b', 16 * MiB, 'cb', 0x2000_0000, 'b:1', 6), now);
  }
  for (let i = 0; i < n; i++) putObject(core, `${prefix}${i}`, [1000 + i, 17], now++, { replica_num: 1 + (i % 2), with_soft_pin: i % 5 === 0 });
  for (let i = 0; i < n; i += 7) core.remove({ key: `${prefix}${i}`, force: false }, now);
}

/** The change log writes once per RPC or turn (change-fanout.ts): let the turn end. */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

async function restored(): Promise<{ core: MasterCore; state: CoreState }> {
  const core = makeCore({ clientTtlMs: TTL });
  await start(flags({ enable_snapshot: false, enable_snapshot_restore: true }), core);
  return { core, state: core.exportState(now) };
}

describe('snapshots and the change log', () => {
  it('a master killed without closing anything comes back with exactly its committed state', async () => {
    const { core, p } = await start(flags());
    fill(core, 60);
    await p.snapshot();
    fill(core, 30, 'late'); // only in the log after the snapshot
    core.putStart({ key: 'unfinished', value_length: 10, slice_lengths: [10], config: { replica_num: 1, with_soft_pin: false, with_hard_pin: false, preferred_segment: '' } }, now);
    await turn();
    const expected = canonical(core.exportState(now));
    expect(expected.objects.length).toBe(60 - 9 + 30 - 5);

    const back = await restored();
    expect(canonical(back.state)).toEqual(expected);
    expect(back.core.checkIndexes()).toEqual([]);
    expect(logs.join('\n')).toMatch(/restore: snapshot 2 \+ \d+ changes from 1 log\(s\).*2 segments \(RESTORED until their owners mount them again\), 76 objects/);
  });

  it('ignores a torn last frame of the log, and a frame whose bytes are wrong, and what follows it', async () => {
    const { core } = await start(flags());
    fill(core, 20);
    await turn();
    const expected = canonical(core.exportState(now));
    const log = join(dir, logFileName(1));
    const whole = statSync(log).size;
    core.remove({ key: 'k1', force: false }, now);
    await turn();
    // A crash while writing the last frame: only its first bytes reached the file.
    truncateSync(log, whole + 5);
    let back = await restored();
    expect(canonical(back.state)).toEqual(expected);
    expect(logs.join('\n')).toMatch(/change log 1: the last 5 bytes are a torn or corrupt frame/);

    // Garbage in place of a frame (length fits, CRC does not): ignored from there on.
    truncateSync(log, whole);
    appendFileSync(log, Buffer.from([4, 0, 0, 0, 1, 2, 3, 4, 9, 9, 9, 9]));
    back = await restored();
    expect(canonical(back.state)).toEqual(expected);
  });

  it('a snapshot cut short never replaces the latest whole one', async () => {
    const { core, p } = await start(flags());
    fill(core, 40);
    await p.snapshot(); // snapshot 2, log 2 from here
    fill(core, 10, 'x');
    await turn();
    const expected = canonical(core.exportState(now));

    // A crash mid-snapshot leaves at most a temporary file (never a snapshot under its name) ...
    writeFileSync(join(dir, `${snapshotFileName(3)}.tmp`), Buffer.alloc(100, 1));
    // ... and a snapshot that gives up (its time limit) removes its temporary file.
    await expect(writeSnapshot(dir, 3, core, () => now++, { stepped: true, timeoutMs: 0, viewVersion: 1 })).rejects.toThrow(/did not finish within 0 ms/);
    expect(existsSync(join(dir, `${snapshotFileName(3)}.tmp`))).toBe(false);
    // A newer snapshot file that is not whole (as if renamed before being written): skipped.
    writeFileSync(join(dir, snapshotFileName(9)), Buffer.alloc(0));
    writeFileSync(join(dir, `${snapshotFileName(10)}.tmp`), Buffer.alloc(10));
    const back = await restored();
    expect(canonical(back.state)).toEqual(expected);
    expect(logs.join('\n')).toMatch(/restore: skipped snapshot-0000000009.snap: no header of a known format/);
    rmSync(join(dir, snapshotFileName(9)));
    // The next snapshot removes stray temporary files.
    await p.snapshot();
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('keeps --snapshot_retention_count snapshots, the logs they need, and as many backups', async () => {
    const backupDir = join(dir, 'backup');
    const { core, p } = await start(flags({ snapshot_retention_count: 2, snapshot_backup_dir: backupDir }));
    for (let i = 0; i < 4; i++) {
      fill(core, 5, `r${i}-`);
      await p.snapshot();
    }
    fill(core, 3, 'tail');
    await turn();
    const names = readdirSync(dir)
      .filter((n) => n !== 'backup')
      .sort();
    expect(names).toEqual([logFileName(4), logFileName(5), snapshotFileName(4), snapshotFileName(5)]);
    expect(readdirSync(backupDir).sort()).toEqual([snapshotFileName(4), snapshotFileName(5)]);
    const expected = canonical(core.exportState(now));
    expect(canonical((await restored()).state)).toEqual(expected);
  });

  it('a restart with snapshots on snapshots the restored state before serving, and keeps logging', async () => {
    const first = await start(flags());
    fill(first.core, 25);
    await turn();
    // Restart: restore and snapshot again, then more changes, then restore once more.
    const second = await start(flags({ enable_snapshot_restore: true }), makeCore({ clientTtlMs: TTL }));
    expect(canonical(second.core.exportState(now))).toEqual(canonical(first.core.exportState(now)));
    second.core.mountSegment(mountReq('a', 16 * MiB, 'ca', 0x1000_0000, 'a:1', 50), now); // the owner comes back
    putObject(second.core, 'after-restart', 300, now);
    await turn();
    const expected = canonical(second.core.exportState(now));
    expect(expected.segments).toContainEqual(expect.objectContaining({ name: 'a', incarnation: 50 }));
    expect(canonical((await restored()).state)).toEqual(expected);
  });
});

describe('the commit barrier', () => {
  it('answers a commit once the log has it, and a placement after a removal once the log is synced', async () => {
    const { core, fanout, barrier } = await start(flags());
    fill(core, 3);
    await turn();
    const seen: string[] = [];
    let release: (() => void) | undefined;
    barrier.add({
      committed: (seq) => (seen.push(`committed ${seq}`), undefined),
      spaceSafe: (seq) => (seen.push(`spaceSafe ${seq}`), new Promise<void>((r) => (release = r))),
    });
    const PUT_START = 0;
    const PUT_END = 1;
    const GET = 2;
    const REMOVE = 3;
    // A read never waits.
    expect(barrier.settle(GET, 'read', barrier.seq)).toBe('read');
    // A removal frees space: the next placement waits for it to be durable.
    let before = barrier.seq;
    core.remove({ key: 'k1', force: false }, now);
    const removal = fanout.seq;
    // The removal itself answers once the log has it; nobody holds the space it freed yet.
    expect(barrier.settle(REMOVE, 'removed', before)).toBe('removed');
    expect(seen).toEqual([`committed ${removal}`]);
    before = barrier.seq;
    const placed = barrier.settle(PUT_START, 'placed', before);
    expect(placed).toBeInstanceOf(Promise);
    release!();
    await expect(placed).resolves.toBe('placed');
    expect(seen).toContain(`spaceSafe ${removal}`);
    // A commit waits for its change in every durability place, not for the sync of removals.
    before = barrier.seq;
    putObject(core, 'c', 10, now);
    seen.length = 0;
    expect(barrier.settle(PUT_END, 'ok', before)).toBe('ok');
    expect(seen).toEqual([`committed ${fanout.seq}`]);
  });
});

describe('--change_log_sync', () => {
  it.each([
    ['placement', true],
    ['interval', false],
  ] as const)('%s: a placement after a removal waits for the log to be synced: %s', async (mode, waits) => {
    const { core, barrier } = await start(flags({ change_log_sync: mode }));
    fill(core, 3);
    core.remove({ key: 'k1', force: false }, now);
    const placed = barrier.settle(0, 'placed', barrier.seq);
    expect(placed instanceof Promise).toBe(waits);
    await expect(Promise.resolve(placed)).resolves.toBe('placed');
    // Either way the removal is in the file before the reply (a killed master keeps it).
    const expected = canonical(core.exportState(now));
    expect(canonical((await restored()).state)).toEqual(expected);
  });
});

function haveRedis(): boolean {
  try {
    execFileSync('which', ['redis-server'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

(haveRedis() ? describe : describe.skip)('the redis catalog (skipped without redis-server: apt-get install redis-server)', () => {
  it('lists the snapshots kept, and a restart uses that list', async () => {
    const port = await freePort();
    const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      await new Promise<void>((resolve) => {
        let out = '';
        server.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (/Ready to accept connections/.test(out)) resolve();
        });
      });
      const url = `redis://127.0.0.1:${port}`;
      const f = flags({ snapshot_catalog_store_type: 'redis', snapshot_catalog_store_connstring: url, snapshot_retention_count: 2 });
      const { core, p } = await start(f);
      fill(core, 10);
      await p.snapshot();
      fill(core, 10, 'y');
      await p.snapshot();
      await turn();
      const redis = new Redis(url);
      expect(await redis.lrange('/test_cluster/master/snapshots', 0, -1)).toEqual([snapshotFileName(2), snapshotFileName(3)]);
      // The catalog rules: a snapshot file it does not list is not used.
      await redis.rpop('/test_cluster/master/snapshots');
      const report = await restoreState(dir, new EmbeddedCatalog(dir), now);
      expect(report.snapshot).toBe(3);
      const core2 = makeCore({ clientTtlMs: TTL });
      await start(flags({ ...f, enable_snapshot: false, enable_snapshot_restore: true }), core2);
      expect(logs.join('\n')).toMatch(/restore: snapshot 2 \+ \d+ changes from 2 log\(s\) \(catalog redis/);
      expect(canonical(core2.exportState(now))).toEqual(canonical(core.exportState(now)));
      redis.disconnect();
    } finally {
      server.kill('SIGKILL');
    }
  });
});
