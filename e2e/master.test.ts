// store_master end to end: a real `node dist/master/main.js` process on free loopback ports,
// driven over gRPC, the fast channel (MasterClient), raw sockets and HTTP. Run `npm run build` first.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import { authHeaders, channelSocket } from './auth-helpers.js';
import * as protoLoader from '@grpc/proto-loader';
import { MasterClient, MasterConnectionError } from '../client/master-client.js';
import { FrameDecoder, FrameKind, encodeFrame } from '../common/channel-frame.js';
import { ErrorCode } from '../common/error-code.js';
import { decodeMessage, masterMethodByName, masterProtoPath } from '../common/master-proto.js';
import { MALFORMED_TARGET_REQUEST, rawHttpStatus } from './raw-http.js';

const MAIN = join(process.cwd(), 'dist', 'master', 'main.js');

interface Master {
  proc: ChildProcess;
  rpc: string;
  metrics: string;
  metadata?: string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Starts a master on port 0 everywhere and waits for its "listening" line. */
function startMaster(extra: string[] = []): Promise<Master> {
  const proc = spawn(
    process.execPath,
    [MAIN, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', '--http_metadata_server_host=127.0.0.1', '--http_metadata_server_port=0', ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /store_master listening: rpc=(\S+) metrics=(\S+)(?: metadata=(\S+))?/.exec(err);
      if (m) resolve({ proc, rpc: m[1], metrics: `http://${m[2]}`, metadata: m[3], stderr: () => err, exited });
    });
    void exited.then((code) => reject(new Error(`master exited with ${code} before listening: ${err}`)));
  });
}

