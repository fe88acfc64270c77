// End to end for the store service's REST mount API (spec section C) and /metrics, with a real
// store_master and store_service processes: every endpoint and field, every refusal (400 with
// {"status":"error","error":...}, nothing mounted or mapped after a refusal), objects placed in
// mounted segments, unmount with a grace period (readable, closed to new objects, then gone), an
// 8 GiB sparse segment used at both ends without touching its pages, and SIGTERM's graceful
// unmount (a read granted before the final unmount still completes). Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { MasterClient } from '../client/master-client.js';
import { ObjectNotFoundError } from '../client/errors.js';
import { mapMemory, TransferEngine, type MemoryRegion } from '../native/index.js';
import { authHeaders } from './auth-helpers.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
let cluster: LocalCluster;
let svc: StoreServiceProcess;
let client: Client;
const shmName = `kvstore-rest-test-${process.pid}`;
let shm: MemoryRegion;

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 0, segmentSize: '64MB' });
  svc = await cluster.addService(['--max_segment_size=16MB']);
  client = await Client.setup(cluster.clientConfig({ local_buffer_size: 32 * MiB }));
  // A named shm object of 20 MiB, as an application would create it before /api/mount_shm.
  shm = mapMemory({ kind: 'shm', name: shmName, size: 20 * MiB, create: true });
}, 60_000);

afterAll(async () => {
  await client?.close();
  await cluster?.stop();
  shm?.release();
  rmSync(`/dev/shm/${shmName}`, { force: true });
}, 30_000);

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

async function post(path: string, body: unknown, contentType = 'application/json', target = svc): Promise<Reply> {
  const url = `http://${target.http}${path}`;
  const text0 = typeof body === 'string' ? body : JSON.stringify(body);
  // signed with the run's cluster secret (e2e/global-secret.ts)
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': contentType, ...authHeaders('POST', url, text0) }, body: text0 });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
}

/** A refusal: HTTP 400, {"status":"error","error": matching `pattern`}. */
async function refused(path: string, body: unknown, pattern: RegExp, contentType?: string): Promise<void> {
  const r = await post(path, body, contentType);
  expect(r).toEqual({ status: 400, body: { status: 'error', error: expect.stringMatching(pattern) } });
}

interface SegmentRow {
  name: string;
  id: string;
  address: number;
  size: number;
  state: string;
  origin: string;
  location: string;
}

async function segments(target = svc): Promise<SegmentRow[]> {
  const res = await fetch(`http://${target.http}/segments`);
  return ((await res.json()) as { segments: SegmentRow[] }).segments;
}

async function masterSegments(): Promise<string[]> {
  return (await cluster.admin('/get_all_segments')).split('\n').filter(Boolean).sort();
}

/** A gauge's value from the service's /metrics. */
async function gauge(name: string, target = svc): Promise<number> {
  const text = await (await fetch(`http://${target.http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`));
  if (!line) throw new Error(`${name} not in /metrics`);
  return Number(line.split(' ').pop());
}

/** The handles of `key`'s first replica (no lease taken). */
async function handlesOf(key: string): Promise<{ segment_name: string; buffer: number; size: number }[]> {
  const m = await client.queryByRegex(`^${key}$`);
  return m.get(key)![0].handles.map((h) => ({ segment_name: h.segment_name, buffer: Number(h.buffer), size: Number(h.size) }));
}

