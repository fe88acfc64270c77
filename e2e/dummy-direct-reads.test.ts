// End to end, real processes on 127.0.0.1: a dummy client's first reads of objects in same-host
// memory looked up at the master by the dummy itself (docs/client.md "Dummy clients", first reads):
// served bit-exact with no message to the real client (its /segments counts the calls it got), in
// every read form; a removed or overwritten object is never read old; a master restart is survived
// (reads stay right, then are served here again); a master refusing the secret is not read from;
// an object only the file tier holds is read through the real client; with HA masters, a leader
// change is followed. Checksums are on (MC_STORE_CHECKSUM=1). Run `npm run build` first.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterEnv, distRoot, LocalCluster, track, type ProcessHandle, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { freePort } from './free-port.js';
import { have } from './ha-backends.js';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import { MasterClient } from '../client/master-client.js';
import { DirectReads } from '../client/dummy-direct-reads.js';
import { LocalReads } from '../client/dummy-local-reads.js';
import { loadNative } from '../client/native-port.js';
import { ObjectLeasedError, ObjectNotFoundError, StoreError } from '../client/errors.js';
import { ErrorCode } from '../common/error-code.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const LEASE_TTL_MS = 2000;
const env = { ...process.env, MC_STORE_CHECKSUM: '1' };

/** Requests the store service received from dummy clients so far (its /segments report). */
async function callsServed(s: StoreServiceProcess): Promise<number> {
  return ((await (await fetch(`http://${s.http}/segments`)).json()) as { dummy_clients: { calls: number } }).dummy_clients.calls;
}

