// A store pod removed mid-read loses no read. Kubernetes removes a store pod (scale-down, rolling
// update, drain) by sending its store_service SIGTERM (the preStop hook and the kubelet's stop do
// the same); this test plays that part with real processes: readers keep reading objects that live
// on the stopping store service while it drains. Every read either returns exactly the bytes put
// (granted before or during the grace period) or, once the segment is gone, reports the object as
// not found: never a transfer failure, never other bytes. From the SIGTERM on, the master places
// nothing new on the draining segment. Run `npm run build` first.
import { createHash, randomBytes } from 'node:crypto';
import { Client } from '../client/client.js';
import { ObjectNotFoundError } from '../client/errors.js';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';

const MiB = 1024 * 1024;
const OBJECTS = 24;
// long enough that the checks made during it never race its end on a loaded machine
const GRACE_SECONDS = 6;

let cluster: LocalCluster;
let client: Client;
let stays: StoreServiceProcess;
let leaving: StoreServiceProcess;

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 0, segmentSize: '64MB' });
  stays = await cluster.addService();
  leaving = await cluster.addService([`--shutdown_grace_seconds=${GRACE_SECONDS}`]);
  client = await Client.setup(cluster.clientConfig());
}, 60_000);

afterAll(async () => {
  await client?.close();
  await cluster?.stop();
}, 30_000);

const digest = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

async function segmentStatus(name: string): Promise<string | undefined> {
  const detail = JSON.parse(await cluster.admin('/get_segments_detail')) as { segments: { segment_name: string; status: string }[] };
  return detail.segments.find((s) => s.segment_name === name)?.status;
}

async function segmentOf(key: string): Promise<string> {
  const replicas = (await client.queryByRegex(`^${key}$`)).get(key) ?? [];
  return replicas[0]?.handles?.[0]?.segment_name ?? '';
}

describe('a store service removed mid-read', () => {
  it('finishes or cleanly misses every read, and takes no new placement while it drains', async () => {
    const expected = new Map<string, string>();
    for (let i = 0; i < OBJECTS; i++) {
      const key = `drain/${i}`;
      const value = randomBytes(MiB);
      await client.put(key, value, { preferred_segment: leaving.segment });
      expect(await segmentOf(key)).toBe(leaving.segment);
      expected.set(key, digest(value));
    }

    const outcomes = { exact: 0, exactAfterSigterm: 0, notFound: 0 };
    const failures: string[] = [];
    let sigtermSent = false;
    let stop = false;
    const reader = async (offset: number): Promise<void> => {
      for (let i = offset; !stop; i++) {
        const key = `drain/${i % OBJECTS}`;
        try {
          const got = await client.get(key);
          if (digest(got) !== expected.get(key)) failures.push(`${key}: other bytes`);
          else {
            outcomes.exact++;
            if (sigtermSent) outcomes.exactAfterSigterm++;
          }
        } catch (e) {
          if (e instanceof ObjectNotFoundError) outcomes.notFound++;
          else failures.push(`${key}: ${(e as Error).name}: ${(e as Error).message}`);
        }
      }
    };
    const readers = [0, 7, 13, 19].map((offset) => reader(offset));
    try {
      // reads are running; now the pod is removed
      while (outcomes.exact < OBJECTS) await new Promise<void>((resolve) => setImmediate(resolve));
      sigtermSent = true;
      leaving.proc.kill('SIGTERM');
      await leaving.waitFor(/SIGTERM received: unmounting with a 6 s grace period/);
      // the master learns of the drain through the service's unmount call: ask until it has
      while ((await segmentStatus(leaving.segment)) === 'MOUNTED');
      expect(await segmentStatus(leaving.segment)).toBe('UNMOUNTING');

      // no new placement on the draining segment, even when asked for it
      await client.put('drain/new', randomBytes(MiB), { preferred_segment: leaving.segment });
      expect(await segmentOf('drain/new')).toBe(stays.segment);

      expect(await leaving.exited).toBe(0);
    } finally {
      stop = true;
      await Promise.all(readers);
    }

    expect(failures).toEqual([]);
    // reads kept being served during the grace period, and misses came only after the segment left
    expect(outcomes.exactAfterSigterm).toBeGreaterThan(0);
    expect(outcomes.notFound).toBeGreaterThan(0);
    expect(await segmentStatus(leaving.segment)).toBeUndefined();
    await expect(client.get('drain/0')).rejects.toBeInstanceOf(ObjectNotFoundError);
  }, 60_000);
});