describe('POST /api/mount', () => {
  it('maps memory in the process as segments of at most --max_segment_size, allocated_size rounded up to 4 KiB', async () => {
    const before = await masterSegments();
    const r = await post('/api/mount', { size: 40 * MiB + 1, protocol: 'tcp', location: 'numa0' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'success', segment_ids: expect.any(Array), allocated_size: 40 * MiB + 4096 });
    const ids = r.body.segment_ids as string[];
    expect(ids).toHaveLength(3);
    const rows = (await segments()).filter((s) => ids.includes(s.id));
    expect(rows.map((s) => s.size).sort((a, b) => a - b)).toEqual([8 * MiB + 4096, 16 * MiB, 16 * MiB]);
    for (const s of rows) expect(s).toMatchObject({ origin: 'memory', location: 'numa0', state: 'mounted', name: expect.stringMatching(new RegExp(`^${svc.endpoint}/\\d+$`)) });
    expect(await masterSegments()).toEqual([...before, ...rows.map((s) => s.name)].sort());
    // and back: all three in one request
    expect(await post('/api/unmount', { segment_ids: ids })).toEqual({ status: 200, body: { status: 'success' } });
    expect(await masterSegments()).toEqual(before);
    expect((await segments()).filter((s) => ids.includes(s.id))).toEqual([]);
  });

  it('objects put with preferred_segment land in a mounted segment and read back', async () => {
    const r = await post('/api/mount', { size: 4 * MiB });
    const [id] = r.body.segment_ids as string[];
    const seg = (await segments()).find((s) => s.id === id)!;
    const value = randomBytes(256 * 1024);
    await client.put('rest-pref', value, { preferred_segment: seg.name });
    const [h] = await handlesOf('rest-pref');
    expect(h.segment_name).toBe(seg.name);
    expect(h.buffer).toBeGreaterThanOrEqual(seg.address);
    expect(h.buffer + h.size).toBeLessThanOrEqual(seg.address + seg.size);
    expect((await client.get('rest-pref')).equals(value)).toBe(true);
    expect(await post('/api/unmount', { segment_ids: id })).toEqual({ status: 200, body: { status: 'success' } });
    await expect(client.get('rest-pref')).rejects.toBeInstanceOf(ObjectNotFoundError);
  });
});

describe('with P2PHANDSHAKE metadata', () => {
  it('mounts further segments (named <endpoint>/<n>) and serves objects from them', async () => {
    const p2p = await cluster.addService(['--metadata_server=P2PHANDSHAKE', '--global_segment_size=16MB']);
    const r = await post('/api/mount', { size: 2 * MiB }, 'application/json', p2p);
    expect(r.status).toBe(200);
    const [id] = r.body.segment_ids as string[];
    const seg = (await segments(p2p)).find((s) => s.id === id)!;
    expect(seg.name).toBe(`${p2p.endpoint}/1`);
    const value = randomBytes(300_000);
    await client.put('p2p-obj', value, { preferred_segment: seg.name });
    expect((await handlesOf('p2p-obj'))[0].segment_name).toBe(seg.name);
    expect((await client.get('p2p-obj')).equals(value)).toBe(true);
    expect((await post('/api/unmount', { segment_ids: id }, 'application/json', p2p)).status).toBe(200);
  });
});

describe('POST /api/mount_shm', () => {
  it('mounts a named shm object from an offset: objects written to the segment are in the object at offset + their place', async () => {
    const r = await post('/api/mount_shm', { name: `/${shmName}`, size: 4 * MiB, offset: 8 * MiB, location: 'dram' });
    expect(r).toEqual({ status: 200, body: { status: 'success', segment_ids: [expect.stringMatching(/^[0-9a-f-]{36}$/)] } });
    const [id] = r.body.segment_ids as string[];
    const seg = (await segments()).find((s) => s.id === id)!;
    expect(seg).toMatchObject({ origin: 'shm', location: 'dram', size: 4 * MiB, state: 'mounted' });
    const value = randomBytes(100_000);
    await client.put('rest-shm', value, { preferred_segment: seg.name });
    const [h] = await handlesOf('rest-shm');
    expect(h.segment_name).toBe(seg.name);
    // The same bytes, seen through the test's own mapping of the object.
    const at = 8 * MiB + (h.buffer - seg.address);
    expect(shm.view(at, value.length).equals(value)).toBe(true);
    expect((await client.get('rest-shm')).equals(value)).toBe(true);
    expect(await post('/api/unmount_shm', { segment_ids: [id], grace_period_seconds: 0 })).toEqual({ status: 200, body: { status: 'success' } });
    expect((await segments()).some((s) => s.id === id)).toBe(false);
  });

  it('takes a name without the leading "/", and splits a large range into several segments', async () => {
    const r = await post('/api/mount_shm', { name: shmName, size: 20 * MiB });
    expect(r.status).toBe(200);
    const ids = r.body.segment_ids as string[];
    expect(ids).toHaveLength(2);
    const rows = (await segments()).filter((s) => ids.includes(s.id));
    expect(rows.map((s) => s.size).sort((a, b) => a - b)).toEqual([4 * MiB, 16 * MiB]);
    expect(await post('/api/unmount_shm', { segment_ids: ids })).toEqual({ status: 200, body: { status: 'success' } });
  });
});

