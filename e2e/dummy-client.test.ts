// End to end, real processes on 127.0.0.1: dummy clients against a store_service (the real
// client) and a store_master from dist/. The whole StoreClient API through the Unix socket with
// values in shared memory, bit-exact against an embedded client; values inside messages when the
// real client cannot see our files (TCP); gRPC; bad calls refused; the real client killed and
// restarted under a dummy client; a dummy client killed mid-put. Run `npm run build` first.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import * as protoLoader from '@grpc/proto-loader';
import { LocalCluster, track, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import { MasterChannel } from '../client/master-channel.js';
import { clientMethod } from '../common/client-proto.js';
import { protoPath } from '../common/service-proto.js';
import { ErrorCode } from '../common/error-code.js';
import { InvalidParamsError, ObjectExistsError, ObjectLeasedError, ObjectNotFoundError, UnavailableError } from '../client/errors.js';
import { freePort } from './free-port.js';

const MiB = 1024 * 1024;
let cluster: LocalCluster;
let svc: StoreServiceProcess;
let embedded: Client;

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '256MB' });
  svc = cluster.services[0];
  embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 32 * MiB }));
}, 60_000);

afterAll(async () => {
  await embedded?.close();
  await cluster?.stop();
}, 30_000);

const digest = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Regions the store service holds for dummy clients (its /segments report). */
async function serviceStats(s: StoreServiceProcess): Promise<{ connections: number; regions: number; regionBytes: number }> {
  return ((await (await fetch(`http://${s.http}/segments`)).json()) as { dummy_clients: { connections: number; regions: number; regionBytes: number } }).dummy_clients;
}

