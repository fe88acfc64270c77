// A change log that cannot be written (disk full, EIO) acknowledges nothing: the reply path through
// a real core, the fanout, the commit barrier and a real file, with the writer's calls failing
// through ChangeLog's io seam. The replies turn into UNAVAILABLE_IN_CURRENT_STATUS while writes
// fail, succeed again once they work, and the file then holds every change in order, with no torn
// frame and no gap (a restore from it equals the core).
import { fdatasync, mkdtempSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode } from '../../common/error-code.js';
import { makeCore, mountReq, putObject } from '../core/master-core-fixture.js';
import type { CoreState } from '../core/state-records.js';
import { ChangeFanout } from './change-fanout.js';
import { ChangeLog, type ChangeLogIo } from './change-log.js';
import { CommitBarrier } from './commit-barrier.js';
import { restoreState } from './restore.js';
import { EmbeddedCatalog } from './snapshot-store.js';

const MiB = 1 << 20;
const [PUT_START, PUT_END, REMOVE] = [0, 1, 2];

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'change-log-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The file system's calls, failing while `full` (a write lands half of its bytes first, as on a filling disk). */
function faultyIo(): ChangeLogIo & { full: boolean; syncFails: boolean } {
  const io = {
    full: false,
    syncFails: false,
    writeSync(fd: number, data: Buffer, offset: number, length: number): number {
      if (!io.full) return writeSync(fd, data, offset, length);
      if (length > 8) return writeSync(fd, data, offset, Math.floor(length / 2));
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    },
    fdatasync(fd: number, cb: (e: NodeJS.ErrnoException | null) => void): void {
      if (io.syncFails) setImmediate(() => cb(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })));
      else fdatasync(fd, cb);
    },
  };
  return io;
}

function canonical(s: CoreState): { segments: unknown[]; objects: unknown[] } {
  return {
    segments: [...s.segments].sort((a, b) => a.name.localeCompare(b.name)),
    objects: [...s.objects].map((o) => ({ ...o, age_ms: 0 })).sort((a, b) => (a.key < b.key ? -1 : 1)),
  };
}

function setup(): { io: ReturnType<typeof faultyIo>; log: ChangeLog; events: string[]; core: ReturnType<typeof makeCore>; barrier: CommitBarrier } {
  const now = 1000;
  const io = faultyIo();
  const events: string[] = [];
  const log = new ChangeLog(dir, 1, { failed: (e) => events.push(`failed: ${e.message}`), recovered: (n) => events.push(`recovered ${n}`) }, true, io);
  const fanout = new ChangeFanout(() => now);
  fanout.add(log);
  const barrier = new CommitBarrier(fanout, ['PutStart', 'PutEnd', 'Remove']);
  barrier.add(log);
  const core = makeCore();
  core.setChangeSink(fanout);
  core.mountSegment(mountReq('a', 16 * MiB, 'ca', 0x1000_0000, 'a:1', 5), now);
  return { io, log, events, core, barrier };
}

async function reply(barrier: CommitBarrier, method: number, before: number): Promise<number> {
  return (await barrier.settle(method, { status_code: ErrorCode.OK }, before)).status_code;
}

describe('a change log that cannot be written', () => {
  it('turns commits into UNAVAILABLE_IN_CURRENT_STATUS until it can write again, then holds every change in order', async () => {
    const { io, log, events, core, barrier } = setup();
    let before = barrier.seq;
    putObject(core, 'k0', 4096, 1000);
    expect(await reply(barrier, PUT_END, before)).toBe(ErrorCode.OK);

    io.full = true;
    before = barrier.seq;
    putObject(core, 'k1', 4096, 1000);
    expect(await reply(barrier, PUT_END, before)).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    expect(log.writable).toBe(false);
    // Later writes keep failing clearly, removals included; the failure is said once.
    before = barrier.seq;
    core.remove({ key: 'k0', force: false }, 1000);
    expect(await reply(barrier, REMOVE, before)).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    // A placement after an unwritten removal must not hand its space out.
    expect(await reply(barrier, PUT_START, barrier.seq)).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    expect(events).toEqual(['failed: ENOSPC: no space left on device, write']);
    expect(log.errors).toBeGreaterThanOrEqual(3);

    io.full = false;
    before = barrier.seq;
    putObject(core, 'k2', 4096, 1000);
    expect(await reply(barrier, PUT_END, before)).toBe(ErrorCode.OK);
    expect(log.writable).toBe(true);
    expect(events[1]).toMatch(/^recovered \d+$/);
    expect(await reply(barrier, PUT_START, barrier.seq)).toBe(ErrorCode.OK);
    log.close();

    // The half-written frames were cut off: the file replays to exactly the core's state.
    const r = await restoreState(dir, new EmbeddedCatalog(dir), 1000);
    expect(r.torn).toEqual([]);
    expect(canonical(r.image.toState(1000))).toEqual(canonical(core.exportState(1000)));
  });

  it('a failed fdatasync fails the placement waiting for it, not with a success', async () => {
    const { io, log, core, barrier } = setup();
    putObject(core, 'k0', 4096, 1000);
    let before = barrier.seq;
    core.remove({ key: 'k0', force: false }, 1000);
    expect(await reply(barrier, REMOVE, before)).toBe(ErrorCode.OK);
    io.syncFails = true;
    expect(await reply(barrier, PUT_START, barrier.seq)).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    io.syncFails = false;
    before = barrier.seq;
    expect(await reply(barrier, PUT_START, before)).toBe(ErrorCode.OK);
    log.close();
  });
});