describe('refusals: HTTP 400 {"status":"error"}, nothing mounted or mapped', () => {
  it('bad sizes, names, offsets, fields, content types, JSON and bodies', async () => {
    const before = await masterSegments();
    const mapped = await gauge('store_client_regions_mapped');
    await refused('/api/mount', {}, /size is required/);
    await refused('/api/mount', { size: -1 }, /positive integer/);
    await refused('/api/mount', { size: 1.5 }, /positive integer/);
    await refused('/api/mount', { size: '4MB' }, /positive integer/);
    await refused('/api/mount', { size: 4096, colour: 'red' }, /unknown field\(s\) "colour"/);
    await refused('/api/mount', { size: 4096, protocol: 'rdma' }, /RDMA is not available/);
    await refused('/api/mount', { size: 4096 }, /Content-Type must be application\/json/, 'text/plain');
    await refused('/api/mount', '{"size": 4096', /malformed JSON/);
    await refused('/api/mount', '', /malformed JSON/);
    await refused('/api/mount', [4096], /must be a JSON object/);
    await refused('/api/mount', { size: 4096, location: 'x'.repeat(70_000) }, /larger than 65536 bytes/);
    // a size the kernel will not map (2^52 bytes)
    await refused('/api/mount', { size: 2 ** 52 }, /mount: /);
    await refused('/api/mount_shm', { size: MiB }, /name is required/);
    await refused('/api/mount_shm', { name: '/dir/obj', size: MiB }, /path separator/);
    await refused('/api/mount_shm', { name: `${shmName}`, size: MiB, offset: 100 }, /multiple of the 4096-byte page/);
    await refused('/api/mount_shm', { name: `${shmName}`, size: MiB, offset: -4096 }, /offset must be a non-negative integer/);
    await refused('/api/mount_shm', { name: 'no-such-object-here', size: MiB }, /No such file or directory/);
    // Fails half-way: the first 16 MiB segment maps and mounts, the second lies past the object's end.
    await refused('/api/mount_shm', { name: shmName, size: 32 * MiB }, /fewer than offset\+size/);
    await refused('/api/unmount', {}, /segment_ids is required/);
    await refused('/api/unmount', { segment_ids: ['not-a-uuid'] }, /is not a UUID/);
    await refused('/api/unmount', { segment_ids: [], grace_period_seconds: 1 }, /non-empty array/);
    await refused('/api/unmount', { segment_ids: '00000000-0000-4000-8000-000000000000', grace_period_seconds: -1 }, /grace_period_seconds/);
    await refused('/api/unmount_shm', { segment_ids: '00000000-0000-4000-8000-000000000000' }, /is not a mounted segment/);
    expect(await masterSegments()).toEqual(before);
    expect(await gauge('store_client_regions_mapped')).toBe(mapped);

    const wrongMethod = await fetch(`http://${svc.http}/api/mount`);
    expect(wrongMethod.status).toBe(405);
    expect(await wrongMethod.json()).toEqual({ status: 'error', error: expect.stringMatching(/takes POST/) });
  });

  it('an unmount naming one bad id unmounts none of them; ids are unmounted only through their own endpoint', async () => {
    const mem = (await post('/api/mount', { size: MiB })).body.segment_ids as string[];
    const shmIds = (await post('/api/mount_shm', { name: shmName, size: MiB })).body.segment_ids as string[];
    const global = (await segments()).find((s) => s.origin === 'global')!;
    const before = await masterSegments();
    await refused('/api/unmount', { segment_ids: [...mem, '00000000-0000-4000-8000-000000000000'] }, /nothing unmounted: 0{8}-.* is not a mounted segment/);
    await refused('/api/unmount', { segment_ids: [...mem, ...shmIds] }, /was mounted by \/api\/mount_shm; unmount it with \/api\/unmount_shm/);
    await refused('/api/unmount_shm', { segment_ids: mem }, /was mounted by \/api\/mount; unmount it with \/api\/unmount/);
    await refused('/api/unmount', { segment_ids: [global.id] }, /not a segment mounted through the REST API/);
    expect(await masterSegments()).toEqual(before);
    expect((await post('/api/unmount', { segment_ids: mem })).status).toBe(200);
    expect((await post('/api/unmount_shm', { segment_ids: shmIds })).status).toBe(200);
    await refused('/api/unmount', { segment_ids: mem }, /is not a mounted segment/);
  });
});

