// End to end, real processes: a single master with --enable_snapshot and
// --enable_snapshot_restore is killed (SIGKILL) while it takes a snapshot, with objects stored in
// two store services; the new master restores the snapshot and the change log, the services mount
// their segments again (new incarnations), and every object committed before the kill is read
// back with the exact bytes (checksums on). Removed objects stay removed. Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '../client/client.js';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { freePort } from './free-port.js';

const KiB = 1024;

describe('a single master restarted from its snapshots and change log', () => {
  let cluster: LocalCluster | undefined;
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'master-snapshots-'));
  });
  afterAll(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('loses no committed object when SIGKILLed during a snapshot', async () => {
    cluster = await LocalCluster.start({
      storeServices: 2,
      segmentSize: '64MB',
      rpcPort: await freePort(),
      metadataPort: await freePort(),
      masterArgs: ['--enable_snapshot', '--enable_snapshot_restore', '--snapshot_object_store_type=local', '--snapshot_interval_seconds=1', '--client_ttl=30s'],
      env: { ...process.env, STORE_SNAPSHOT_LOCAL_PATH: dir },
    });
    const client = await Client.setup(cluster.clientConfig(), { checksums: true, heartbeatIntervalMs: 100 });
    try {
      const values = new Map<string, Buffer[]>();
      const removed: string[] = [];
      const put = async (n: number, prefix: string): Promise<void> => {
        for (let i = 0; i < n; i++) {
          const slices = i % 4 === 0 ? [randomBytes(40 * KiB + i), randomBytes(3 * KiB)] : [randomBytes(1 + ((i * 977) % (20 * KiB)))];
          await client.put(`${prefix}${i}`, slices, { replica_num: 1 + (i % 2) });
          values.set(`${prefix}${i}`, slices);
        }
      };
      await put(300, 'before-');
      for (let i = 0; i < 300; i += 10) {
        await client.remove(`before-${i}`);
        values.delete(`before-${i}`);
        removed.push(`before-${i}`);
      }
      // Objects committed while snapshots run (one a second): some land in a snapshot, all in the log.
      const master = cluster.master;
      // Snapshot indexes grow by one (the first is taken at start): wait for the one after the latest.
      const nextSnapshot = (): RegExp =>
        new RegExp(`snapshot ${Math.max(0, ...[...master.output().matchAll(/snapshot (\d+) (?:started|written|\()/g)].map((m) => Number(m[1]))) + 1} started`);
      const writing = put(200, 'during-');
      await master.waitFor(nextSnapshot());
      await writing;
      // The kill lands as the next snapshot begins (whether it is still being written then is up
      // to timing; persistence.test.ts cuts snapshots short on purpose).
      const remounts = cluster.services.map((s) => s.waitFor(/remounted 1 segment/));
      await master.waitFor(nextSnapshot());
      master.proc.kill('SIGKILL');
      const back = await cluster.restartMaster(); // SIGKILL: no goodbye, no final sync
      await back.waitFor(/restore: snapshot \d+ \+ \d+ changes/);
      expect(back.output()).toMatch(new RegExp(`restore: .* 2 segments \\(RESTORED until their owners mount them again\\), ${values.size} objects`));
      await Promise.all(remounts);

      for (const [key, slices] of values) expect((await client.get(key)).equals(Buffer.concat(slices))).toBe(true);
      for (const key of removed) expect(await client.isExist(key)).toBe(false);
      // The restarted master keeps logging: one more object, one more restart, still there.
      await client.put('after-restart', Buffer.from('still here'));
      const again = cluster.services.map((s) => s.waitFor(/remounted 1 segment[\s\S]*remounted 1 segment/));
      await cluster.restartMaster();
      await Promise.all(again);
      expect((await client.get('after-restart')).toString()).toBe('still here');
      expect((await client.get('during-199')).equals(Buffer.concat(values.get('during-199')!))).toBe(true);
    } finally {
      await client.close();
    }
  }, 120_000);
});
