// The segment figures in a StoreCluster's status come from a real master: start store_master and
// a store_service (compiled binaries: run `npm run build` first), read /get_segments_detail with
// the fetcher the operator uses, and sum it overall and per pod address.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpSegmentsFetcher, sumSegments } from '../operator/reconcile/segments-detail.js';
import { freePort } from './free-port.js';
import { startMaster } from './master-process.js';

const procs: ChildProcess[] = [];

/** Starts a binary and resolves when its output contains `ready`. */
function start(args: string[], ready: RegExp): Promise<ChildProcess> {
  const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(p);
  let out = '';
  return new Promise((resolve, reject) => {
    const on = (d: Buffer) => {
      out += d;
      if (ready.test(out)) resolve(p);
    };
    p.stdout.on('data', on);
    p.stderr.on('data', on);
    p.on('exit', (code) => reject(new Error(`${args[0]} exited ${code}:\n${out}`)));
  });
}

afterAll(() => {
  for (const p of procs) p.kill('SIGTERM');
});

describe('segments detail from a real master', () => {
  it('reads mounted segments and sums capacity, overall and for a pod address', async () => {
    const meta = await freePort(); // the metadata server's port is not reported back
    const master = await startMaster(['--enable_http_metadata_server=true', `--http_metadata_server_port=${meta}`]);
    procs.push(master.proc);
    const dir = mkdtempSync(join(tmpdir(), 'store-seg-'));
    // The JSON config the operator renders for a StoreSegment pod (server role: local buffer 0).
    writeFileSync(
      join(dir, 'store.json'),
      JSON.stringify({
        metadata_server: `http://127.0.0.1:${meta}/metadata`,
        master_server_address: master.rpc,
        global_segment_size: 64 * 2 ** 20,
        local_buffer_size: 0,
        protocol: 'tcp',
        device_name: '',
      }),
    );
    await start(
      ['dist/sidecar/main.js', `--config=${join(dir, 'store.json')}`, '--host=127.0.0.1', '--port=0', '--rpc_port=0', '--local_hostname=127.0.0.1', '--shutdown_grace_seconds=0'],
      /store_service ready/,
    );

    const detail = await httpSegmentsFetcher(master.http);
    expect(detail.total_segments).toBe(1);
    expect(detail.segments[0]).toMatchObject({ size_bytes: 64 * 2 ** 20, status: 'MOUNTED' });
    expect(sumSegments(detail)).toEqual({ segments: 1, capacityBytes: 64 * 2 ** 20, usedBytes: 0, draining: 0 });
    expect(sumSegments(detail, new Set(['127.0.0.1']))).toEqual({ segments: 1, capacityBytes: 64 * 2 ** 20, usedBytes: 0, draining: 0 });
    expect(sumSegments(detail, new Set(['10.0.0.9']))).toEqual({ segments: 0, capacityBytes: 0, usedBytes: 0, draining: 0 });

    // A stopping store pod drains: its segment is UNMOUNTING for its grace period, counted apart.
    const stopping = await start(
      ['dist/sidecar/main.js', `--config=${join(dir, 'store.json')}`, '--host=127.0.0.1', '--port=0', '--rpc_port=0', '--local_hostname=127.0.0.1', '--shutdown_grace_seconds=60'],
      /store_service ready/,
    );
    expect(sumSegments(await httpSegmentsFetcher(master.http))).toMatchObject({ segments: 2, draining: 0 });
    stopping.kill('SIGTERM');
    let totals = sumSegments(await httpSegmentsFetcher(master.http));
    // the master learns of the drain through the service's unmount call: ask until it has
    for (let i = 0; i < 200 && totals.draining === 0; i++) totals = sumSegments(await httpSegmentsFetcher(master.http));
    expect(totals).toEqual({ segments: 1, capacityBytes: 64 * 2 ** 20, usedBytes: 0, draining: 1 });
    stopping.kill('SIGKILL');
  });

  it('rejects with a readable error when nothing answers', async () => {
    const port = await freePort();
    await expect(httpSegmentsFetcher(`http://127.0.0.1:${port}`)).rejects.toThrow(`GET http://127.0.0.1:${port}/get_segments_detail: ECONNREFUSED`);
  });
});
