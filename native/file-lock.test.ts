// Advisory locks of region files: a file is deleted only when no process holds a lock on it, and
// a process's locks go with it however it dies.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lockShared, unlinkIfUnlocked } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';

beforeAll(() => ensureAddon());
const dir = mkdtempSync(join(tmpdir(), 'kvstore-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a file under a shared lock is kept; once the lock is dropped it is deleted', () => {
  const path = join(dir, 'held');
  writeFileSync(path, 'x');
  const a = lockShared(path);
  const b = lockShared(path); // shared: several holders
  expect(unlinkIfUnlocked(path)).toBe(false);
  a.release();
  expect(unlinkIfUnlocked(path)).toBe(false);
  b.release();
  b.release(); // idempotent
  expect(unlinkIfUnlocked(path)).toBe(true);
  expect(existsSync(path)).toBe(false);
  expect(unlinkIfUnlocked(path)).toBe(true); // already gone
  expect(() => lockShared(join(dir, 'missing'))).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
});

test('the lock of a process killed with SIGKILL is gone with it', async () => {
  const path = join(dir, 'child');
  writeFileSync(path, 'x');
  const holder = spawn(
    'python3',
    ['-c', `import fcntl,os,sys,time\nfd=os.open(${JSON.stringify(path)},os.O_RDONLY)\nfcntl.flock(fd,fcntl.LOCK_SH)\nprint('held',flush=True)\ntime.sleep(600)`],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()));
  expect(unlinkIfUnlocked(path)).toBe(false);
  holder.kill('SIGKILL');
  await new Promise((r) => holder.once('exit', r));
  expect(unlinkIfUnlocked(path)).toBe(true);
});
