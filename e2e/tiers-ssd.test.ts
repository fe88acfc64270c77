// The SSD tier end to end (docs/tiers.md, "SSD tier"), real processes: store services with
// --offload_dir mount a sparse file as offload segments; a master with --enable_offload copies
// completed writes there, keeps objects evicted from memory readable from their DISK replica, and
// promotes SSD-only objects read past the admission threshold. Every Get returns the bytes put;
// a store service killed mid-offload never leaves a torn copy served. Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '../client/client.js';
import { StoreError } from '../client/errors.js';
import { ErrorCode } from '../common/error-code.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import { LocalCluster } from '../sidecar/local-cluster.js';

const KiB = 1024;

/** Put, retried while memory is full of objects whose offload copy is still on the way (backpressure). */
async function putRetry(client: Client, key: string, value: Buffer): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await client.put(key, value);
      return;
    } catch (e) {
      if (!(e instanceof StoreError) || e.code !== ErrorCode.NO_AVAILABLE_HANDLE || attempt >= 400) throw e;
      await new Promise((r) => setTimeout(r, 25)); // a retry's backoff, as any writer would
    }
  }
}

async function replicaTypes(client: Client, key: string): Promise<number[]> {
  return ((await client.queryByRegex(`^${key}$`)).get(key) ?? []).map((r) => r.replica_type);
}