/** Runs `op` until no read lease stands in its way (the master refuses while one does; nothing announces the lease's end). */
async function onceUnleased(op: () => Promise<unknown>): Promise<void> {
  for (;;) {
    try {
      await op();
      return;
    } catch (e) {
      if (!(e instanceof ObjectLeasedError)) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Runs `op` until it succeeds (a cluster settling after a restart has no event to await here), at most `ms`. */
async function eventually<T>(op: () => Promise<T>, what: string, ms = 20_000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    try {
      return await op();
    } catch (e) {
      if (performance.now() > end) throw new Error(`timed out waiting for ${what}: ${(e as Error).message}`, { cause: e });
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('first reads looked up by the dummy itself', () => {
  let cluster: LocalCluster;
  let a: StoreServiceProcess; // the dummies' real client
  let b: StoreServiceProcess; // another memory holder on this host
  let embedded: Client;
  let dummy: DummyClient;

  beforeAll(async () => {
    cluster = await LocalCluster.start({ storeServices: 2, segmentSize: '64MB', masterArgs: [`--default_kv_lease_ttl=${LEASE_TTL_MS}ms`], env });
    [a, b] = cluster.services;
    embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), { env });
    dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 32 * MiB });
  }, 60_000);

  afterAll(async () => {
    await dummy?.close();
    await embedded?.close();
    await cluster?.stop();
  }, 30_000);

  it('serves them here in every read form: bit-exact, and the real client gets no message', async () => {
    const cases: { name: string; value: Buffer[]; segment: string }[] = [
      { name: '4k-a', value: [randomBytes(4096)], segment: a.segment },
      { name: '64k1-b', value: [randomBytes(64 * KiB + 1)], segment: b.segment },
      { name: '3m-a', value: [randomBytes(3 * MiB)], segment: a.segment },
      { name: 'slices-b', value: [randomBytes(1000), randomBytes(70_000), randomBytes(5)], segment: b.segment },
    ];
    const forms = ['getInto', 'getIntoPlain', 'get', 'getIntoBatch', 'getBatch'] as const;
    for (const c of cases) for (const f of forms) await embedded.put(`dr-${c.name}-${f}`, c.value.length === 1 ? c.value[0] : c.value, { preferred_segment: c.segment });
    const calls = await callsServed(a);
    const before = dummy.localReadStats;
    for (const c of cases) {
      const whole = Buffer.concat(c.value);
      const key = (f: (typeof forms)[number]) => `dr-${c.name}-${f}`;
      const lease = await dummy.allocBuffer(whole.length);
      lease.buffer.fill(0);
      expect(await dummy.getInto(key('getInto'), lease.buffer)).toBe(whole.length); // into shared memory
      expect(lease.buffer.equals(whole)).toBe(true);
      const plain = Buffer.alloc(whole.length + 7); // memory outside the shared regions
      expect(await dummy.getInto(key('getIntoPlain'), plain)).toBe(whole.length);
      expect(plain.subarray(0, whole.length).equals(whole)).toBe(true);
      expect((await dummy.get(key('get'))).equals(whole)).toBe(true);
      lease.buffer.fill(0);
      const [into] = await dummy.getIntoBatch([{ key: key('getIntoBatch'), target: lease.buffer }]);
      expect(into).toEqual({ key: key('getIntoBatch'), size: whole.length });
      expect(lease.buffer.equals(whole)).toBe(true);
      const [got] = await dummy.getBatch([key('getBatch')]);
      expect(got.error).toBeUndefined();
      expect(got.value!.equals(whole)).toBe(true);
      lease.release();
    }
    const after = dummy.localReadStats;
    expect(after.direct - before.direct).toBe(cases.length * forms.length);
    expect(after.directFallbacks).toBe(before.directFallbacks);
    expect(after.fallbacks).toBe(before.fallbacks);
    expect(await callsServed(a)).toBe(calls);
  });

  it('reads a batch of keys here, those it cannot serve (unknown keys) through the real client', async () => {
    const values = Array.from({ length: 128 }, () => randomBytes(4096));
    const keys = values.map((_, i) => `dr-batch-${i}`);
    const r = await embedded.putBatch(keys.map((key, i) => ({ key, value: values[i], config: { preferred_segment: i % 2 ? a.segment : b.segment } })));
    expect(r.every((x) => !x.error)).toBe(true);
    const lease = await dummy.allocBuffer(129 * 4096);
    const items = [...keys, 'dr-batch-missing'].map((key, i) => ({ key, target: lease.buffer.subarray(i * 4096, (i + 1) * 4096) }));
    const before = dummy.localReadStats;
    const calls = await callsServed(a);
    const got = await dummy.getIntoBatch(items);
    for (let i = 0; i < 128; i++) {
      expect(got[i]).toEqual({ key: keys[i], size: 4096 });
      expect(items[i].target.equals(values[i])).toBe(true);
    }
    expect(got[128].error).toBeInstanceOf(ObjectNotFoundError);
    expect(dummy.localReadStats.direct - before.direct).toBe(128);
    expect(dummy.localReadStats.directFallbacks - before.directFallbacks).toBe(1);
    expect(await callsServed(a)).toBe(calls + 1); // the missing key alone
    lease.release();
  });

  it('answers isExist and batchIsExist at the master here, the real client getting no message; a bad key goes to the real client, which names it', async () => {
    await embedded.put('dr-exists', randomBytes(100), { preferred_segment: b.segment });
    const calls = await callsServed(a);
    expect(await dummy.isExist('dr-exists')).toBe(true);
    expect(await dummy.isExist('dr-exists-not')).toBe(false);
    expect(await dummy.batchIsExist(['dr-exists', 'dr-exists-not', 'dr-exists'])).toEqual([true, false, true]);
    expect(await callsServed(a)).toBe(calls);
    await expect(dummy.isExist('dr\nbad')).rejects.toMatchObject({ code: ErrorCode.INVALID_KEY });
    await expect(dummy.batchIsExist(['dr-exists', ''])).rejects.toMatchObject({ code: ErrorCode.INVALID_KEY });
    expect(await callsServed(a)).toBe(calls + 2);
  });

  it('never reads a removed or overwritten object old', async () => {
    const key = 'dr-removed';
    const old = randomBytes(8192);
    await dummy.put(key, old, { preferred_segment: b.segment });
    const target = Buffer.alloc(old.length);
    const direct = dummy.localReadStats.direct;
    expect(await dummy.getInto(key, target)).toBe(old.length);
    expect(target.equals(old)).toBe(true);
    expect(dummy.localReadStats.direct).toBe(direct + 1);
    await onceUnleased(() => embedded.remove(key));
    await expect(dummy.getInto(key, target)).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(dummy.get(key)).rejects.toBeInstanceOf(ObjectNotFoundError);
    // the memory may hold another object now: the dummy reads what the key holds
    const fresh = randomBytes(8192);
    await embedded.put(key, fresh, { preferred_segment: b.segment });
    expect((await dummy.get(key)).equals(fresh)).toBe(true);
    const newer = randomBytes(8192);
    await onceUnleased(() => embedded.upsert(key, newer, { preferred_segment: a.segment }));
    expect((await dummy.get(key)).equals(newer)).toBe(true);
    // the dummy's own overwrite drops what it knew at once
    const own = randomBytes(8192);
    await onceUnleased(() => dummy.upsert(key, own, { preferred_segment: b.segment }));
    expect((await dummy.get(key)).equals(own)).toBe(true);
  });

  // A dummy holds the secret its real client checks, which is the master's: a refusal by the
  // master alone takes a cluster changing secrets. The lookup half of a dummy is driven here with
  // another secret against the real master.
  it('a master that refuses the secret: nothing is read there, the read goes through the real client, lookups pause', async () => {
    await embedded.put('dr-refused', randomBytes(4096), { preferred_segment: b.segment });
    const logs: string[] = [];
    const local = new LocalReads({ native: await loadNative(), secret: null, maxEntries: 16, now: () => performance.now(), addressIn: () => undefined, stage: () => undefined });
    const direct = new DirectReads({ local, secret: randomBytes(32), now: () => performance.now(), refresh: async () => {}, log: (_l, m) => logs.push(m) });
    try {
      direct.configure(cluster.master.rpc, a.endpoint);
      expect(direct.usable).toBe(true);
      expect(await direct.read('dr-refused', Buffer.alloc(4096), async () => -1)).toBe(-1); // -1: the real client's way
      expect(direct.stats).toEqual({ direct: 0, directFallbacks: 1 });
      expect(local.stats.hits).toBe(0);
      expect(logs.join('\n')).toMatch(/wrong cluster secret.*refused our cluster secret/);
      expect(direct.usable).toBe(false); // not asked again for a while
    } finally {
      direct.close();
      local.close();
    }
  });

  it('a master restart: reads stay right, then are served here again', async () => {
    const before = randomBytes(4096);
    await dummy.put('dr-restart-before', before, { preferred_segment: b.segment });
    const t = Buffer.alloc(4096);
    expect(await dummy.getInto('dr-restart-before', t)).toBe(4096);
    await cluster.restartMaster();
    // the new master knows nothing (no HA): the object is gone for every client
    await expect(embedded.get('dr-restart-before')).rejects.toBeInstanceOf(StoreError);
    await expect(dummy.getInto('dr-restart-before', t)).rejects.toBeInstanceOf(StoreError);
    // once the real clients remounted, new objects are read here again, bit-exact
    const { direct } = dummy.localReadStats;
    for (let i = 0; dummy.localReadStats.direct === direct; i++) {
      const value = randomBytes(4096);
      await eventually(() => embedded.put(`dr-restart-${i}`, value, { preferred_segment: b.segment }), 'a put after the master restart');
      t.fill(0);
      expect(await dummy.getInto(`dr-restart-${i}`, t)).toBe(4096);
      expect(t.equals(value)).toBe(true);
      if (i > 0) await new Promise((r) => setTimeout(r, 200)); // a failed lookup is retried here after a second
      expect(i).toBeLessThan(100);
    }
  }, 60_000);
});

describe('an object only the file tier holds', () => {
  let root: string;
  let cluster: LocalCluster;
  let dummy: DummyClient;
  let master: MasterClient;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kv-direct-file-'));
    cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '4MB', masterArgs: [`--root_fs_dir=${root}`, '--cluster_id=direct_file'], env });
    dummy = await DummyClient.connect({ socketPath: cluster.services[0].socket, bufferSize: 16 * MiB });
    master = await MasterClient.connect(cluster.master.rpc);
  }, 60_000);

  afterAll(async () => {
    master?.close();
    await dummy?.close();
    await cluster?.stop();
    rmSync(root, { recursive: true, force: true });
  }, 30_000);

  it('is read through the real client, bit-exact', async () => {
    // 10 MiB through a 4 MiB segment: most objects leave memory for their files
    const values = Array.from({ length: 40 }, (_, i) => randomBytes(256 * KiB + i));
    for (let i = 0; i < values.length; i++) await dummy.put(`df-${i}`, values[i]);
    const fileOnly = await eventually(async () => {
      for (let i = 0; i < values.length; i++) {
        const res = await master.getReplicaList({ key: `df-${i}` });
        if (res.status_code === ErrorCode.OK && res.replica_list.every((r) => r.replica_type === ReplicaType.DISK)) return i;
      }
      throw new Error('every object is still in memory');
    }, 'an object held by the file tier only');
    const before = dummy.localReadStats;
    const got = await dummy.get(`df-${fileOnly}`);
    expect(got.equals(values[fileOnly])).toBe(true);
    expect(dummy.localReadStats.direct).toBe(before.direct);
    expect(dummy.localReadStats.directFallbacks).toBe(before.directFallbacks + 1);
  }, 60_000);
});

