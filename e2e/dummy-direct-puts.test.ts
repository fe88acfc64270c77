// End to end, real processes: a dummy client's puts of objects into same-host memory made by the
// dummy itself (docs/client.md "Puts a dummy writes itself"): stored bit-exact with no message to
// the real client (its /segments counts the calls it got), single and batched, from shared memory
// and from plain buffers, with the CRC-32C of every slice recorded as the real client records them
// (MC_STORE_CHECKSUM=1); the master's refusals are the embedded client's errors; a placement on
// another host (a store service on 127.0.0.2) and a real client whose Puts write the file tier go
// through the real client. Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import { MasterClient } from '../client/master-client.js';
import { loadNative } from '../client/native-port.js';
import { InvalidParamsError, StoreError } from '../client/errors.js';
import { ErrorCode } from '../common/error-code.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const env = { ...process.env, MC_STORE_CHECKSUM: '1' };

/** Requests the store service received from dummy clients so far (its /segments report). */
async function callsServed(s: StoreServiceProcess): Promise<number> {
  return ((await (await fetch(`http://${s.http}/segments`)).json()) as { dummy_clients: { calls: number } }).dummy_clients.calls;
}

describe('puts written by the dummy itself', () => {
  let cluster: LocalCluster;
  let a: StoreServiceProcess; // the dummy's real client
  let b: StoreServiceProcess; // another memory holder on this host
  let far: StoreServiceProcess; // a memory holder the dummy takes for another host (127.0.0.2)
  let embedded: Client;
  let dummy: DummyClient;
  let master: MasterClient;

  beforeAll(async () => {
    cluster = await LocalCluster.start({ storeServices: 2, segmentSize: '64MB', env });
    [a, b] = cluster.services;
    far = await cluster.addService(['--host=127.0.0.2', '--local_hostname=127.0.0.2']);
    embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), { env });
    dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 32 * MiB });
    master = await MasterClient.connect(cluster.master.rpc);
  }, 60_000);

  afterAll(async () => {
    master?.close();
    await dummy?.close();
    await embedded?.close();
    await cluster?.stop();
  }, 30_000);

  /** The object's memory replica's CRC-32C per slice as the master recorded them. */
  async function recorded(key: string): Promise<number[]> {
    const res = await master.getReplicaList({ key });
    expect(res.status_code).toBe(ErrorCode.OK);
    expect(res.replica_list.every((r) => r.replica_type === ReplicaType.MEMORY)).toBe(true);
    return res.slice_checksums.map(Number);
  }

  it('stores them here in every put form: bit-exact, checksums recorded, and the real client gets no message', async () => {
    const native = await loadNative();
    const cases: { name: string; value: Buffer[]; segment: string }[] = [
      { name: '4k-a', value: [randomBytes(4096)], segment: a.segment },
      { name: '64k1-b', value: [randomBytes(64 * KiB + 1)], segment: b.segment },
      { name: '3m-a', value: [randomBytes(3 * MiB)], segment: a.segment },
      { name: 'slices-b', value: [randomBytes(1000), randomBytes(70_000), randomBytes(5)], segment: b.segment },
    ];
    const calls = await callsServed(a);
    const before = dummy.directPutStats;
    let objects = 0;
    for (const c of cases) {
      const whole = Buffer.concat(c.value);
      const config = { preferred_segment: c.segment };
      // from shared memory (no copy), from plain buffers (staged), and in a batch with another object
      const lease = await dummy.allocBuffer(whole.length);
      whole.copy(lease.buffer);
      await dummy.put(`dp-${c.name}-shared`, lease.buffer, config);
      lease.release();
      await dummy.put(`dp-${c.name}-plain`, c.value.length === 1 ? c.value[0] : c.value, config);
      const other = randomBytes(333);
      const r = await dummy.putBatch([
        { key: `dp-${c.name}-batch`, value: c.value.length === 1 ? c.value[0] : c.value, config },
        { key: `dp-${c.name}-batch-other`, value: other, config: { preferred_segment: a.segment } },
      ]);
      expect(r).toEqual([{ key: `dp-${c.name}-batch` }, { key: `dp-${c.name}-batch-other` }]);
      objects += 4;
      for (const form of ['shared', 'plain', 'batch']) {
        const key = `dp-${c.name}-${form}`;
        expect((await embedded.get(key)).equals(whole)).toBe(true);
        const slices = form === 'shared' ? [whole] : c.value; // the shared form puts the value as one slice
        expect(await recorded(key)).toEqual(slices.map((s) => native.crc32c(s)));
      }
      expect((await embedded.get(`dp-${c.name}-batch-other`)).equals(other)).toBe(true);
    }
    const after = dummy.directPutStats;
    expect(after.directPuts - before.directPuts).toBe(objects);
    expect(after.directPutFallbacks).toBe(before.directPutFallbacks);
    expect(await callsServed(a)).toBe(calls);
  });

  it("refuses what the master refuses with the embedded client's errors, and leaves bad batches to the real client", async () => {
    const value = randomBytes(4096);
    await dummy.put('dp-twice', value);
    const again = await dummy.put('dp-twice', randomBytes(4096)).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(StoreError);
    expect((again as StoreError).code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS);
    const r = await dummy.putBatch([
      { key: 'dp-twice', value: randomBytes(10) },
      { key: 'dp-batch-new', value },
    ]);
    expect(r[0].error?.code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS);
    expect(r[1]).toEqual({ key: 'dp-batch-new' });
    expect((await embedded.get('dp-twice')).equals(value)).toBe(true); // the first value stays
    // a key twice in one batch: the real client names it, the other key is stored
    const calls = await callsServed(a);
    const dup = await dummy.putBatch([
      { key: 'dp-dup', value },
      { key: 'dp-dup', value },
      { key: 'dp-dup-other', value },
    ]);
    expect(dup[1].error).toBeInstanceOf(InvalidParamsError);
    expect(dup[2]).toEqual({ key: 'dp-dup-other' });
    expect(await callsServed(a)).toBe(calls + 1);
    expect((await embedded.get('dp-dup-other')).equals(value)).toBe(true);
  });

  it('a placement on another host goes through the real client, and puts with that preference pause', async () => {
    const value = randomBytes(64 * KiB);
    const config = { preferred_segment: far.segment };
    const before = dummy.directPutStats;
    const calls = await callsServed(a);
    await dummy.put('dp-far-1', value, config);
    await dummy.put('dp-far-2', value, config); // not tried here (paused): straight to the real client
    const r = await dummy.putBatch([{ key: 'dp-far-3', value, config }]);
    expect(r).toEqual([{ key: 'dp-far-3' }]);
    const after = dummy.directPutStats;
    expect(after.directPutFallbacks - before.directPutFallbacks).toBe(1);
    expect(after.directPuts).toBe(before.directPuts);
    expect(await callsServed(a)).toBe(calls + 3);
    for (const k of ['dp-far-1', 'dp-far-2', 'dp-far-3']) {
      expect((await embedded.get(k)).equals(value)).toBe(true);
      const res = await master.getReplicaList({ key: k });
      expect(res.replica_list.flatMap((x) => x.handles.map((h) => h.segment_name))).toEqual([far.segment]);
    }
    // other preferences are still put here
    await dummy.put('dp-near', value, { preferred_segment: b.segment });
    expect(dummy.directPutStats.directPuts).toBe(after.directPuts + 1);
  });

  it('STORE_DUMMY_DIRECT_PUTS=0: every put goes through the real client', async () => {
    const off = await DummyClient.connect({ socketPath: a.socket, bufferSize: 8 * MiB, env: { ...process.env, STORE_DUMMY_DIRECT_PUTS: '0' } });
    try {
      const calls = await callsServed(a);
      const value = randomBytes(4096);
      await off.put('dp-off', value);
      expect(await callsServed(a)).toBe(calls + 1);
      expect(off.directPutStats).toEqual({ directPuts: 0, directPutFallbacks: 0 });
      expect((await embedded.get('dp-off')).equals(value)).toBe(true);
    } finally {
      await off.close();
    }
  });
});

describe('puts of a real client that writes the file tier', () => {
  it('go through the real client: the file copy is made', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kvstore-dp-files-'));
    const cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '64MB', masterArgs: [`--root_fs_dir=${root}`], env });
    let dummy: DummyClient | undefined;
    try {
      const [a] = cluster.services;
      dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 8 * MiB });
      const calls = await callsServed(a);
      const value = randomBytes(4096);
      await dummy.put('dp-file', value);
      expect(await callsServed(a)).toBe(calls + 1);
      expect(dummy.directPutStats).toEqual({ directPuts: 0, directPutFallbacks: 0 });
      expect((await dummy.get('dp-file')).equals(value)).toBe(true);
    } finally {
      await dummy?.close();
      await cluster.stop();
      rmSync(root, { recursive: true, force: true });
    }
  }, 60_000);
});
