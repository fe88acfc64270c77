// The master core's put pair and GetReplicaList of two builds compared in one process
// (`node dist/bench/core-ab.js <dist-A> <dist-B> [--keys N] [--rounds R]`; not a test): each build's
// MasterCore is loaded from its dist/ directory and the two run alternately (A B, B A, ...), so
// the load of a shared machine falls on both alike; prints the median and best rate of each.
// For changes on the put path that are too small to see through bench:master's RPC noise.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

interface CoreModule {
  MasterCore: new (config: object) => {
    mountSegment(req: object, now: number): unknown;
    putStart(req: object, now: number): unknown;
    putEnd(req: object, now: number): unknown;
    getReplicaList(req: object, now: number): unknown;
  };
  defaultMasterCoreConfig: object;
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const [distA, distB] = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
const KEYS = Number(arg('keys', '200000'));
const ROUNDS = Number(arg('rounds', '8'));

function run(m: CoreModule, keys: string[]): [number, number] {
  const core = new m.MasterCore({ ...m.defaultMasterCoreConfig });
  for (let s = 0; s < 4; s++) {
    core.mountSegment(
      {
        buffer: 2 ** 40 * (s + 1),
        size: 2 ** 40,
        segment_name: `seg-${s}`,
        client_id: '00000000-0000-4000-8000-00000000b1c0',
        segment_id: '',
        te_endpoint: `127.0.0.1:${7000 + s}`,
        protocol: 'tcp',
      },
      0,
    );
  }
  const config = { replica_num: 1, with_soft_pin: false, with_hard_pin: false, preferred_segment: '' };
  const t0 = performance.now();
  for (const key of keys) {
    core.putStart({ key, value_length: 4096, config, slice_lengths: [4096] }, 1);
    core.putEnd({ key, replica_type: 0 }, 1);
  }
  const t1 = performance.now();
  for (const key of keys) core.getReplicaList({ key }, 2);
  const t2 = performance.now();
  return [keys.length / ((t1 - t0) / 1000), keys.length / ((t2 - t1) / 1000)];
}

async function main(): Promise<void> {
  if (!distA || !distB) throw new Error('usage: node dist/bench/core-ab.js <dist-A> <dist-B> [--keys N] [--rounds R]');
  const load = async (dist: string) => (await import(pathToFileURL(resolve(dist, 'master/core/master-core.js')).href)) as CoreModule;
  const builds: [string, CoreModule][] = [
    [distA, await load(distA)],
    [distB, await load(distB)],
  ];
  // flat one-byte strings, as the decoder makes them
  const keys = Array.from({ length: KEYS }, (_, i) => Buffer.from(`bench/model-7b/layer-${i % 80}/block-${i}`).toString('latin1'));
  const rates: [number, number][][] = [[], []];
  for (let r = 0; r < ROUNDS; r++) for (const b of r % 2 ? [1, 0] : [0, 1]) rates[b].push(run(builds[b][1], keys));
  const median = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1];
  builds.forEach(([dist], b) => {
    const put = rates[b].map((x) => x[0]);
    const get = rates[b].map((x) => x[1]);
    console.log(
      `${dist}: put pair median ${Math.round(median(put)).toLocaleString('en-US')} pairs/s (best ${Math.round(Math.max(...put)).toLocaleString('en-US')}); GetReplicaList median ${Math.round(median(get)).toLocaleString('en-US')}/s (best ${Math.round(Math.max(...get)).toLocaleString('en-US')})`,
    );
  });
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