describe('unmount with a grace period', () => {
  it('keeps objects readable, places no new object there, then they are gone and the memory released', async () => {
    const [id] = (await post('/api/mount', { size: 8 * MiB })).body.segment_ids as string[];
    const seg = (await segments()).find((s) => s.id === id)!;
    const values = [0, 1, 2].map(() => randomBytes(64 * 1024 + 17));
    for (const [i, v] of values.entries()) await client.put(`grace-${i}`, v, { preferred_segment: seg.name });
    for (const i of [0, 1, 2]) expect((await handlesOf(`grace-${i}`))[0].segment_name).toBe(seg.name);

    expect(await post('/api/unmount', { segment_ids: [id], grace_period_seconds: 2 })).toEqual({ status: 200, body: { status: 'success' } });
    expect((await segments()).find((s) => s.id === id)).toMatchObject({ state: 'draining', origin: 'memory' });
    // readable during the grace period
    for (const [i, v] of values.entries()) expect((await client.get(`grace-${i}`)).equals(v)).toBe(true);
    // closed to new allocations: a preferred put goes elsewhere
    await client.put('grace-new', randomBytes(1000), { preferred_segment: seg.name });
    expect((await handlesOf('grace-new'))[0].segment_name).not.toBe(seg.name);
    // a second unmount of the same id is refused
    await refused('/api/unmount', { segment_ids: id }, /already being unmounted/);

    await svc.waitFor(new RegExp(`segment ${id}: grace period over, memory released`));
    for (const i of [0, 1, 2]) await expect(client.get(`grace-${i}`)).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(await masterSegments()).not.toContain(seg.name);
    expect((await segments()).some((s) => s.id === id)).toBe(false);
    expect((await client.get('grace-new')).length).toBe(1000);
  }, 30_000);
});

describe('GET /metrics', () => {
  it('serves Prometheus text with the client metrics, labelled with the cluster', async () => {
    const res = await fetch(`http://${svc.http}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await res.text();
    expect(text).toContain('# TYPE store_client_ops_total counter');
    expect(text).toContain('# TYPE store_client_op_latency_seconds histogram');
    expect(text).toMatch(/^store_client_segments_mounted\{cluster_id="store_cluster"\} 1$/m);
    expect(text).toMatch(/^store_client_mapped_bytes\{cluster_id="store_cluster"\} \d+$/m);
    // the embedded client measured its own operations
    expect(client.metrics!.stats('put').calls).toBeGreaterThan(0);
    expect(client.metrics!.stats('get').errors).toHaveProperty('OBJECT_NOT_FOUND');
  });

  it('is 404 with MC_STORE_CLIENT_METRIC=0; MC_STORE_CLIENT_METRIC_INTERVAL logs a summary line', async () => {
    const off = await LocalCluster.start({ storeServices: 0, env: { ...process.env, MC_STORE_CLIENT_METRIC: '0' } });
    try {
      const s = await off.addService();
      const res = await fetch(`http://${s.http}/metrics`);
      expect(res.status).toBe(404);
      expect(await res.text()).toMatch(/client metrics are off \(MC_STORE_CLIENT_METRIC=0\)/);
    } finally {
      await off.stop();
    }
    const on = await LocalCluster.start({ storeServices: 0, env: { ...process.env, MC_STORE_CLIENT_METRIC_INTERVAL: '0.2', MC_STORE_CLUSTER_ID: 'rest-e2e' } });
    try {
      const s = await on.addService();
      await s.waitFor(/client metrics \[cluster rest-e2e\] last \d+\.\d s: no operations/);
    } finally {
      await on.stop();
    }
  }, 60_000);
});

