// End to end, real processes on 127.0.0.1: a dummy client reading same-host memory itself while
// the real client's read lease holds (docs/client.md "Dummy clients"). A repeated read is served
// here bit-exact with no message to the real client (its /segments counts the calls it got);
// once the lease ended and another client removed the object, the old bytes are never returned;
// a restarted real client's dummies use nothing they learned from the old one; a corrupted byte
// under a cached location is caught by its CRC-32C and the read goes through the real client; a
// dummy whose uid the serving engine refuses fds reads through the real client. Checksums are on
// (MC_STORE_CHECKSUM=1: the real clients record every slice's CRC). The dummies here read their
// first reads through the real client (directReads: false): what they learn from it is what is
// tested; first reads looked up at the master by the dummy itself are e2e/dummy-direct-reads.test.ts's.
// Run `npm run build` first.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, copyFileSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import { ObjectLeasedError, ObjectNotFoundError, StoreError } from '../client/errors.js';
import { freePort } from './free-port.js';
import { asStranger, cannotSwitchUid, strangerUid } from '../native/test-fixtures/other-uid.js';

const MiB = 1024 * 1024;
const LEASE_TTL_MS = 2000;
const env = { ...process.env, MC_STORE_CHECKSUM: '1' };
let cluster: LocalCluster;
let a: StoreServiceProcess; // the dummies' real client
let b: StoreServiceProcess; // another memory holder on this host
let embedded: Client;

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 2, segmentSize: '64MB', masterArgs: [`--default_kv_lease_ttl=${LEASE_TTL_MS}ms`], env });
  [a, b] = cluster.services;
  embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), { env });
}, 60_000);

afterAll(async () => {
  await embedded?.close();
  await cluster?.stop();
}, 30_000);

/** Requests the store service received from dummy clients so far (its /segments report). */
async function callsServed(s: StoreServiceProcess): Promise<number> {
  return ((await (await fetch(`http://${s.http}/segments`)).json()) as { dummy_clients: { calls: number } }).dummy_clients.calls;
}

/**
 * Removes `key` through `client` once no read lease holds it any more. The master refuses the
 * removal while one does and nothing announces the lease's end: the attempt is repeated.
 */