describe('a dummy client on the Unix socket, values in shared memory', () => {
  let dummy: DummyClient;
  beforeAll(async () => {
    dummy = await DummyClient.connect({ socketPath: svc.socket, bufferSize: 32 * MiB });
  });
  afterAll(async () => dummy?.close());

  it('connects through the socket and shares its region with the real client', async () => {
    expect(svc.socket).toMatch(/kvstore-\d+\.sock$/);
    expect(dummy.sharedMemory).toBe(true);
    const stats = await serviceStats(svc);
    expect(stats.connections).toBeGreaterThanOrEqual(1);
    expect(stats.regions).toBeGreaterThanOrEqual(1);
  });

  it('puts and gets objects of 1 B to 8 MiB bit-exact, as the embedded client sees them too', async () => {
    for (const size of [1, 4096, 65_537, MiB + 3, 8 * MiB]) {
      const value = randomBytes(size);
      await dummy.put(`u-${size}`, value);
      expect(digest(await dummy.get(`u-${size}`))).toBe(digest(value));
      expect(digest(await embedded.get(`u-${size}`))).toBe(digest(value));
      const target = Buffer.alloc(size + 10);
      expect(await dummy.getInto(`u-${size}`, target)).toBe(size);
      expect(digest(target.subarray(0, size))).toBe(digest(value));
    }
  });

  it('moves values between allocBuffer memory and the cluster (no staging), slices included', async () => {
    const lease = await dummy.allocBuffer(4 * MiB);
    const value = randomBytes(4 * MiB);
    value.copy(lease.buffer);
    await dummy.put('zc', lease.buffer);
    await dummy.put('zc-slices', [lease.buffer.subarray(0, MiB), lease.buffer.subarray(MiB)]);
    lease.buffer.fill(0);
    expect(await dummy.getInto('zc', lease.buffer)).toBe(4 * MiB);
    expect(digest(lease.buffer)).toBe(digest(value));
    expect(digest(await embedded.get('zc-slices'))).toBe(digest(value));
    lease.release();
    // and the other way: the embedded client's object into shared memory
    await embedded.put('from-embedded', value.subarray(0, 12345));
    const l2 = await dummy.allocBuffer(12345);
    expect(await dummy.getInto('from-embedded', l2.buffer)).toBe(12345);
    expect(l2.buffer.equals(value.subarray(0, 12345))).toBe(true);
    l2.release();
  });

  it('runs batches with per-key results', async () => {
    const a = randomBytes(1000);
    const b = randomBytes(300_000);
    const put = await dummy.putBatch([
      { key: 'ba', value: a },
      { key: 'bb', value: b },
      { key: 'u-1', value: a },
    ]);
    expect(put[0].error).toBeUndefined();
    expect(put[1].error).toBeUndefined();
    expect(put[2].error).toBeInstanceOf(ObjectExistsError);
    const got = await dummy.getBatch(['ba', 'bb', 'missing']);
    expect(got[0].value!.equals(a)).toBe(true);
    expect(got[1].value!.equals(b)).toBe(true);
    expect(got[2].error).toBeInstanceOf(ObjectNotFoundError);
    const t1 = await dummy.allocBuffer(1000);
    const t2 = await dummy.allocBuffer(300_000);
    const into = await dummy.getIntoBatch([
      { key: 'ba', target: t1.buffer },
      { key: 'bb', target: t2.buffer },
      { key: 'nope', target: t1.buffer },
    ]);
    expect(into.map((r) => r.size)).toEqual([1000, 300_000, undefined]);
    expect(into[2].error).toBeInstanceOf(ObjectNotFoundError);
    expect(t1.buffer.equals(a) && t2.buffer.equals(b)).toBe(true);
    t1.release();
    t2.release();
    const up = await dummy.upsertBatch([
      { key: 'bc', value: b },
      { key: 'ba', value: b },
    ]);
    expect(up[0].error).toBeUndefined();
    expect(up[1].error).toBeInstanceOf(ObjectLeasedError); // just read: a reader holds a lease
    expect((await embedded.get('bc')).equals(b)).toBe(true);
  });

  it('serves the rest of the API: upsert, exists, size, regex, remove, addresses, replica clear', async () => {
    await dummy.upsert('up', Buffer.from('one'));
    await dummy.upsert('up', Buffer.from('two, longer'));
    expect((await dummy.get('up')).toString()).toBe('two, longer');
    expect(await dummy.isExist('up')).toBe(true);
    expect(await dummy.isExist('never')).toBe(false);
    expect(await dummy.batchIsExist(['up', 'never'])).toEqual([true, false]);
    expect(await dummy.getSize('u-4096')).toBe(4096);
    const found = await dummy.queryByRegex('^u-');
    expect([...found.keys()].sort()).toEqual(['u-1', 'u-1048579', 'u-4096', 'u-65537', 'u-8388608']);
    const ips = await dummy.batchQueryIp([svc.clientId]);
    expect(ips.get(svc.clientId)).toEqual(['127.0.0.1']);
    expect(await dummy.batchReplicaClear(['nothing-here'])).toEqual([]);
    await expect(dummy.remove('never')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(dummy.get('never')).rejects.toThrow(/OBJECT_NOT_FOUND/);
    await expect(dummy.put('', Buffer.from('x'))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(dummy.put('empty', Buffer.alloc(0))).rejects.toBeInstanceOf(InvalidParamsError);
  });
});

describe('values inside messages', () => {
  it('works over TCP when the real client cannot map our files', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'kvstore-not-shared-'));
    const dummy = await DummyClient.connect({ address: svc.rpc, socketPath: '', shmDir: elsewhere, bufferSize: 4 * MiB });
    try {
      expect(dummy.sharedMemory).toBe(false);
      const value = randomBytes(2 * MiB + 1);
      await dummy.put('inline-2m', value);
      expect((await dummy.get('inline-2m')).equals(value)).toBe(true);
      const t = Buffer.alloc(2 * MiB + 1);
      expect(await dummy.getInto('inline-2m', t)).toBe(value.length);
      expect(t.equals(value)).toBe(true);
      expect(digest(await embedded.get('inline-2m'))).toBe(digest(value));
      const res = await dummy.getBatch(['inline-2m', 'missing']);
      expect(res[0].value!.equals(value)).toBe(true);
      expect(res[1].error).toBeInstanceOf(ObjectNotFoundError);
    } finally {
      await dummy.close();
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('gRPC serves the inline forms and refuses shared regions plainly', async () => {
    const def = protoLoader.loadSync(protoPath('store_client.proto'), { keepCase: true, longs: Number, enums: Number, defaults: true });
    const Ctor = grpc.loadPackageDefinition(def).store as unknown as { ClientService: grpc.ServiceClientConstructor };
    const stub = new Ctor.ClientService(svc.rpc, grpc.credentials.createInsecure(), grpcAuthOptions());
    const call = (name: string, req: object) =>
      new Promise<Record<string, unknown>>((resolve, reject) =>
        (stub[name] as (...args: unknown[]) => void).call(stub, req, (e: Error | null, r: Record<string, unknown>) => (e ? reject(e) : resolve(r))),
      );
    try {
      expect((await call('Put', { key: 'grpc-k', value: Buffer.from('over grpc') })).status_code).toBe(ErrorCode.OK);
      const got = await call('Get', { key: 'grpc-k' });
      expect(Buffer.from(got.value as Buffer).toString()).toBe('over grpc');
      const reg = await call('RegisterRegion', { name: 'kvstore-region-x', size: 4096 });
      expect(reg.status_code).toBe(ErrorCode.NOT_IMPLEMENTED);
      expect(reg.error).toMatch(/KVD1 channel/);
      expect((await call('Get', { key: 'nope' })).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    } finally {
      stub.close();
    }
  });
});

describe('bad calls on the channel', () => {
  it('are refused with INVALID_PARAMS or an ERROR frame, and the connection goes on', async () => {
    const socket = netConnect(svc.socket);
    await new Promise((r) => socket.once('connect', r));
    const ch = new MasterChannel(socket, svc.socket, await MasterChannel.authenticate(socket, svc.socket, 'dummy-client', { magic: Buffer.from('KVD1'), peer: 'store service' }));
    try {
      const reg = (name: string, size = 4096, offset = 0) => ch.call<{ status_code: number; error: string }>(clientMethod('RegisterRegion'), { name, size, offset });
      for (const name of ['../../etc/passwd', 'kvstore-region-a/b', 'segment-of-someone', '']) {
        const r = await reg(name);
        expect(r.status_code).toBe(ErrorCode.INVALID_PARAMS);
      }
      expect((await reg('kvstore-region-does-not-exist')).error).toMatch(/no file/);
      expect((await reg('kvstore-region-x', 0)).status_code).toBe(ErrorCode.INVALID_PARAMS);
      expect((await reg('kvstore-region-x', 4096, 100)).status_code).toBe(ErrorCode.INVALID_PARAMS);
      const span = await ch.call<{ status_code: number; error: string }>(clientMethod('GetInto'), { key: 'u-1', target: { region_id: 77, offset: 0, length: 10 } });
      expect(span.status_code).toBe(ErrorCode.INVALID_PARAMS);
      expect(span.error).toMatch(/unknown region id 77/);
      const bigInline = await ch.call<{ status_code: number; error: string }>(clientMethod('Put'), { key: 'too-big', value: Buffer.alloc(17 * MiB) });
      expect(bigInline.error).toMatch(/inline limit/);
      await expect(ch.call({ ...clientMethod('Hello'), index: 999 }, {})).rejects.toThrow(/unknown method 999/);
      expect((await ch.call<{ status_code: number }>(clientMethod('Hello'), {})).status_code).toBe(ErrorCode.OK);
    } finally {
      ch.close();
    }
  });
});

describe('failures', () => {
  it('a real client killed and restarted: calls in flight fail clearly, later calls reconnect and register again', async () => {
    const port = await freePort();
    const first = await cluster.addService([`--rpc_port=${port}`]);
    const dummy = await DummyClient.connect({ socketPath: first.socket, bufferSize: 8 * MiB, requestTimeoutMs: 20_000 });
    try {
      const seg = first.segment;
      await dummy.put('before-restart', randomBytes(1000), { preferred_segment: seg });
      first.proc.kill('SIGSTOP');
      // a call only the real client answers (a read may be served here from the stopped
      // process's memory: the dummy mapped it for the put, which it wrote itself; isExist is
      // asked of the master here)
      const inFlight = dummy.getSize('before-restart');
      first.proc.kill('SIGKILL');
      await expect(inFlight).rejects.toBeInstanceOf(UnavailableError);
      await first.exited;
      const second = await cluster.addService([`--rpc_port=${port}`]);
      expect(second.socket).toBe(first.socket);
      const value = randomBytes(3 * MiB);
      await dummy.put('after-restart', randomBytes(3 * MiB), { preferred_segment: second.segment });
      // an upsert always goes through the real client (a put may be written here: docs/client.md)
      await dummy.upsert('after-restart', value, { preferred_segment: second.segment });
      expect((await dummy.get('after-restart')).equals(value)).toBe(true);
      expect((await serviceStats(second)).regions).toBeGreaterThanOrEqual(1);
    } finally {
      await dummy.close();
    }
  });

  it('a dummy client killed mid-put leaves no partial object, and its regions are unmapped', async () => {
    const size = 64 * MiB;
    const child = spawn(process.execPath, [join(process.cwd(), 'e2e/fixtures/dummy-putter.mjs'), svc.socket, 'killed-mid-put', String(size)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const h = track('dummy-putter', child);
    const m = await h.waitFor(/putting regions=(\S+)/);
    child.kill('SIGKILL');
    await h.exited;
    // the service logs a connection's release, naming its client (pid by default), once its regions are unmapped
    await svc.waitFor(new RegExp(`dummy client disconnected: "pid ${child.pid}".*its regions are released`));
    const maps = readFileSync(`/proc/${svc.proc.pid}/maps`, 'utf8');
    for (const path of m[1].split(',')) expect(maps).not.toContain(path);
    // Regions are released only after the calls using them finished: the put never started, or
    // it completed whole. Never partial bytes under the key.
    const got = await embedded.get('killed-mid-put').catch((e: unknown) => {
      if (e instanceof ObjectNotFoundError) return undefined;
      throw e;
    });
    if (got) {
      expect(got.length).toBe(size);
      for (let i = 0; i < size; i += 4096) expect(got.readUInt32LE(i)).toBe(i);
    }
    // The killed process could not delete its files; nobody holds their lock now, so the real
    // client deletes them after releasing the regions.
    for (const path of m[1].split(',')) {
      if (existsSync(path)) await svc.waitFor(new RegExp(`deleted ${path}: its dummy client died`));
      expect(existsSync(path)).toBe(false);
    }
  });
});