/** Runs the binary to completion (for flag errors). */
function runMaster(args: string[]): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const proc = spawn(process.execPath, [MAIN, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  return new Promise((r) => proc.once('close', (code) => r({ code, stderr, stdout })));
}

async function stopMaster(m: Master): Promise<number | null> {
  m.proc.kill('SIGTERM');
  return m.exited;
}

type Unary = (req: object) => Promise<any>;
function grpcClient(address: string): { call: Record<string, Unary>; close: () => void } {
  const def = protoLoader.loadSync(masterProtoPath(), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const client = new pkg.store.MasterService(address, grpc.credentials.createInsecure(), grpcAuthOptions());
  const call: Record<string, Unary> = {};
  for (const name of Object.keys(pkg.store.MasterService.service)) {
    call[name] = (req) => new Promise((res, rej) => client[name](req, (e: Error | null, r: unknown) => (e ? rej(e) : res(r))));
  }
  return { call, close: () => client.close() };
}

async function get(url: string, init?: RequestInit): Promise<{ status: number; type: string; body: string }> {
  // writes carry the run's cluster secret (the metadata server checks them)
  const method = init?.method ?? 'GET';
  if (method !== 'GET') init = { ...init, headers: { ...(init?.headers as Record<string, string>), ...authHeaders(method, url, init?.body as string | undefined) } };
  const r = await fetch(url, init);
  return { status: r.status, type: r.headers.get('content-type') ?? '', body: await r.text() };
}

const CLIENT = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const mount = (name: string, buffer: number) => ({
  buffer,
  size: 64 * 1024 * 1024,
  segment_name: name,
  client_id: CLIENT,
  te_endpoint: `127.0.0.1:${20000 + (buffer % 1000)}`,
  protocol: 'tcp',
});
const put = (key: string, len = 4096) => ({ key, value_length: len, slice_lengths: [len], config: { replica_num: 1 } });

describe('store_master process', () => {
  let m: Master;
  let g: ReturnType<typeof grpcClient>;
  let c: MasterClient;

  beforeAll(async () => {
    m = await startMaster(['--enable_http_metadata_server', '--offload-on-evict', '--default_kv_lease_ttl=3s']);
    g = grpcClient(m.rpc);
    c = await MasterClient.connect(m.rpc, { requestTimeoutMs: 10_000 });
  });
  afterAll(async () => {
    c?.close();
    g?.close();
    if (m) expect(await stopMaster(m)).toBe(0);
  });

  it('says once that accepted-but-unbuilt flags are not implemented', () => {
    expect(m.stderr().match(/--offload_on_evict\/--offload_force_evict: used only with --enable_offload; nothing is offloaded/g)).toHaveLength(1);
  });

  it('serves a mount/put/get/remove flow over gRPC', async () => {
    expect((await g.call.Ping({ client_id: CLIENT })).status_code).toBe(ErrorCode.OK);
    const mres = await g.call.MountSegment(mount('seg-g', 0x10000000));
    expect(mres.status_code).toBe(ErrorCode.OK);
    expect(mres.segment_id).toMatch(/^[0-9a-f-]{36}$/);
    const ps = await g.call.PutStart(put('g-key'));
    expect(ps.status_code).toBe(ErrorCode.OK);
    expect(ps.replica_list).toHaveLength(1);
    expect(ps.replica_list[0].handles[0]).toMatchObject({ segment_name: 'seg-g', size: 4096 });
    expect((await g.call.GetReplicaList({ key: 'g-key' })).status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY);
    expect((await g.call.PutEnd({ key: 'g-key' })).status_code).toBe(ErrorCode.OK);
    const gr = await g.call.GetReplicaList({ key: 'g-key' });
    expect(gr.status_code).toBe(ErrorCode.OK);
    expect(gr.lease_ttl_ms).toBe(3000);
    expect(gr.replica_list[0].handles[0].buffer).toBe(ps.replica_list[0].handles[0].buffer);
    expect((await g.call.ExistKey({ key: 'g-key' })).exists).toBe(true);
    // the lease just granted refuses removal; an object nobody read is removed
    expect((await g.call.Remove({ key: 'g-key' })).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
    expect((await g.call.PutStart(put('g-unread'))).status_code).toBe(ErrorCode.OK);
    expect((await g.call.PutEnd({ key: 'g-unread' })).status_code).toBe(ErrorCode.OK);
    expect((await g.call.Remove({ key: 'g-unread' })).status_code).toBe(ErrorCode.OK);
    expect((await g.call.GetReplicaList({ key: 'g-unread' })).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect((await g.call.Remove({ key: 'g-unread' })).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
  });

  it('serves the same core over the fast channel, many calls in flight, seen by gRPC too', async () => {
    expect((await c.mountSegment(mount('seg-c', 0x20000000))).status_code).toBe(ErrorCode.OK);
    const keys = Array.from({ length: 64 }, (_, i) => `c-key-${i}`);
    const starts = await Promise.all(keys.map((k) => c.putStart(put(k, 1024))));
    expect(starts.every((s) => s.status_code === ErrorCode.OK && s.replica_list.length === 1)).toBe(true);
    const ends = await c.batchPutEnd({ keys, replica_type: 0 });
    expect(ends.results.map((r) => r.status_code)).toEqual(keys.map(() => ErrorCode.OK));
    const batch = await c.batchGetReplicaList({ keys: [...keys, 'c-missing'] });
    expect(batch.results).toHaveLength(65);
    expect(batch.results[64].status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect([mount('seg-c', 0x20000000).te_endpoint, mount('seg-g', 0x10000000).te_endpoint]).toContain(batch.results[0].replica_list[0].handles[0].te_endpoint);
    const viaGrpc = await g.call.BatchExistKey({ keys: ['c-key-0', 'c-missing'] });
    expect(viaGrpc.results.map((r: { exists: boolean }) => r.exists)).toEqual([true, false]);
    const byRegex = await c.getReplicaListByRegex({ key_regex: '^c-key-1[0-9]$' });
    expect(Object.keys(byRegex.object_map).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `c-key-1${i}`));
  });

  it('answers malformed requests with INVALID_PARAMS/INVALID_KEY and stores nothing', async () => {
    const before = (await get(`${m.metrics}/get_all_keys`)).body;
    const bad = [put('', 10), { key: 'bad-1', value_length: 10, slice_lengths: [4] }, { key: 'bad-2', value_length: 0, slice_lengths: [] }];
    for (const req of bad) {
      expect([ErrorCode.INVALID_PARAMS, ErrorCode.INVALID_KEY]).toContain((await c.putStart(req)).status_code);
      expect([ErrorCode.INVALID_PARAMS, ErrorCode.INVALID_KEY]).toContain((await g.call.PutStart(req)).status_code);
    }
    // bytes that are not a PutStartRequest at all, over gRPC ...
    const raw = new grpc.Client(m.rpc, grpc.credentials.createInsecure(), grpcAuthOptions());
    // field 1 claims 5 bytes but 1 follows: undecodable
    const garbage = Buffer.from([0x0a, 0x05, 0x61]);
    const res = await new Promise<Buffer>((resolve, reject) =>
      raw.makeUnaryRequest(
        '/store.MasterService/PutStart',
        (b: Buffer) => b,
        (b: Buffer) => b,
        garbage,
        (e, r) => (e ? reject(e) : resolve(r as Buffer)),
      ),
    );
    raw.close();
    expect(decodeMessage<{ status_code: number }>(masterMethodByName.get('PutStart')!.responseType, res).status_code).toBe(ErrorCode.INVALID_PARAMS);
    // ... and over the channel
    const reply = await rawChannel(m.rpc, [encodeFrame(FrameKind.REQUEST, 9, masterMethodByName.get('PutStart')!.index, garbage)]);
    expect(reply[0]).toMatchObject({ kind: FrameKind.RESPONSE, id: 9 });
    expect(decodeMessage<{ status_code: number }>(masterMethodByName.get('PutStart')!.responseType, reply[0].payload).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect((await get(`${m.metrics}/get_all_keys`)).body).toBe(before);
    // bad mounts change no segment
    const segsBefore = (await get(`${m.metrics}/get_all_segments`)).body;
    for (const bad of [
      { ...mount('seg-bad', 0x50000000), size: 0 },
      { ...mount('', 0x50000000) },
      { ...mount('seg-bad', 0x50000000), client_id: '' },
      { ...mount('seg-bad', 0x50000000), segment_id: 'not-a-uuid' },
    ]) {
      expect((await c.mountSegment(bad)).status_code).toBe(ErrorCode.INVALID_PARAMS);
    }
    expect((await c.mountSegment(mount('seg-c', 0x60000000))).status_code).toBe(ErrorCode.SEGMENT_ALREADY_EXISTS);
    expect((await get(`${m.metrics}/get_all_segments`)).body).toBe(segsBefore);
    // a wrong-typed field is refused by the client before anything is sent
    await expect(c.putStart({ key: 'typed', value_length: 'lots' })).rejects.toThrow(/value_length/);
    expect((await get(`${m.metrics}/get_all_keys`)).body).toBe(before);
  });

  it('refuses an unknown channel method with an ERROR frame and keeps the connection', async () => {
    const ping = masterMethodByName.get('Ping')!;
    const frames = await rawChannel(m.rpc, [encodeFrame(FrameKind.REQUEST, 1, 999, Buffer.alloc(0)), encodeFrame(FrameKind.REQUEST, 2, ping.index, Buffer.alloc(0))], 2);
    expect(frames[0]).toMatchObject({ kind: FrameKind.ERROR, id: 1 });
    expect(frames[0].payload.toString()).toMatch(/unknown method 999/);
    expect(frames[1]).toMatchObject({ kind: FrameKind.RESPONSE, id: 2 });
  });

  it('closes connections that speak neither protocol', async () => {
    const s = connect(Number(m.rpc.split(':')[1]), '127.0.0.1');
    s.write('GET / HTTP/1.1\r\n\r\n');
    s.on('data', () => undefined);
    await new Promise((r) => s.once('close', r));
  });

  it('serves every management endpoint with its status codes and content types', async () => {
    const health = await get(`${m.metrics}/health`);
    expect(health).toMatchObject({ status: 200, body: 'OK' });

    const metrics = await get(`${m.metrics}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.type).toBe('text/plain; version=0.0.4');
    expect(metrics.body).toMatch(/store_master_rpc_requests_total\{method="PutStart",transport="channel"\} [1-9]/);
    expect(metrics.body).toMatch(/store_master_rpc_requests_total\{method="PutStart",transport="grpc"\} [1-9]/);
    expect(metrics.body).toMatch(/store_master_rpc_errors_total\{method="PutStart",code="INVALID_PARAMS"\} [1-9]/);
    expect(metrics.body).toMatch(/store_master_rpc_latency_seconds_bucket\{le="0.001",method="GetReplicaList"\}/);
    expect(metrics.body).toMatch(/store_master_segments 2/);
    expect(metrics.body).toMatch(/store_master_objects 65/);
    expect(metrics.body).toMatch(/store_master_capacity_bytes 134217728/);
    expect(metrics.body).toMatch(/store_master_evictions_total 0/);
    expect(metrics.body).toMatch(/nodejs_heap_size_used_bytes/);

    const summary = await get(`${m.metrics}/metrics/summary`);
    expect(summary.status).toBe(200);
    expect(summary.type).toBe('text/plain; version=0.0.4');
    expect(summary.body).toMatch(/objects: 65/);

    const q = await get(`${m.metrics}/query_key?key=c-key-3`);
    expect(q.status).toBe(200);
    expect(q.type).toBe('text/plain; version=0.0.4');
    const desc = JSON.parse(q.body);
    expect(desc[0].transport_endpoint_).toMatch(/^127\.0\.0\.1:20\d\d\d$/);
    expect(desc[0].buffer_descriptors[0]).toMatchObject({ size_: 1024 });
    expect((await get(`${m.metrics}/query_key`)).status).toBe(400);
    const nf = await get(`${m.metrics}/query_key?key=nope`);
    expect(nf.status).toBe(404);
    expect(nf.body).toMatch(/key not found: nope/);

    const bq = await get(`${m.metrics}/batch_query_keys?keys=c-key-1,nope`);
    expect(bq.status).toBe(200);
    expect(bq.type).toBe('application/json; charset=utf-8');
    const bqBody = JSON.parse(bq.body);
    expect(bqBody.success).toBe(true);
    expect(bqBody.data['c-key-1'].ok).toBe(true);
    expect(bqBody.data['c-key-1'].values[0]).toHaveProperty('transport_endpoint_');
    expect(bqBody.data['c-key-1'].values[0]).toHaveProperty('buffer_descriptor');
    expect(bqBody.data.nope).toMatchObject({ ok: false });
    expect(typeof bqBody.data.nope.error).toBe('string');
    expect((await get(`${m.metrics}/batch_query_keys`)).status).toBe(400);

    const keys = await get(`${m.metrics}/get_all_keys`);
    expect(keys.status).toBe(200);
    expect(keys.body.trim().split('\n').sort()).toEqual([...Array.from({ length: 64 }, (_, i) => `c-key-${i}`), 'g-key'].sort());

    const segs = await get(`${m.metrics}/get_all_segments`);
    expect(segs.body.trim().split('\n').sort()).toEqual(['seg-c', 'seg-g']);

    const qs = await get(`${m.metrics}/query_segment?segment=seg-c`);
    expect(qs.status).toBe(200);
    expect(qs.body).toMatch(/^seg-c\nUsed\(bytes\): \d+\nCapacity\(bytes\): 67108864\n$/);
    expect((await get(`${m.metrics}/query_segment`)).status).toBe(400);
    expect((await get(`${m.metrics}/query_segment?segment=nope`)).status).toBe(404);

    const detail = await get(`${m.metrics}/get_segments_detail`);
    expect(detail.status).toBe(200);
    expect(detail.type).toBe('application/json; charset=utf-8');
    const d = JSON.parse(detail.body);
    expect(d.total_segments).toBe(2);
    const sc = d.segments.find((s: { segment_name: string }) => s.segment_name === 'seg-c');
    expect(sc).toMatchObject({
      client_id: CLIENT,
      base_address: '0x20000000',
      size_bytes: 67108864,
      size_human: '64.00 MB',
      te_endpoint: mount('seg-c', 0x20000000).te_endpoint,
      protocol: 'tcp',
      status: 'MOUNTED',
      allocator_capacity_bytes: 67108864,
    });
    expect(sc.segment_id).toMatch(/^[0-9a-f-]{36}$/);
    const used = d.segments.reduce((a: number, s: { allocator_used_bytes: number }) => a + s.allocator_used_bytes, 0);
    expect(used).toBeGreaterThanOrEqual(64 * 1024);
    expect(typeof sc.allocator_usage_percent).toBe('number');

    expect((await get(`${m.metrics}/nope`)).status).toBe(404);
    expect((await get(`${m.metrics}/health`, { method: 'POST' })).status).toBe(405);
  });

  it('serves the HTTP metadata store: PUT, GET, DELETE, 404 and 400', async () => {
    const url = `${m.metadata}?key=${encodeURIComponent('mooncake/ram/seg-c')}`;
    expect((await get(url)).status).toBe(404);
    expect((await get(url, { method: 'PUT', body: '{"endpoint":"127.0.0.1:20001"}' })).status).toBe(200);
    const got = await get(url);
    expect(got).toMatchObject({ status: 200, body: '{"endpoint":"127.0.0.1:20001"}' });
    expect((await get(url, { method: 'PUT', body: 'v2' })).status).toBe(200);
    expect((await get(url)).body).toBe('v2');
    expect((await get(url, { method: 'DELETE' })).status).toBe(200);
    expect((await get(url, { method: 'DELETE' })).status).toBe(404);
    expect((await get(url)).status).toBe(404);
    expect((await get(m.metadata!)).status).toBe(400);
  });

  it('answers 400 to a request target that is not a URL path, and keeps serving', async () => {
    for (const base of [m.metrics, m.metadata!]) {
      const { hostname, port } = new URL(base);
      const status = await rawHttpStatus(hostname, Number(port), MALFORMED_TARGET_REQUEST);
      expect(status).toBe('HTTP/1.1 400 Bad Request');
    }
    expect((await get(`${m.metrics}/health`)).body).toBe('OK');
    expect((await get(`${m.metadata}?key=k`)).status).toBe(404);
  });
});

/** Opens a raw channel connection, sends frames, returns the first `want` frames received. */
function rawChannel(address: string, frames: Buffer[], want = 1): Promise<Array<{ kind: number; id: number; method: number; payload: Buffer }>> {
  const [host, port] = address.split(':');
  return new Promise((resolve, reject) => {
    const got: Array<{ kind: number; id: number; method: number; payload: Buffer }> = [];
    channelSocket(`${host}:${port}`).then(({ socket: s, rest }) => {
      const dec = new FrameDecoder((kind, id, method, payload) => {
        got.push({ kind, id, method, payload: Buffer.from(payload) });
        if (got.length === want) {
          s.destroy();
          resolve(got);
        }
      });
      s.on('data', (d: Buffer) => dec.push(d));
      s.on('error', reject);
      if (rest.length > 0) dec.push(rest);
      s.write(Buffer.concat(frames));
    }, reject);
  });
}

describe('store_master lifecycle and flags', () => {
  it('rejects pending channel calls with MasterConnectionError when the master goes away, and exits 0 on SIGTERM', async () => {
    const m = await startMaster();
    const c = await MasterClient.connect(m.rpc);
    expect((await c.ping({ client_id: CLIENT })).status_code).toBe(ErrorCode.OK);
    const code = stopMaster(m);
    // calls issued until the socket closes either complete or fail with the typed error
    const outcome = await c.getReplicaList({ key: 'x' }).then(
      () => 'answered',
      (e) => e,
    );
    expect(await code).toBe(0);
    if (outcome !== 'answered') expect(outcome).toBeInstanceOf(MasterConnectionError);
    await expect(c.ping({ client_id: CLIENT })).rejects.toBeInstanceOf(MasterConnectionError);
    c.close();
  });

  it('closes idle connections after --rpc_conn_timeout_seconds; MasterClient reconnects on the next call', async () => {
    const m = await startMaster(['--rpc_conn_timeout_seconds=300ms']);
    const c = await MasterClient.connect(m.rpc);
    expect((await c.mountSegment(mount('seg-idle', 0x40000000))).status_code).toBe(ErrorCode.OK);
    // the master closes the idle connection; the next call reconnects and sees the same master
    await c.disconnected();
    expect(c.connected).toBe(false);
    const res = await c.mountSegment(mount('seg-idle', 0x40000000));
    expect(res.status_code).toBe(ErrorCode.SEGMENT_ALREADY_EXISTS);
    c.close();
    expect(await stopMaster(m)).toBe(0);
  });

  it.each([
    [['--bogus_flag=1'], /unknown flag --bogus_flag/],
    [['--rpc_port=notaport'], /--rpc_port.*integer/],
    [['--memory_allocator=slab'], /--memory_allocator.*accepted values: offset/],
    [['--allocation_strategy=best'], /--allocation_strategy.*random, free_ratio_first, cxl/],
    [['--ha_backend_type=zookeeper'], /--ha_backend_type.*etcd, redis, k8s/],
    [['--default_kv_lease_ttl=soon'], /--default_kv_lease_ttl/],
    [['--eviction_ratio=1.5'], /--eviction_ratio/],
    [['--rpc_interface=nosuchif0'], /--rpc_interface=nosuchif0: no such network interface/],
    [['--enable_snapshot'], /--snapshot_object_store_type is required/],
    [['--enable_snapshot', '--snapshot_object_store_type=s3'], /--snapshot_object_store_type=s3: the S3 object store is not built/],
    [['--rpc_thread_num=0'], /--rpc_thread_num.*>= 1/],
    [['--log_dir=/proc/version/logs'], /cannot write logs to --log_dir=\/proc\/version\/logs/],
  ])('exits 2 naming the flag for %j', async (args, message) => {
    const r = await runMaster(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('reads a YAML config file, the command line overriding it, and logs to --log_dir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'master-e2e-'));
    try {
      writeFileSync(join(dir, 'master.yaml'), 'rpc_port: 1\ndefault_kv_lease_ttl: 7s\nenable_metric_reporting: false\n');
      const m = await startMaster([`--config_path=${join(dir, 'master.yaml')}`, '--rpc_port=0', `--log_dir=${dir}`]);
      const c = await MasterClient.connect(m.rpc);
      await c.mountSegment(mount('seg-y', 0x30000000));
      await c.putStart(put('y'));
      await c.putEnd({ key: 'y', replica_type: 0 });
      expect((await c.getReplicaList({ key: 'y' })).lease_ttl_ms).toBe(7000);
      c.close();
      expect(await stopMaster(m)).toBe(0);
      const { readFileSync } = await import('node:fs');
      expect(readFileSync(join(dir, 'store_master.INFO'), 'utf8')).toMatch(/store_master listening: rpc=127\.0\.0\.1:\d+/);
      writeFileSync(join(dir, 'bad.json'), '{"rpc_port": "x"}');
      const bad = await runMaster([`--config_path=${join(dir, 'bad.json')}`]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/rpc_port \(in .*bad\.json\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('prints usage for --help and exits 0', async () => {
    const r = await runMaster(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--default_kv_lease_ttl/);
    expect(r.stdout).toMatch(/--rpc_thread_num \(int; default: min\(4, CPU cores\)\)/);
  });
});
