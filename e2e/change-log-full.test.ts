// A real store_master whose change log lives on a file system that fills up (a 192 KiB tmpfs,
// mounted in a user and mount namespace of its own with `unshare -rm`, so no root is needed): once
// the log cannot be written, a PutEnd is answered UNAVAILABLE_IN_CURRENT_STATUS (never OK), the
// master says so in its log and in store_master_change_log_writable, later writes keep failing,
// and once space is freed (a filler file removed through /proc/<pid>/root) writes succeed again.
// Run `npm run build` first.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MasterClient } from '../client/master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { distRoot } from '../sidecar/local-cluster.js';

const MAIN = join(distRoot(), 'master', 'main.js');
const CLIENT = '00000000-0000-4000-8000-00000000c0de';
const canUnshare = spawnSync('unshare', ['-rm', 'true']).status === 0;
const ready = existsSync(MAIN);

let proc: ChildProcess | undefined;
let dir = '';
afterAll(async () => {
  if (proc && proc.exitCode === null && proc.signalCode === null) {
    proc.kill('SIGKILL');
    await once(proc, 'exit');
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function metric(http: string, name: string): Promise<number> {
  const text = await (await fetch(`http://${http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.split(' ')[1]);
}

(canUnshare && ready ? it : it.skip)(
  'a full change-log disk: PutEnd answers UNAVAILABLE_IN_CURRENT_STATUS, never OK, until there is room again (skipped without `unshare -rm` or dist/)',
  async () => {
    dir = mkdtempSync(join(tmpdir(), 'change-log-full-'));
    const snapshots = join(dir, 'snapshots');
    const script = 'mount -t tmpfs -o size=192k tmpfs "$0" && head -c 96k /dev/zero > "$0/filler" && exec "$@"';
    const args = [
      MAIN,
      '--rpc_address=127.0.0.1',
      '--rpc_port=0',
      '--metrics_port=0',
      '--enable_metric_reporting=false',
      '--enable_snapshot',
      '--snapshot_object_store_type=local',
    ];
    proc = spawn('unshare', ['-rm', 'sh', '-c', script, dir, process.execPath, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, STORE_SNAPSHOT_LOCAL_PATH: snapshots },
    });
    let err = '';
    proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const exited = once(proc, 'exit').then(() => new Error(`master exited: ${err}`));
    const listening = new Promise<RegExpExecArray>((resolve) => {
      const check = (): void => {
        const m = /store_master listening: rpc=(\S+) metrics=(\S+)/.exec(err);
        if (m) resolve(m);
        else proc!.stderr!.once('data', check);
      };
      check();
    });
    const m = await Promise.race([listening, exited.then((e) => Promise.reject(e))]);
    const c = await MasterClient.connect(m[1]);
    try {
      const mount = { buffer: 0x10000000, size: 1 << 30, segment_name: 'seg-full', client_id: CLIENT, te_endpoint: '127.0.0.1:1', protocol: 'tcp' };
      expect((await c.mountSegment(mount)).status_code).toBe(ErrorCode.OK);
      // 4 KiB keys: each commit adds about 4 KiB to the log, so the 96 KiB left fill within ~25 puts.
      const key = (i: number): string => `${String(i).padStart(6, '0')}-${'k'.repeat(4000)}`;
      const put = async (i: number): Promise<number> => {
        const s = await c.putStart({ key: key(i), value_length: 64, slice_lengths: [64], config: { replica_num: 1 } });
        if (s.status_code !== ErrorCode.OK) return s.status_code;
        return (await c.putEnd({ key: key(i), replica_type: 0 })).status_code;
      };
      let i = 0;
      let code: number = ErrorCode.OK;
      for (; i < 200 && code === ErrorCode.OK; i++) code = await put(i);
      expect(code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
      expect(i).toBeGreaterThan(5); // the log was written until the disk filled
      expect(err).toMatch(/change log changes-\d+\.log: .*ENOSPC.*not durable/);
      expect(await metric(m[2], 'store_master_change_log_writable')).toBe(0);
      // Later writes keep failing clearly.
      expect(await put(i++)).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
      expect(await put(i++)).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);

      // Room again: the queued changes are written and writes succeed.
      unlinkSync(join(`/proc/${proc.pid}/root`, dir, 'filler'));
      expect(await put(i++)).toBe(ErrorCode.OK);
      expect(await metric(m[2], 'store_master_change_log_writable')).toBe(1);
      expect(err).toMatch(/change log: writable again/);
    } finally {
      c.close();
    }
  },
  60_000,
);