async function removeOnceUnleased(client: Client, key: string): Promise<void> {
  for (;;) {
    try {
      await client.remove(key);
      return;
    } catch (e) {
      if (!(e instanceof ObjectLeasedError)) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('a dummy client on the Unix socket', () => {
  let dummy: DummyClient;
  beforeAll(async () => {
    dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 32 * MiB, directReads: false });
  });
  afterAll(async () => dummy?.close());

  it('serves a repeated read itself: bit-exact, and the real client gets no message', async () => {
    const cases: { key: string; value: Buffer[]; segment: string }[] = [
      { key: 'lr-4k-a', value: [randomBytes(4096)], segment: a.segment },
      { key: 'lr-64k1-b', value: [randomBytes(64 * 1024 + 1)], segment: b.segment },
      { key: 'lr-3m-a', value: [randomBytes(3 * MiB)], segment: a.segment },
      { key: 'lr-slices-b', value: [randomBytes(1000), randomBytes(70_000), randomBytes(5)], segment: b.segment },
    ];
    for (const c of cases) {
      const whole = Buffer.concat(c.value);
      await dummy.put(c.key, c.value.length === 1 ? c.value[0] : c.value, { preferred_segment: c.segment });
      const lease = await dummy.allocBuffer(whole.length);
      expect(await dummy.getInto(c.key, lease.buffer)).toBe(whole.length); // through the real client: it says where the bytes are
      const calls = await callsServed(a);
      const hits = dummy.localReadStats.hits;
      lease.buffer.fill(0);
      expect(await dummy.getInto(c.key, lease.buffer)).toBe(whole.length); // into shared memory
      expect(lease.buffer.equals(whole)).toBe(true);
      const plain = Buffer.alloc(whole.length + 7); // memory outside the shared regions
      expect(await dummy.getInto(c.key, plain)).toBe(whole.length);
      expect(plain.subarray(0, whole.length).equals(whole)).toBe(true);
      expect((await dummy.get(c.key)).equals(whole)).toBe(true);
      const [batch] = await dummy.getIntoBatch([{ key: c.key, target: lease.buffer }]);
      expect(batch.size).toBe(whole.length);
      expect(dummy.localReadStats.hits).toBe(hits + 4);
      expect(await callsServed(a)).toBe(calls);
      lease.release();
    }
    expect(dummy.localReadStats.fallbacks).toBe(0);
  });

  it('never returns the old bytes once the lease ended and another client removed the object', async () => {
    const key = 'lr-removed';
    const old = randomBytes(8192);
    await dummy.put(key, old, { preferred_segment: b.segment });
    const target = Buffer.alloc(old.length);
    await dummy.getInto(key, target);
    const hits = dummy.localReadStats.hits;
    expect(await dummy.getInto(key, target)).toBe(old.length);
    expect(dummy.localReadStats.hits).toBe(hits + 1); // the location was known and used
    await removeOnceUnleased(embedded, key);
    await expect(dummy.getInto(key, target)).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(dummy.get(key)).rejects.toBeInstanceOf(ObjectNotFoundError);
    // the memory may hold another object now: the dummy reads what the key holds
    const fresh = randomBytes(8192);
    await embedded.put(key, fresh, { preferred_segment: b.segment });
    expect((await dummy.get(key)).equals(fresh)).toBe(true);
    expect((await dummy.get(key)).equals(fresh)).toBe(true);
  });

  // Writing into another process's memory: /proc/<pid>/mem needs root (or ptrace rights over it).
  const notRoot = process.getuid?.() !== 0;
  (notRoot ? it.skip : it)(
    `catches a corrupted byte under a cached location by its CRC: the read goes the usual way and fails as it does${notRoot ? ' (skipped: needs root to write into the store service through /proc/<pid>/mem)' : ''}`,
    async () => {
      const key = 'lr-corrupt';
      const value = randomBytes(16 * 1024);
      await dummy.put(key, value, { preferred_segment: a.segment });
      const target = Buffer.alloc(value.length);
      await dummy.getInto(key, target); // through the real client, which says where the bytes are
      const [handle] = (await embedded.queryByRegex(`^${key}$`)).get(key)![0].handles;
      // one byte flipped in A's memory (the page the dummy mapped), as a stray write would
      const mem = openSync(`/proc/${a.proc.pid}/mem`, 'r+');
      try {
        writeSync(mem, Buffer.from([value[100] ^ 0xff]), 0, 1, Number(handle.buffer) + 100);
      } finally {
        closeSync(mem);
      }
      const { hits, fallbacks } = dummy.localReadStats;
      target.fill(0);
      // the usual way (an embedded client's read) fails: every replica failed its CRC check
      const usual = await embedded.get(key).then(
        () => undefined,
        (e: StoreError) => e,
      );
      expect(usual).toBeInstanceOf(StoreError);
      expect(usual!.message).toMatch(/CRC-32C/);
      await expect(dummy.getInto(key, target)).rejects.toMatchObject({ code: usual!.code, message: expect.stringMatching(/CRC-32C/) });
      await expect(dummy.get(key)).rejects.toMatchObject({ code: usual!.code });
      expect(dummy.localReadStats).toMatchObject({ hits, fallbacks: fallbacks + 1 });
    },
  );
});

describe('a restarted real client', () => {
  it('is not trusted with what the dummy learned from the previous one', async () => {
    const port = await freePort();
    const first = await cluster.addService([`--rpc_port=${port}`]);
    const dummy = await DummyClient.connect({ socketPath: first.socket, bufferSize: 8 * MiB, requestTimeoutMs: 20_000, directReads: false });
    try {
      const inB = randomBytes(4096);
      const inFirst = randomBytes(4096);
      await dummy.put('lr-restart-b', inB, { preferred_segment: b.segment });
      await dummy.put('lr-restart-first', inFirst, { preferred_segment: first.segment });
      const t = Buffer.alloc(4096);
      for (const k of ['lr-restart-b', 'lr-restart-first']) for (let i = 0; i < 2; i++) await dummy.getInto(k, t);
      const { hits } = dummy.localReadStats;
      expect(hits).toBe(2);
      first.proc.kill('SIGKILL');
      await first.exited;
      const second = await cluster.addService([`--rpc_port=${port}`]);
      // B kept its object and its memory, and the lease the first instance took is still running:
      // the location is still right, but it came from another instance: asked again
      const calls = await callsServed(second);
      expect(await dummy.getInto('lr-restart-b', t)).toBe(4096);
      expect(t.equals(inB)).toBe(true);
      expect(dummy.localReadStats.hits).toBe(hits);
      expect(await callsServed(second)).toBeGreaterThan(calls);
      // the first instance's memory (still mapped here) is never read again
      await expect(dummy.getInto('lr-restart-first', t)).rejects.toBeInstanceOf(StoreError);
      expect(dummy.localReadStats.hits).toBe(hits);
    } finally {
      await dummy.close();
    }
  });
});

// Another uid, real processes: the test runs as root and starts the dummy under setpriv.
(cannotSwitchUid ? describe.skip : describe)(`a dummy client whose uid an engine refuses fds${cannotSwitchUid ? ` (skipped: needs ${cannotSwitchUid})` : ''}`, () => {
  it('reads through the real client, bit-exact', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvstore-lr-uid-'));
    chmodSync(dir, 0o1777);
    try {
      // its real client admits the uid (and gives it fds); B, holding the object, does not
      const real = await cluster.addService([`--shm_dir=${dir}`, `--peer_uids=${strangerUid}`]);
      chmodSync(real.socket, 0o777); // as a permissive umask or shared volume leaves it
      const secret = join(dir, 'secret');
      copyFileSync(process.env.STORE_CLUSTER_SECRET_FILE!, secret);
      chmodSync(secret, 0o644);
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          asStranger[0],
          [...asStranger.slice(1), process.execPath, join(process.cwd(), 'e2e/fixtures/dummy-reader.mjs'), real.socket, 'lr-stranger', b.segment],
          { env: { ...process.env, STORE_CLUSTER_SECRET_FILE: secret, STORE_SHM_DIR: dir }, timeout: 60_000 },
          (e, stdout, stderr) => (e ? reject(new Error(`${e.message}: ${stderr}`)) : resolve(stdout)),
        ),
      );
      const r = JSON.parse(out.trim()) as { exact: boolean; hits: number; fallbacks: number };
      expect(r).toMatchObject({ exact: true, hits: 0 });
      expect(r.fallbacks).toBeGreaterThanOrEqual(1); // it tried B's memory and was refused
      await b.waitFor(new RegExp(`same-host peer pid \\d+ uid ${strangerUid} refused memory fds`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
