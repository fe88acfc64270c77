// End to end, real processes on 127.0.0.1: a store_master and three store_service processes from
// dist/, embedded clients in this process. Objects of 1 byte to 64 MiB round-trip bit-exact over
// 2 and 3 replicas; batches; zero-copy buffers; pure client / pure server rules; concurrent puts of
// one key; removal rules. Run `npm run build` first.
import { createHash, randomBytes } from 'node:crypto';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { LeaseExpiredError, ObjectExistsError, ObjectLeasedError, ObjectNotFoundError, ObjectNotReadyError, StoreError, UnavailableError } from '../client/errors.js';
import { ReplicaStatus } from '../proto/gen/store/ReplicaStatus.js';
import { ErrorCode } from '../common/error-code.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { mapMemory, TransferEngine } from '../native/index.js';
import { runSecret } from '../native/test-fixtures/run-secret.js';

const MiB = 1024 * 1024;
let cluster: LocalCluster;
let client: Client;

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 3, segmentSize: '320MB' });
  client = await Client.setup(cluster.clientConfig({ local_buffer_size: 32 * MiB }));
}, 60_000);

afterAll(async () => {
  await client?.close();
  await cluster?.stop();
}, 30_000);

const digest = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Reads one replica's bytes straight from its segments with a transfer engine of the test's own. */
async function readReplicaRaw(r: ReplicaInfo__Output): Promise<Buffer> {
  const size = r.handles.reduce((n, h) => n + Number(h.size), 0);
  const region = mapMemory({ size, kind: 'memfd' });
  const engine = new TransferEngine({ host: '127.0.0.1', authSecret: runSecret() });
  try {
    engine.start();
    engine.registerRegion(region.address, region.size);
    let off = 0;
    const ops = r.handles.map((h) => {
      const op = { op: 'read' as const, endpoint: h.te_endpoint, remoteAddress: Number(h.buffer), localAddress: region.address + off, length: Number(h.size) };
      off += Number(h.size);
      return op;
    });
    await engine.transfer(ops);
    return Buffer.from(Buffer.from(region.buffer, 0, size));
  } finally {
    engine.close();
    region.release();
  }
}

