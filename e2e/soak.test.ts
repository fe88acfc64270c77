// Soak, real processes, bounded to about a minute: puts, gets, removes and evictions from three
// clients (one over TCP only, two with the same-host transport) while store services are paused,
// resumed, killed and replaced. Every value a Get returns is checked against the CRC-32C its
// writer recorded: objects may be lost (a killed store takes its replicas) and calls may fail, but
// no Get may return bytes other than those put under its key. Run `npm run build` first.
import { randomBytes, randomInt } from 'node:crypto';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { crc32c } from '../native/index.js';

const MiB = 1024 * 1024;
const SOAK_MS = Number(process.env.SOAK_MS ?? 45_000);

interface Written {
  crc: number;
  length: number;
}

describe('soak', () => {
  let cluster: LocalCluster;
  const clients: Client[] = [];
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await cluster?.stop();
  }, 60_000);

  it(
    'returns no wrong byte under puts, gets, removes, evictions, pauses and kills',
    async () => {
      cluster = await LocalCluster.start({
        storeServices: 3,
        segmentSize: '48MB',
        masterArgs: ['--client_ttl=3s', '--default_kv_lease_ttl=1s', '--eviction_high_watermark_ratio=0.8', '--unreachable_segment_timeout=2s'],
      });
      // Checksums on for two clients: a changed replica is then skipped rather than returned.
      const tcpOnly = { engine: { timeoutMs: 2000, shmTransport: false }, checksums: true };
      clients.push(await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), tcpOnly));
      clients.push(await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), { engine: { timeoutMs: 2000 }, checksums: true }));
      clients.push(await Client.setup(cluster.clientConfig({ local_buffer_size: 16 * MiB }), { engine: { timeoutMs: 2000 } }));
      const written = new Map<string, Written>();
      const keys: string[] = [];
      const stats = { puts: 0, putErrors: 0, gets: 0, hits: 0, getErrors: 0, wrong: 0, removes: 0, pauses: 0, kills: 0 };
      const wrong: string[] = [];
      const deadline = performance.now() + SOAK_MS;

      const worker = async (c: Client, id: number) => {
        for (let seq = 0; performance.now() < deadline; seq++) {
          const roll = randomInt(100);
          if (roll < 30 || keys.length < 20) {
            const size = randomInt(100) < 80 ? randomInt(1, 64 * 1024) : randomInt(64 * 1024, MiB);
            const value = randomBytes(size);
            const key = `soak-${id}-${seq}`;
            stats.puts++;
            try {
              await c.put(key, value, { replica_num: randomInt(1, 3) });
              written.set(key, { crc: crc32c(value), length: size });
              keys.push(key);
            } catch {
              stats.putErrors++;
            }
          } else if (roll < 90) {
            // mostly recent keys (likely still stored), sometimes any key ever written
            const key = randomInt(10) < 8 ? keys[keys.length - 1 - randomInt(Math.min(keys.length, 300))] : keys[randomInt(keys.length)];
            stats.gets++;
            try {
              const got = await c.get(key);
              stats.hits++;
              const w = written.get(key)!;
              if (got.length !== w.length || crc32c(got) !== w.crc) {
                stats.wrong++;
                wrong.push(`${key}: ${got.length} B, crc ${crc32c(got)}; written ${w.length} B, crc ${w.crc}`);
              }
            } catch {
              stats.getErrors++; // lost with a killed store, evicted, removed, or a failed read: allowed
            }
          } else {
            const key = keys[randomInt(keys.length)];
            stats.removes++;
            await c.remove(key).catch(() => undefined);
          }
        }
      };

      const chaos = async () => {
        const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
        while (performance.now() < deadline - 5000) {
          await pause(randomInt(1500, 4000));
          const live = cluster.services.filter((s) => s.proc.exitCode === null && s.proc.signalCode === null);
          const victim: StoreServiceProcess = live[randomInt(live.length)];
          if (randomInt(3) === 0 && live.length > 1) {
            stats.kills++;
            victim.proc.kill('SIGKILL');
            await victim.exited;
            await cluster.addService();
          } else {
            stats.pauses++;
            victim.proc.kill('SIGSTOP');
            await pause(randomInt(500, 4000)); // sometimes past --client_ttl: dropped, then remounted
            victim.proc.kill('SIGCONT');
          }
        }
      };

      await Promise.all([...clients.map((c, i) => worker(c, i)), chaos()]);
      console.log(`soak ${SOAK_MS} ms: ${JSON.stringify(stats)}`);
      expect(wrong).toEqual([]);
      expect(stats.hits).toBeGreaterThan(100); // the soak did read real values
    },
    SOAK_MS + 60_000,
  );
});