const hasRedis = have('redis-server');

// HA: two masters elect a leader through a redis-server started here; the store service follows
// the leader (redis://), and so does its dummy, through what the store service tells it.
(hasRedis ? describe : describe.skip)(`a leader change${hasRedis ? '' : ' (skipped: no redis-server on PATH)'}`, () => {
  const procs: ProcessHandle[] = [];
  afterAll(async () => {
    const running = procs.filter((h) => h.proc.exitCode === null && h.proc.signalCode === null);
    for (const h of running) h.proc.kill('SIGKILL');
    await Promise.all(running.map((h) => h.exited));
  });

  it('reads stay right, and once the store service follows the new leader the dummy reads here again', async () => {
    const cenv = clusterEnv(env);
    const redisPort = await freePort();
    const redis = track(
      'redis',
      spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    procs.push(redis);
    await redis.waitFor(/Ready to accept connections/);
    const masters: (ProcessHandle & { rpc: string })[] = [];
    for (let i = 0; i < 2; i++) {
      const args = [
        '--rpc_port=0',
        '--metrics_port=0',
        '--rpc_address=127.0.0.1',
        '--enable_ha=true',
        '--ha_backend_type=redis',
        `--ha_backend_connstring=redis://127.0.0.1:${redisPort}`,
      ];
      const h = track(
        `master-${i}`,
        spawn(process.execPath, [join(distRoot(), 'master/main.js'), ...args, '--enable_metric_reporting=false'], { stdio: ['ignore', 'pipe', 'pipe'], env: cenv }),
      );
      procs.push(h);
      masters.push({ ...h, rpc: (await h.waitFor(/store_master listening: rpc=(\S+)/))[1] });
    }
    const svc = track(
      'store_service-ha',
      spawn(
        process.execPath,
        [
          join(distRoot(), 'sidecar/main.js'),
          '--host=127.0.0.1',
          '--port=0',
          '--rpc_port=0',
          '--local_hostname=127.0.0.1',
          `--master_server=redis://127.0.0.1:${redisPort}`,
          '--metadata_server=P2PHANDSHAKE',
          '--global_segment_size=16MB',
          '--shutdown_grace_seconds=0',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: cenv },
      ),
    );
    procs.push(svc);
    const [, , segment, socket] = await svc
      .waitFor(/store_service ready: http=\S+ te_endpoint=\S+ segments=([^(\s]+)\(\d+B\)\S* client_id=\S+ rpc=\S+ socket=(\S+)/)
      .then((m) => [m[0], m[0], m[1], m[2]]);
    const dummy = await DummyClient.connect({ socketPath: socket, bufferSize: 4 * MiB });
    try {
      const before = randomBytes(4096);
      await dummy.put('ha-before', before, { preferred_segment: segment });
      const t = Buffer.alloc(4096);
      expect(await dummy.getInto('ha-before', t)).toBe(4096);
      expect(t.equals(before)).toBe(true);
      expect(dummy.localReadStats.direct).toBe(1);
      const leader = await Promise.race(masters.map((m, i) => m.waitFor(/HA: elected leader/).then(() => i)));
      const follower = masters[1 - leader];
      masters[leader].proc.kill('SIGKILL');
      await svc.waitFor(new RegExp(`remounted 1 segment\\(s\\) on master leader ${follower.rpc.replace(/\./g, '\\.')}`));
      // the old object: its bytes, or an error (the new leader may not serve it): never other bytes
      t.fill(0);
      const old = await dummy.getInto('ha-before', t).then(
        () => t.equals(before),
        (e: unknown) => e instanceof StoreError,
      );
      expect(old).toBe(true);
      const { direct } = dummy.localReadStats;
      for (let i = 0; dummy.localReadStats.direct === direct; i++) {
        const value = randomBytes(4096);
        await eventually(() => dummy.put(`ha-after-${i}`, value, { preferred_segment: segment }), 'a put on the new leader');
        t.fill(0);
        expect(await dummy.getInto(`ha-after-${i}`, t)).toBe(4096);
        expect(t.equals(value)).toBe(true);
        if (dummy.localReadStats.direct === direct) await new Promise((r) => setTimeout(r, 200)); // a failed lookup is retried here after a second
        expect(i).toBeLessThan(100);
      }
    } finally {
      await dummy.close();
    }
  }, 60_000);
});