describe('an 8 GiB sparse segment', () => {
  it('is mounted and used at both ends of its range without touching its pages', async () => {
    const big = await cluster.addService(['--global_segment_size=16MB']);
    const r = await post('/api/mount', { size: 8 * GiB }, 'application/json', big);
    expect(r.body).toEqual({ status: 'success', segment_ids: [expect.any(String)], allocated_size: 8 * GiB });
    const [id] = r.body.segment_ids as string[];
    const seg = (await segments(big)).find((s) => s.id === id)!;
    expect(seg.size).toBe(8 * GiB);
    const master = await MasterClient.connect(cluster.master.rpc);
    try {
      // low end first; then reserve all but the last MiB (PutStart only: nothing is written);
      // the next object takes the last MiB. Hard pins: usage is near 100 %, eviction must not pick them.
      const lo = randomBytes(MiB);
      const hi = randomBytes(MiB);
      await client.put('big-lo', lo, { preferred_segment: seg.name, with_hard_pin: true });
      const filler = 8 * GiB - 2 * MiB;
      const started = await master.putStart({ key: 'big-filler', value_length: filler, slice_lengths: [filler], config: { replica_num: 1, preferred_segment: seg.name } });
      expect(started.status_code).toBe(0);
      await client.put('big-hi', hi, { preferred_segment: seg.name, with_hard_pin: true });
      const [l] = await handlesOf('big-lo');
      const [h] = await handlesOf('big-hi');
      expect(l).toEqual({ segment_name: seg.name, buffer: seg.address, size: MiB });
      expect(h).toEqual({ segment_name: seg.name, buffer: seg.address + 8 * GiB - MiB, size: MiB });
      expect((await client.get('big-lo')).equals(lo)).toBe(true);
      expect((await client.get('big-hi')).equals(hi)).toBe(true);
      expect((await master.putRevoke({ key: 'big-filler' })).status_code).toBe(0);
      // the store service touched two MiB of the 8 GiB (RSS counts its shared pages too)
      const rssKiB = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${big.proc.pid}/status`, 'utf8'))![1]);
      expect(rssKiB * 1024).toBeLessThan(GiB);
    } finally {
      master.close();
    }
    // an immediate unmount takes its objects with it, hard-pinned or not
    expect((await post('/api/unmount', { segment_ids: [id] }, 'application/json', big)).status).toBe(200);
    await expect(client.get('big-hi')).rejects.toBeInstanceOf(ObjectNotFoundError);
  }, 60_000);
});

describe('SIGTERM', () => {
  it('unmounts every segment with --shutdown_grace_seconds: a read whose lease was granted before the final unmount completes', async () => {
    const s = await cluster.addService(['--shutdown_grace_seconds=1']); // read lease: 5 s, master and service defaults
    expect((await post('/api/mount', { size: MiB }, 'application/json', s)).status).toBe(200);
    const value = randomBytes(4 * MiB);
    await client.put('term-obj', value, { preferred_segment: s.segment });
    const master = await MasterClient.connect(cluster.master.rpc);
    const { runSecret } = await import('../native/test-fixtures/run-secret.js'); // the run's secret, when it has one
    const engine = new TransferEngine({ host: '127.0.0.1', authSecret: runSecret() });
    engine.start();
    const local = mapMemory({ size: 4 * MiB });
    engine.registerRegion(local.address, local.size);
    try {
      s.proc.kill('SIGTERM');
      await s.waitFor(/shutdown: 2 segment\(s\) closed to new allocations/);
      expect((await fetch(`http://${s.http}/health`)).status).toBe(503);
      // the grace period: still readable; a reader takes its lease now
      expect((await client.get('term-obj')).equals(value)).toBe(true);
      const granted = await master.getReplicaList({ key: 'term-obj' });
      expect(granted.status_code).toBe(0);
      const h = granted.replica_list[0].handles[0];
      // the master forgets the segment: no new read is granted...
      await s.waitFor(/shutdown: grace period over, segments unmounted/);
      await expect(client.get('term-obj')).rejects.toBeInstanceOf(ObjectNotFoundError);
      // ...but the read granted before still finds the memory, and the right bytes
      await engine.transfer([{ op: 'read', endpoint: h.te_endpoint, remoteAddress: Number(h.buffer), localAddress: local.address, length: value.length }]);
      expect(local.view(0, value.length).equals(value)).toBe(true);
      expect(await s.exited).toBe(0);
    } finally {
      master.close();
      await engine.unregisterRegion(local.address);
      engine.close();
      local.release();
    }
  }, 30_000);
});

describe('a restarted master', () => {
  it('gets the REST segments remounted with the global one; a segment being unmounted is not', async () => {
    const own = await LocalCluster.start({ storeServices: 0, segmentSize: '16MB' });
    try {
      const s = await own.addService();
      const [kept] = (await post('/api/mount', { size: MiB }, 'application/json', s)).body.segment_ids as string[];
      const [leaving] = (await post('/api/mount_shm', { name: shmName, size: MiB }, 'application/json', s)).body.segment_ids as string[];
      expect((await post('/api/unmount_shm', { segment_ids: leaving, grace_period_seconds: 600 }, 'application/json', s)).status).toBe(200);
      const rows = await segments(s);
      const name = (id: string) => rows.find((r) => r.id === id)!.name;
      await own.restartMaster();
      const [, count] = await s.waitFor(/remounted (\d+) segment\(s\) with master/);
      expect(Number(count)).toBe(2);
      const listed = (await own.admin('/get_all_segments')).split('\n').filter(Boolean).sort();
      expect(listed).toEqual([s.segment, name(kept)].sort());
    } finally {
      await own.stop();
    }
  }, 60_000);
});
