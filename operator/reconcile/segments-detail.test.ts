// The segment figures in status come from a real master: start store_master and a store_service
// (compiled binaries: run `npm run build` first), read /get_segments_detail with the fetcher the
// operator uses, and sum it overall and per pod address.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpSegmentsFetcher, sumSegments } from './segments-detail.js';

const procs: ChildProcess[] = [];
const freePort = () => new Promise<number>((resolve, reject) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => {
    const { port } = s.address() as net.AddressInfo;
    s.close(() => resolve(port));
  });
  s.on('error', reject);
});

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
    p.stdout!.on('data', on);
    p.stderr!.on('data', on);
    p.on('exit', (code) => reject(new Error(`${args[0]} exited ${code}:\n${out}`)));
  });
}

afterAll(() => {
  for (const p of procs) p.kill('SIGTERM');
});

describe('segments detail from a real master', () => {
  it('reads mounted segments and sums capacity, overall and for a pod address', async () => {
    const [rpc, metrics, meta, http] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    await start(['dist/master/main.js', `--rpc_port=${rpc}`, `--metrics_port=${metrics}`, '--enable_http_metadata_server=true', `--http_metadata_server_port=${meta}`, '--rpc_address=127.0.0.1'], /listening/);
    const dir = mkdtempSync(join(tmpdir(), 'store-seg-'));
    // The JSON config the operator renders for a StoreSegment pod (server role: local buffer 0).
    writeFileSync(join(dir, 'store.json'), JSON.stringify({ metadata_server: `http://127.0.0.1:${meta}/metadata`, master_server_address: `127.0.0.1:${rpc}`, global_segment_size: 64 * 2 ** 20, local_buffer_size: 0, protocol: 'tcp', device_name: '' }));
    await start(['dist/sidecar/main.js', `--config=${join(dir, 'store.json')}`, '--host=127.0.0.1', `--port=${http}`, '--local_hostname=127.0.0.1', '--shutdown_grace_seconds=0'], /store_service ready/);

    const detail = await httpSegmentsFetcher(`http://127.0.0.1:${metrics}`);
    expect(detail.total_segments).toBe(1);
    expect(detail.segments[0]).toMatchObject({ size_bytes: 64 * 2 ** 20, status: 'MOUNTED' });
    expect(sumSegments(detail)).toEqual({ segments: 1, capacityBytes: 64 * 2 ** 20, usedBytes: 0 });
    expect(sumSegments(detail, new Set(['127.0.0.1']))).toEqual({ segments: 1, capacityBytes: 64 * 2 ** 20, usedBytes: 0 });
    expect(sumSegments(detail, new Set(['10.0.0.9']))).toEqual({ segments: 0, capacityBytes: 0, usedBytes: 0 });
  });

  it('rejects with a readable error when nothing answers', async () => {
    const port = await freePort();
    await expect(httpSegmentsFetcher(`http://127.0.0.1:${port}`)).rejects.toThrow(`GET http://127.0.0.1:${port}/get_segments_detail: ECONNREFUSED`);
  });
});