describe('round trips over several replicas', () => {
  const sizes = [1, 7, 4096, 65_537, MiB + 3, 16 * MiB, 64 * MiB];
  for (const replicas of [2, 3]) {
    it(`objects of 1 B to 64 MiB come back bit-exact with ${replicas} replicas on distinct segments`, async () => {
      for (const size of sizes) {
        const key = `rt-${replicas}-${size}`;
        const value = randomBytes(size);
        await client.put(key, value, { replica_num: replicas });
        const got = await client.get(key);
        expect(got.length).toBe(size);
        expect(digest(got)).toBe(digest(value));
        expect(await client.getSize(key)).toBe(size);
        const lists = await client.queryByRegex(`^${key}$`);
        const list = lists.get(key)!;
        expect(list.filter((r) => r.status === ReplicaStatus.COMPLETE)).toHaveLength(replicas);
        const segs = new Set(list.map((r) => r.handles[0].segment_name));
        expect(segs.size).toBe(replicas);
        // Every replica holds the bytes, not only the one a Get picked: read each one raw.
        for (const r of list) expect(digest(await readReplicaRaw(r))).toBe(digest(value));
      }
      const res = await client.getBatch(sizes.map((s) => `rt-${replicas}-${s}`));
      for (const [i, r] of res.entries()) {
        expect(r.error).toBeUndefined();
        expect(r.value!.length).toBe(sizes[i]);
      }
      await client.removeByRegex(`^rt-${replicas}-`).catch(() => 0);
    }, 120_000);
  }

  it('stores a value given as slices, one handle per slice', async () => {
    const parts = [randomBytes(1000), randomBytes(1), randomBytes(300_000)];
    await client.put('sliced', parts, { replica_num: 2 });
    expect(digest(await client.get('sliced'))).toBe(digest(Buffer.concat(parts)));
    const [r] = (await client.queryByRegex('^sliced$')).get('sliced')!;
    expect(r.handles.map((h) => Number(h.size))).toEqual([1000, 1, 300_000]);
  });

  it('batches put and get many keys in one round trip each, with per-key outcomes', async () => {
    const items = Array.from({ length: 50 }, (_, i) => ({ key: `batch-${i}`, value: randomBytes(1 + i * 997) }));
    const put = await client.putBatch([...items, { key: 'batch-0', value: randomBytes(10) }]);
    expect(put.slice(0, 50).every((r) => r.error === undefined)).toBe(true);
    expect(put[50].error).toBeDefined(); // the same key twice in one batch is refused
    const got = await client.getBatch([...items.map((i) => i.key), 'batch-missing']);
    for (const [i, it] of items.entries()) expect(digest(got[i].value!)).toBe(digest(it.value));
    expect(got[50].error).toBeInstanceOf(ObjectNotFoundError);
    const again = await client.putBatch([{ key: 'batch-1', value: randomBytes(5) }]);
    expect(again[0].error).toBeInstanceOf(ObjectExistsError);
  });

  it('puts from and gets into registered memory without staging', async () => {
    const lease = await client.allocBuffer(3 * MiB);
    randomBytes(3 * MiB).copy(lease.buffer);
    const want = digest(lease.buffer);
    await client.put('zero-copy', lease.buffer, { replica_num: 2 });
    lease.buffer.fill(0);
    expect(await client.getInto('zero-copy', lease.buffer)).toBe(3 * MiB);
    expect(digest(lease.buffer)).toBe(want);
    lease.release();
    expect(() => lease.buffer).toThrow(/after release/);
    await expect(client.getInto('zero-copy', Buffer.alloc(10))).rejects.toThrow(/target holds 10 B/);
  });

  it('upsert replaces a value, a Put of a present key is refused, and a leased key is not overwritten', async () => {
    await client.put('up', Buffer.from('first'));
    await expect(client.put('up', Buffer.from('again'))).rejects.toBeInstanceOf(ObjectExistsError);
    await client.upsert('up', Buffer.from('second!'));
    await client.put('up2', Buffer.from('2'));
    const r = await client.upsertBatch([
      { key: 'up2', value: Buffer.from('third') },
      { key: 'up-new', value: Buffer.from('new') },
    ]);
    expect(r.map((x) => x.error)).toEqual([undefined, undefined]);
    expect((await client.get('up')).toString()).toBe('second!');
    expect((await client.get('up2')).toString()).toBe('third');
    expect((await client.get('up-new')).toString()).toBe('new');
    // The Gets above hold leases: the bytes under a reader are not replaced.
    await expect(client.upsert('up', Buffer.from('fourth'))).rejects.toBeInstanceOf(ObjectLeasedError);
    expect((await client.get('up')).toString()).toBe('second!');
  });

  it('reports missing keys and refuses bad input without losing stored data', async () => {
    await client.put('keep', Buffer.from('kept'));
    await expect(client.get('nope')).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(await client.isExist('nope')).toBe(false);
    expect(await client.isExist('keep')).toBe(true);
    await expect(client.put('', Buffer.from('x'))).rejects.toThrow(/the key is empty/);
    await expect(client.put('empty', Buffer.alloc(0))).rejects.toThrow(/empty/);
    await expect(client.put('bad-replicas', Buffer.from('x'), { replica_num: 0 })).rejects.toThrow(/replica_num/);
    // keys outside the alphabet (common/key-rules.ts) are refused before anything is sent
    for (const refused of [
      client.put('a\nb', Buffer.from('x')),
      client.get('alias\ud800'),
      client.isExist('tab\t'),
      client.batchIsExist(['ok', 'nul\0']),
      client.getSize('alias\udfff'),
      client.remove('del\u007f'),
      client.batchReplicaClear(['c1\u0085']),
    ]) {
      await expect(refused).rejects.toMatchObject({ name: 'InvalidParamsError', code: ErrorCode.INVALID_KEY });
    }
    expect((await client.get('keep')).toString()).toBe('kept');
  });

  it('a leased object cannot be removed; queries and cluster calls answer', async () => {
    await client.put('leased', Buffer.from('v'));
    await client.get('leased'); // grants a lease
    await expect(client.remove('leased')).rejects.toBeInstanceOf(ObjectLeasedError);
    await client.put('gone', Buffer.from('v'));
    await client.remove('gone');
    await expect(client.get('gone')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await client.putBatch(['rx-1', 'rx-2', 'rx-3'].map((key) => ({ key, value: Buffer.from(key) })));
    expect(await client.removeByRegex('^rx-[12]$')).toBe(2);
    expect([...(await client.queryByRegex('^rx-')).keys()]).toEqual(['rx-3']);
    const ips = await client.batchQueryIp(cluster.services.map((s) => s.clientId));
    expect([...ips.values()].flat()).toContain('127.0.0.1');
  });
});

describe('leases', () => {
  it('a read that finishes after its lease ran out fails with no data', async () => {
    await client.put('lease-me', randomBytes(200_000), { replica_num: 2 });
    // A clock on which every reading is 6 s after the previous one: the lease (5 s) always expires
    // between GetReplicaList and the end of the read.
    let t = 0;
    const slow = await Client.setup(cluster.clientConfig({ local_buffer_size: 4 * MiB }), { now: () => (t += 6000) });
    try {
      await expect(slow.get('lease-me')).rejects.toBeInstanceOf(LeaseExpiredError);
      const target = Buffer.alloc(200_000);
      await expect(slow.getInto('lease-me', target)).rejects.toBeInstanceOf(LeaseExpiredError);
      const [r] = await slow.getBatch(['lease-me']);
      expect(r.value).toBeUndefined();
      expect(r.error).toBeInstanceOf(LeaseExpiredError);
    } finally {
      await slow.close();
    }
  });
});

describe('roles', () => {
  it('a pure server (local_buffer_size 0) serves its segment but refuses Get and Put', async () => {
    const server = await Client.setup(cluster.clientConfig({ global_segment_size: 32 * MiB, local_buffer_size: 0 }));
    try {
      await expect(server.put('ps', Buffer.from('x'))).rejects.toBeInstanceOf(UnavailableError);
      await expect(server.get('ps')).rejects.toThrow(/pure server/);
      const seg = server.mountedSegments[0].name;
      expect((await cluster.admin('/get_all_segments')).split('\n')).toContain(seg);
      const v = randomBytes(100_000);
      await client.put('on-pure-server', v, { preferred_segment: seg });
      const [r] = (await client.queryByRegex('^on-pure-server$')).get('on-pure-server')!;
      expect(r.handles[0].segment_name).toBe(seg);
      expect(digest(await client.get('on-pure-server'))).toBe(digest(v));
    } finally {
      await server.close();
    }
  });

  it('a pure client (global_segment_size 0) mounts nothing; a client with a segment reads its own replica by memcpy', async () => {
    expect(client.mountedSegments).toEqual([]);
    // Local memcpy is off by default (MC_STORE_MEMCPY=0): this client asks for it.
    const both = await Client.setup(cluster.clientConfig({ global_segment_size: 32 * MiB, local_buffer_size: 8 * MiB }), {
      env: { ...process.env, MC_STORE_MEMCPY: '1' },
    });
    const seg = both.mountedSegments[0].name;
    try {
      const v = randomBytes(2 * MiB);
      await both.put('own', v, { preferred_segment: seg });
      expect(digest(await both.get('own'))).toBe(digest(v));
      expect(digest(await client.get('own'))).toBe(digest(v)); // and others read it remotely
    } finally {
      await both.close();
    }
    expect((await cluster.admin('/get_all_segments')).split('\n')).not.toContain(seg); // close() unmounted it
  });

  it('protocol rdma is refused plainly', async () => {
    await expect(Client.setup(cluster.clientConfig({ protocol: 'rdma' }))).rejects.toThrow(/RDMA is not available in this build/);
  });
});

describe('concurrent puts of one key', () => {
  it('exactly one wins; readers see that value or not-found, never anything else', async () => {
    const others = await Promise.all([1, 2, 3].map(() => Client.setup(cluster.clientConfig({ local_buffer_size: 8 * MiB }))));
    try {
      const writers = [client, ...others];
      const values = writers.map((_, i) => Buffer.alloc(256 * 1024, 0x41 + i));
      const seen: string[] = [];
      let reading = true;
      const reader = (async () => {
        while (reading) {
          try {
            seen.push(digest(await others[0].get('contended')));
          } catch (e) {
            // Not written yet (absent, or PutStart without PutEnd): no value, never a partial one.
            expect(e instanceof ObjectNotFoundError || e instanceof ObjectNotReadyError).toBe(true);
          }
        }
      })();
      const outcomes = await Promise.allSettled(writers.map((w, i) => w.put('contended', values[i], { replica_num: 2 })));
      reading = false;
      await reader;
      const winners = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [i] : []));
      expect(winners).toHaveLength(1);
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(StoreError);
      const want = digest(values[winners[0]]);
      expect(digest(await client.get('contended'))).toBe(want);
      expect(seen.every((d) => d === want)).toBe(true);
    } finally {
      await Promise.all(others.map((o) => o.close()));
    }
  });
});
