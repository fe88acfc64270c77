// The master core's put pair and GetReplicaList of two builds compared in one process
// (`node dist/bench/core-ab.js <dist-A> <dist-B> [--keys N] [--rounds R]`; not a test): each build's
// MasterCore is loaded from its dist/ directory and the two run alternately (A B, B A, ...), so
// the load of a shared machine falls on both alike; prints the median and best rate of each.
// For changes on the put path that are too small to see through bench:master's RPC noise. The
// "encoded" rates also encode each reply as the fast channel does (the build's codec, with the
// reply writers its channel server loads). Rates are per second of the process's CPU time, not of
// the clock: on a shared machine the clock also counts the time other processes had the CPU.
// The "full" rates put batches of 32 x 64 KiB (replies encoded) into a 64 MB memory that is full,
// so every put evicts: memory only, and with the SSD tier (--enable_offload, an SSD segment whose
// copier takes each Ping's copies every 64 puts and reports them made; puts refused for room are
// made again after the copier's next Ping), keys per CPU second.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

interface CoreModule {
  MasterCore: new (config: object) => {
    mountSegment(req: object, now: number): unknown;
    putStart(req: object, now: number): unknown;
    putEnd(req: object, now: number): unknown;
    getReplicaList(req: object, now: number): unknown;
    batchPutStart(req: object, now: number): { results: { status_code: number }[] };
    batchPutEnd(req: object, now: number): unknown;
    ping(req: object, now: number): { copies: { copy_id: number }[] };
    batchReplicaCopied(req: object, now: number): unknown;
    sweep(now: number): unknown;
  };
  defaultMasterCoreConfig: object;
}

interface WireModule {
  codecOf(name: string): object;
  encodeWith(codec: object, obj: object): Buffer;
}

/** One build: its core and its codec. */
interface Build {
  core: CoreModule;
  wire: WireModule;
}

const RATES = ['put pair', 'GetReplicaList', 'GetReplicaList encoded', 'put pair encoded', 'full', 'full, SSD tier'] as const;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const [distA, distB] = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
const KEYS = Number(arg('keys', '200000'));
const ROUNDS = Number(arg('rounds', '8'));

/** CPU time used by this process so far (user and system, all threads), in ms. */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function run({ core: m, wire }: Build, keys: string[]): number[] {
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
  const t0 = cpuMs();
  for (const key of keys) {
    core.putStart({ key, value_length: 4096, config, slice_lengths: [4096] }, 1);
    core.putEnd({ key, replica_type: 0 }, 1);
  }
  const t1 = cpuMs();
  for (const key of keys) core.getReplicaList({ key }, 2);
  const t2 = cpuMs();
  const grl = wire.codecOf('GetReplicaListResponse');
  for (const key of keys) wire.encodeWith(grl, core.getReplicaList({ key }, 3) as object);
  const t3 = cpuMs();
  const put = wire.codecOf('PutStartResponse');
  for (const key of keys) {
    const k = `${key}/2`;
    wire.encodeWith(put, core.putStart({ key: k, value_length: 4096, config, slice_lengths: [4096] }, 4) as object);
    core.putEnd({ key: k, replica_type: 0 }, 4);
  }
  const t4 = cpuMs();
  const rate = (ms: number): number => keys.length / (ms / 1000);
  return [rate(t1 - t0), rate(t2 - t1), rate(t3 - t2), rate(t4 - t3), full({ core: m, wire }, keys, false), full({ core: m, wire }, keys, true)];
}

/** Keys per CPU second of batched 64 KiB puts into a full 64 MB memory, without or with the SSD tier (the opening comment). */
function full({ core: m, wire }: Build, keys: string[], ssd: boolean): number {
  const VALUE = 64 * 1024;
  const BATCH = 32;
  const client = '00000000-0000-4000-8000-00000000b1c0';
  const core = new m.MasterCore({ ...m.defaultMasterCoreConfig, enableOffload: ssd });
  const mount = (name: string, size: number, buffer: number, protocol: string) =>
    core.mountSegment({ buffer, size, segment_name: name, client_id: client, segment_id: '', te_endpoint: '127.0.0.1:7000', protocol, incarnation: 0 }, 0);
  mount('mem', 64 * 1024 * 1024, 2 ** 40, 'tcp');
  if (ssd) mount('ssd', 2 ** 40, 2 ** 42, 'ssd');
  const starts = wire.codecOf('BatchPutStartResponse');
  const pings = wire.codecOf('PingResponse');
  const config = { replica_num: 1, with_soft_pin: false, with_hard_pin: false, preferred_segment: '' };
  const copier = (now: number): void => {
    const p = core.ping({ client_id: client, fence_acks: [], can_copy: true }, now);
    wire.encodeWith(pings, p);
    if (p.copies.length > 0) core.batchReplicaCopied({ client_id: client, outcomes: p.copies.map((c) => ({ copy_id: c.copy_id, ok: true, failed_segments: [] })) }, now);
  };
  const n = Math.min(keys.length, 65_536) - (Math.min(keys.length, 65_536) % BATCH);
  let now = 1;
  const round = (from: number, to: number, tag: string): void => {
    for (let i = from; i < to; i += BATCH, now++) {
      let batch = keys.slice(i, i + BATCH).map((k) => `${k}/${tag}`);
      for (let tries = 0; batch.length > 0 && tries < 10; tries++) {
        const r = core.batchPutStart({ requests: batch.map((key) => ({ key, value_length: VALUE, config, slice_lengths: [VALUE] })) }, now);
        wire.encodeWith(starts, r);
        core.batchPutEnd({ keys: batch.filter((_, j) => r.results[j].status_code === 0), replica_type: 0 }, now);
        batch = batch.filter((_, j) => r.results[j].status_code !== 0);
        if (batch.length > 0 && ssd) copier(now);
      }
      if (ssd && (i / BATCH) % 2 === 1) copier(now);
      if ((i / BATCH) % 64 === 0) core.sweep(now);
    }
  };
  round(0, 2048, 'fill'); // memory full before the clock starts
  const t0 = cpuMs();
  round(0, n, 'full');
  return n / ((cpuMs() - t0) / 1000);
}

async function main(): Promise<void> {
  if (!distA || !distB) throw new Error('usage: node dist/bench/core-ab.js <dist-A> <dist-B> [--keys N] [--rounds R]');
  const url = (dist: string, file: string): string => pathToFileURL(resolve(dist, file)).href;
  const load = async (dist: string): Promise<Build> => {
    await import(url(dist, 'master/channel-server.js')); // the reply writers the channel uses
    return { core: (await import(url(dist, 'master/core/master-core.js'))) as CoreModule, wire: (await import(url(dist, 'common/master-proto.js'))) as WireModule };
  };
  const builds: [string, Build][] = [
    [distA, await load(distA)],
    [distB, await load(distB)],
  ];
  // flat one-byte strings, as the decoder makes them
  const keys = Array.from({ length: KEYS }, (_, i) => Buffer.from(`bench/model-7b/layer-${i % 80}/block-${i}`).toString('latin1'));
  const rates: number[][][] = [[], []];
  for (let r = 0; r < ROUNDS; r++) for (const b of r % 2 ? [1, 0] : [0, 1]) rates[b].push(run(builds[b][1], keys));
  const median = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1];
  const n = (x: number): string => Math.round(x).toLocaleString('en-US');
  builds.forEach(([dist], b) => {
    const parts = RATES.map((name, i) => {
      const r = rates[b].map((x) => x[i]);
      return `${name} median ${n(median(r))}/s (best ${n(Math.max(...r))})`;
    });
    console.log(`${dist}: ${parts.join('; ')}`);
  });
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
