// End to end, real processes: a store service dies (SIGKILL) and the objects that had a replica on
// its segment get that replica back on another segment, copied by the live clients
// (docs/integrity.md, master/core/re-replication.ts). Every replica then holds the exact bytes put.
// Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { MasterClient } from '../client/master-client.js';
import { mapMemory, TransferEngine } from '../native/index.js';
import { runSecret } from '../native/test-fixtures/run-secret.js';
import { readReplicaInto } from './replica-read.js';

const KiB = 1024;
const MiB = 1024 * KiB;

describe('re-replication', () => {
  let cluster: LocalCluster;
  afterAll(async () => cluster?.stop(), 30_000);

  it('objects that lost a replica with a dead store service get it back, byte for byte', async () => {
    cluster = await LocalCluster.start({ storeServices: 3, segmentSize: '64MB', masterArgs: ['--client_ttl=2s'] });
    const [dead, ...alive] = cluster.services;
    const client = await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), { checksums: true });
    const master = await MasterClient.connect(cluster.master.rpc);
    const engine = new TransferEngine({ host: '127.0.0.1', env: {}, authSecret: runSecret() });
    const local = mapMemory({ size: MiB });
    try {
      engine.start();
      engine.registerRegion(local.address, local.size, { serve: false });
      const values = new Map<string, Buffer[]>();
      for (let i = 0; i < 30; i++) {
        // One slice each: a multi-slice object places each slice's replicas independently, so
        // one lost segment can take both of its replicas (master/core/re-replication.test.ts).
        const slices = [randomBytes(i % 3 === 0 ? 100 * KiB + 3 : 256 * KiB)];
        await client.put(`obj-${i}`, slices, { replica_num: 2 });
        values.set(`obj-${i}`, slices);
      }
      const segmentsOf = async (key: string) => (await master.getReplicaList({ key })).replica_list.map((r) => r.handles.map((h) => h.segment_name));
      const hit: string[] = [];
      for (const key of values.keys()) if ((await segmentsOf(key)).some((r) => r.includes(dead.segment))) hit.push(key);
      expect(hit.length).toBeGreaterThan(0);

      dead.proc.kill('SIGKILL');
      await cluster.master.waitFor(new RegExp(`dropped: .*${dead.clientId}`));
      await cluster.master.waitFor(/re-replication done/);

      for (const [key, slices] of values) {
        const list = (await master.getReplicaList({ key })).replica_list;
        expect(list).toHaveLength(2);
        const segs = list.map((r) => r.handles[0].segment_name);
        expect(new Set(segs).size).toBe(2);
        expect(segs).not.toContain(dead.segment);
        // Each replica read on its own, straight from its segment.
        for (const r of list) {
          expect((await readReplicaInto(engine, local, r)).equals(Buffer.concat(slices))).toBe(true);
        }
        expect((await client.get(key)).equals(Buffer.concat(slices))).toBe(true);
      }
      const metrics = await fetch(`http://${cluster.master.metrics}/metrics`).then((r) => r.text());
      expect(Number(/store_master_replicas_copied_total (\d+)/.exec(metrics)![1])).toBe(hit.length);
      expect(metrics).toMatch(/store_master_under_replicated_objects 0/);
      expect(alive.every((s) => s.proc.exitCode === null)).toBe(true);
    } finally {
      engine.close();
      local.release();
      master.close();
      await client.close();
    }
  });
});