/** Re-checks `probe` until it holds (the master's copies run in the background), failing after `ms`. */
async function eventually(probe: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`not reached within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True when none of `keys` has a replica of type `type` any more (after its segments' service died). */
async function noneOf(client: Client, keys: Iterable<string>, type: number): Promise<boolean> {
  for (const key of keys) if ((await replicaTypes(client, key)).includes(type)) return false;
  return true;
}

/**
 * A memory store service and an SSD one (offload on), `count` random values put; returns once the
 * first offload copies joined (others still queued or on the way): the moment the kill tests strike.
 */
async function offloadUnderWay(dir: string, count: number, size: number, prefix: string) {
  const cluster = await LocalCluster.start({ masterArgs: ['--enable_offload', '--client_ttl=2s'] });
  const mem = await cluster.addService(['--global_segment_size=64MB']);
  const ssd = await cluster.addService(['--global_segment_size=0', `--offload_dir=${dir}`, '--offload_size=64MB']);
  const client = await Client.setup(cluster.clientConfig(), { checksums: true });
  const values = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    const value = randomBytes(size);
    await client.put(`${prefix}-${i}`, value);
    values.set(`${prefix}-${i}`, value);
  }
  await eventually(async () => Number(/offload: \d+ queued, \d+ in flight, (\d+) done/.exec(await cluster.admin('/metrics/summary'))?.[1] ?? 0) > 0, 'a first offload');
  return { cluster, mem, ssd, client, values };
}

interface SsdTier {
  dir: string; // the store service's offload directory
  cluster: LocalCluster;
  client: Client;
  stop(): Promise<void>;
}

/** A master with `masterArgs`, one store service of 4 MiB memory over a 64 MiB offload file, a client with checksums. */
async function ssdTier(masterArgs: string[]): Promise<SsdTier> {
  const dir = mkdtempSync(join(tmpdir(), 'kvstore-ssd-'));
  const cluster = await LocalCluster.start({ masterArgs });
  await cluster.addService(['--global_segment_size=4MB', `--offload_dir=${dir}`, '--offload_size=64MB']);
  const client = await Client.setup(cluster.clientConfig(), { checksums: true });
  return {
    dir,
    cluster,
    client,
    async stop() {
      await client.close();
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('SSD tier', () => {
  let tier: SsdTier;
  let dir: string;
  let cluster: LocalCluster;
  let client: Client;

  beforeAll(async () => {
    tier = await ssdTier(['--enable_offload', '--promotion_on_hit', '--promotion_admission_threshold=2', '--default_kv_lease_ttl=200']);
    ({ dir, cluster, client } = tier);
  }, 60_000);

  afterAll(() => tier?.stop(), 30_000);

  it('fills memory three times over: every object stays readable bit-exact, the evicted ones from disk', async () => {
    const values = new Map<string, Buffer>();
    for (let i = 0; i < 48; i++) {
      const value = randomBytes(i % 4 === 0 ? 64 * KiB + 7 : 256 * KiB);
      await putRetry(client, `fill-${i}`, value);
      values.set(`fill-${i}`, value);
    }
    // A reader on another host (TCP): the store service sends SSD-only bytes from its file (sendfile, docs/native.md)
    const remote = await Client.setup(cluster.clientConfig(), { checksums: true, env: { ...process.env, MC_STORE_SHM_TRANSPORT: '0' } });
    try {
      for (const [key, value] of values) expect((await remote.get(key)).equals(value)).toBe(true);
    } finally {
      await remote.close();
    }
    let diskOnly = 0;
    for (const [key, value] of values) {
      const types = await replicaTypes(client, key);
      expect(types.length).toBeGreaterThan(0); // nothing was lost
      if (types.every((t) => t === ReplicaType.DISK)) diskOnly++;
      expect((await client.get(key)).equals(value)).toBe(true);
    }
    expect(diskOnly).toBeGreaterThan(0); // 12 MiB in 4 MiB of memory: most live on SSD only
    const summary = await cluster.admin('/metrics/summary');
    expect(summary).toMatch(/ssd tier: .* used/);
  }, 120_000);

  it('an embedded client takes an SSD tier of its own (the offload option), mounted with protocol ssd', async () => {
    const own = await Client.setup(cluster.clientConfig(), { offload: { dir, size: 4 * 1024 * 1024 } });
    try {
      const seg = own.mountedSegments.find((x) => x.memory === 'ssd');
      expect(seg).toBeDefined();
      const detail = JSON.parse(await cluster.admin('/get_segments_detail')) as { segments: { segment_name: string; protocol: string }[] };
      expect(detail.segments.find((x) => x.segment_name === seg!.name)?.protocol).toBe('ssd');
      await expect(own.addOffloadFile(dir, 1000)).rejects.toMatchObject({ code: ErrorCode.INVALID_PARAMS });
      await expect(own.addOffloadFile(join(dir, 'missing'), 4096)).rejects.toMatchObject({ code: ErrorCode.INVALID_PARAMS });
    } finally {
      await own.close();
    }
  }, 60_000);

  it('a directory that cannot hold the offload file stops the store service with exit 2, naming --offload_dir', async () => {
    const svc = cluster.addService(['--global_segment_size=4MB', `--offload_dir=${join(dir, 'no-such-dir')}`, '--offload_size=4MB']);
    await expect(svc).rejects.toThrow(/exited \(2\)[\s\S]*--offload_dir: [\s\S]*no-such-dir/);
  });

  it('promotes an SSD-only object read past the admission threshold back to memory', async () => {
    const keys = [...(await client.queryByRegex('^fill-')).entries()].filter(([, rs]) => rs.every((r) => r.replica_type === ReplicaType.DISK)).map(([k]) => k);
    expect(keys.length).toBeGreaterThan(0);
    const key = keys[keys.length - 1];
    // Two clients: each keeps replica lists it read under their lease (client/replica-cache.ts),
    // so only the first read of each reaches the master and counts toward promotion.
    const other = await Client.setup(cluster.clientConfig(), { checksums: true });
    let value: Buffer;
    try {
      value = await client.get(key); // served from disk: one read
      expect((await other.get(key)).equals(value)).toBe(true); // two: past the threshold
    } finally {
      await other.close();
    }
    await eventually(async () => (await replicaTypes(client, key)).includes(ReplicaType.MEMORY), `${key} promoted`).catch(async (e: Error) => {
      throw new Error(`${e.message}\n${await cluster.admin('/metrics/summary')}`);
    });
    expect((await client.get(key)).equals(value)).toBe(true);
  }, 60_000);
});

// The hot cache serves values only a DISK replica holds: no promotion here, which would bring the
// object back to memory between the test's reads (a race the cluster above has).
describe('SSD tier: local hot cache', () => {
  let tier: SsdTier;
  let cluster: LocalCluster;
  let client: Client;

  beforeAll(async () => {
    tier = await ssdTier(['--enable_offload', '--default_kv_lease_ttl=200']);
    ({ cluster, client } = tier);
    for (let i = 0; i < 24; i++) await putRetry(client, `fill-${i}`, randomBytes(256 * KiB)); // 6 MiB into 4 MiB of memory
    await eventually(async () => (await replicaTypes(client, 'fill-0')).every((t) => t === ReplicaType.DISK), 'fill-0 on SSD only');
  }, 60_000);

  afterAll(() => tier?.stop(), 30_000);

  it('serves an SSD-only value read again from the local hot cache, and never a rewritten object from it', async () => {
    const env = { ...process.env, MC_STORE_LOCAL_HOT_CACHE_SIZE: '8mb', MC_STORE_LOCAL_HOT_BLOCK_SIZE: '64kb', MC_STORE_LOCAL_HOT_ADMISSION_THRESHOLD: '1' };
    const reader = await Client.setup(cluster.clientConfig(), { checksums: true, env });
    try {
      const keys = [...(await reader.queryByRegex('^fill-')).entries()].filter(([, rs]) => rs.every((r) => r.replica_type === ReplicaType.DISK)).map(([k]) => k);
      const key = keys[0];
      const first = await reader.get(key); // from the SSD, admitted
      expect((await reader.get(key)).equals(first)).toBe(true);
      expect(reader.hotCache!.stats()).toMatchObject({ hits: 1, admitted: 1 });
      // getInto and the batch reads are served from it too
      const into = Buffer.alloc(first.length + 10);
      expect(await reader.getInto(key, into)).toBe(first.length);
      expect(into.subarray(0, first.length).equals(first)).toBe(true);
      const [batched] = await reader.getBatch([key]);
      expect(batched.value?.equals(first)).toBe(true);
      const target = Buffer.alloc(first.length);
      const [intoBatch] = await reader.getIntoBatch([{ key, target }]);
      expect([intoBatch.size, target.equals(first)]).toEqual([first.length, true]);
      expect(reader.hotCache!.stats()).toMatchObject({ hits: 4, admitted: 1 });
      // A value written without checksums is cached too: the master's value version identifies it.
      const plain = await Client.setup(cluster.clientConfig(), { checksums: false });
      try {
        const value = randomBytes(200 * KiB);
        await putRetry(plain, 'nosum', value);
        for (let i = 0; i < 24; i++) await putRetry(plain, `nosum-push-${i}`, randomBytes(256 * KiB)); // pushes it out of memory
        await eventually(async () => (await replicaTypes(reader, 'nosum')).every((t) => t === ReplicaType.DISK), 'nosum on SSD only');
        const before = reader.hotCache!.stats().hits;
        expect((await reader.get('nosum')).equals(value)).toBe(true);
        expect((await reader.get('nosum')).equals(value)).toBe(true);
        expect(reader.hotCache!.stats().hits).toBe(before + 1);
      } finally {
        await plain.close();
      }
      // rewritten by another client: the new replica list names other bytes, never the cached ones
      const next = randomBytes(first.length);
      // (removable once the reader's read lease ran out)
      await eventually(
        () =>
          client.remove(key).then(
            () => true,
            () => false,
          ),
        `${key} removed`,
      );
      await putRetry(client, key, next);
      expect((await reader.get(key)).equals(next)).toBe(true);
    } finally {
      await reader.close();
    }
  }, 60_000);
});

describe('SSD tier: a store service killed mid-offload', () => {
  let dir: string;
  let cluster: LocalCluster;
  let client: Client;

  afterAll(async () => {
    await client?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('never serves a torn copy: each object is read from its memory replica, bit-exact; the lost DISK replicas are made again on the SSD left', async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvstore-ssd-kill-'));
    // the SSD tier on another store service, killed while copies land on it
    const run = await offloadUnderWay(dir, 40, 512 * KiB, 'kill');
    ({ cluster, client } = run);
    const { ssd, values } = run;
    const spare = await cluster.addService(['--global_segment_size=0', `--offload_dir=${dir}`, '--offload_size=64MB']);
    const detail = JSON.parse(await cluster.admin('/get_segments_detail')) as { segments: { segment_name: string; client_id: string }[] };
    const spareSegments = new Set(detail.segments.filter((g) => g.client_id === spare.clientId).map((g) => g.segment_name));
    expect(spareSegments.size).toBeGreaterThan(0);
    ssd.proc.kill('SIGKILL');
    for (const [key, value] of values) {
      const got = await client.get(key);
      expect(got.equals(value)).toBe(true);
    }
    // Once the master dropped the dead service, every object is offloaded again from its memory
    // replica: each has a DISK replica, on the SSD left.
    const onSpare = async (): Promise<boolean> => {
      const listed = await client.queryByRegex('^kill-');
      for (const key of values.keys()) {
        const disk = (listed.get(key) ?? []).filter((r) => r.replica_type === ReplicaType.DISK);
        if (disk.length === 0 || disk.some((r) => r.handles.some((h) => !spareSegments.has(h.segment_name)))) return false;
      }
      return true;
    };
    await eventually(onSpare, 'every object offloaded again to the SSD left').catch(async (e: Error) => {
      throw new Error(`${e.message}\n${await cluster.admin('/metrics/summary')}`);
    });
    expect(await cluster.admin('/metrics/summary')).toMatch(/offload: .* [1-9]\d* queued again \(DISK replica lost\)/);
    for (const [key, value] of values) expect((await client.get(key)).equals(value)).toBe(true);
  }, 120_000);
});

describe('SSD tier: the store service holding the memory replicas killed mid-offload', () => {
  let dir: string;
  let cluster: LocalCluster;
  let client: Client;

  afterAll(async () => {
    await client?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('each object is then read bit-exact from its DISK replica, or is gone: never other bytes', async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvstore-ssd-kill-mem-'));
    const run = await offloadUnderWay(dir, 60, 256 * KiB, 'm');
    ({ cluster, client } = run);
    const { mem, values } = run;
    mem.proc.kill('SIGKILL');
    await eventually(() => noneOf(client, values.keys(), ReplicaType.MEMORY), 'memory replicas on the dead service dropped');
    let readable = 0;
    for (const [key, value] of values) {
      const types = await replicaTypes(client, key);
      if (types.length === 0) {
        await expect(client.get(key)).rejects.toMatchObject({ code: ErrorCode.OBJECT_NOT_FOUND });
        continue;
      }
      expect(types).toEqual([ReplicaType.DISK]);
      expect((await client.get(key)).equals(value)).toBe(true);
      readable++;
    }
    expect(readable).toBeGreaterThan(0); // the copies made before the kill serve
  }, 120_000);
});

describe('SSD tier: offloads start without waiting for a heartbeat (copy notices)', () => {
  it('a copier whose heartbeat is 10 minutes away still offloads at once: memory filled 3x over, every put completes, every object bit-exact from disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvstore-ssd-push-'));
    const cluster = await LocalCluster.start({ masterArgs: ['--enable_offload', '--client_ttl=1200s'] });
    // The only copier: an embedded client holding the memory and an SSD tier of its own, that
    // pings at setup and then only every 10 minutes. Offloads reach it through notices on its
    // master channel; without them its copies (and so the puts, which wait for memory the
    // copies free) would wait for that heartbeat and putRetry would give up.
    const copier = await Client.setup(cluster.clientConfig({ global_segment_size: 4 * 1024 * 1024 }), {
      offload: { dir, size: 64 * 1024 * 1024 },
      heartbeatIntervalMs: 600_000,
      checksums: true,
    });
    const reader = await Client.setup(cluster.clientConfig(), { checksums: true });
    try {
      const values = new Map<string, Buffer>();
      for (let i = 0; i < 48; i++) {
        const value = randomBytes(i % 3 === 0 ? 64 * KiB + 5 : 256 * KiB);
        await putRetry(reader, `push-${i}`, value);
        values.set(`push-${i}`, value);
      }
      await eventually(
        async () => Number(/offload: (\d+) queued, (\d+) in flight, (\d+) done/.exec(await cluster.admin('/metrics/summary'))?.[3] ?? 0) >= 48,
        'every object offloaded',
      );
      let diskOnly = 0;
      for (const [key, value] of values) {
        const types = await replicaTypes(reader, key);
        expect(types).toContain(ReplicaType.DISK);
        if (types.every((t) => t === ReplicaType.DISK)) diskOnly++;
        expect((await reader.get(key)).equals(value)).toBe(true);
      }
      expect(diskOnly).toBeGreaterThan(0); // read from the SSD file the copies wrote with pwritev
    } finally {
      await reader.close();
      await copier.close();
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
