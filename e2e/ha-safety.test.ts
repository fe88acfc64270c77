// End to end, the failover safety gaps of issue 12 (docs/ha.md "Which image may be elected"), on a
// real etcd, a real redis-server and the test Kubernetes API server (a Lease), with real
// store_master processes:
//  - a standby the leader dropped (SIGSTOPped past the ack timeout while its stream filled every
//    buffer, so the last reset never reached it) must not bring its stale image to an election:
//    once elected, an object removed after the drop must not come back (its space was reused);
//  - with --ha_commit_acks=1 and two standbys, the lagging one (SIGSTOPped: it stops acking) must
//    not win while the synced one is alive: zero acknowledged commits lost. The lagging one's
//    stream fills every buffer while it sleeps, so the leader's death takes changes it never
//    gets; the synced one is paused for a moment after the leader's death so that, without the
//    ranking, the lagging one would be first to campaign.
// Raw MasterClient calls (no data path): the master's metadata is what is checked.
// Run `npm run build` first.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MasterClient } from '../client/master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { distRoot, type ProcessHandle } from '../sidecar/local-cluster.js';
import { have, Processes, type HaBackend } from './ha-backends.js';

const MAIN = join(distRoot(), 'master', 'main.js');
const CLIENT = '00000000-0000-4000-8000-0000000000a1';
const MOUNT = { buffer: 0x10000000, size: 1 << 30, segment_name: 'seg-ha', client_id: CLIENT, te_endpoint: '127.0.0.1:1', protocol: 'tcp' };

const ps = new Processes();
afterEach(() => ps.stopAll());

type Master = ProcessHandle & { rpc: string };

let started: Master[] = [];

async function masters(n: number, backend: HaBackend, extra: string[]): Promise<{ leader: Master; standbys: Master[] }> {
  const all: Master[] = [];
  started = all;
  for (let i = 0; i < n; i++) {
    const h = ps.start(
      `master-${i}`,
      process.execPath,
      [
        MAIN,
        '--enable_ha=true',
        '--rpc_address=127.0.0.1',
        '--rpc_port=0',
        '--metrics_port=0',
        '--enable_metric_reporting=false',
        '--ha_lease_ms=3000',
        ...extra,
        ...backend.masterArgs,
      ],
      backend.env,
    );
    const m = await h.waitFor(/store_master listening: rpc=(\S+)/);
    all.push({ ...h, rpc: m[1] });
  }
  const li = await Promise.race(all.map((m, i) => m.waitFor(/HA: elected leader/).then(() => i)));
  const leader = all[li];
  await leader.waitFor(
    new RegExp(
      Array(n - 1)
        .fill('HA: standby .* synced')
        .join('[\\s\\S]*'),
    ),
  );
  return { leader, standbys: all.filter((_, i) => i !== li) };
}

/** A failure carries the masters' last log lines. */
async function explained(run: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    // Before jest's own limit, so that a wait that never ends still shows the logs.
    await Promise.race([run, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('still waiting after 80 s')), 80_000)))]);
  } catch (e) {
    const logs = started
      .map(
        (m) =>
          `--- ${m.name}\n${m
            .output()
            .split('\n')
            .filter((l) => /HA: (?!standby position published)/.test(l))
            .slice(-40)
            .join('\n')}`,
      )
      .join('\n');
    (e as Error).message += `\n${logs}`;
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

const put = async (c: MasterClient, key: string, size = 64): Promise<{ code: number; offset?: number }> => {
  const s = await c.putStart({ key, value_length: size, slice_lengths: [size], config: { replica_num: 1 } });
  if (s.status_code !== ErrorCode.OK) return { code: s.status_code };
  const offset = Number(s.replica_list[0]?.handles[0]?.buffer ?? NaN);
  return { code: (await c.putEnd({ key, replica_type: 0 })).status_code, offset };
};

/** The drop-then-leader-death sequence: the dropped standby, elected alone, must not serve the removed object. */
async function droppedStandby(backend: HaBackend): Promise<void> {
  const { leader, standbys } = await masters(2, backend, ['--ha_commit_acks=1']);
  const [a] = standbys;
  const c = await MasterClient.connect(leader.rpc);
  try {
    expect((await c.mountSegment(MOUNT)).status_code).toBe(ErrorCode.OK);
    const x = await put(c, 'x', 4096);
    expect(x.code).toBe(ErrorCode.OK);
    a.proc.kill('SIGSTOP');
    // Commits stream to A while it sleeps (their replies wait for its ack) until every buffer on
    // the way is full: the reset that ends its stream at the drop then stays in the leader.
    const bigKey = (b: number, i: number): string => `flood-${b}-${i}-${'k'.repeat(4000)}`;
    const ends: Promise<unknown>[] = [];
    for (let b = 0; b < 10; b++) {
      const keys = Array.from({ length: 500 }, (_, i) => bigKey(b, i));
      const starts = await c.batchPutStart({ requests: keys.map((key) => ({ key, value_length: 64, slice_lengths: [64], config: { replica_num: 1 } })) });
      expect(starts.status_code).toBe(ErrorCode.OK);
      ends.push(c.batchPutEnd({ keys, replica_type: 0 }));
    }
    await leader.waitFor(/did not acknowledge change \d+ within 2000 ms: disconnected/);
    await Promise.all(ends);
    // After the drop nothing waits for A: X is removed and its space handed out again.
    expect((await c.remove({ key: 'x', force: false })).status_code).toBe(ErrorCode.OK);
    const y = await put(c, 'y', 4096);
    expect(y.code).toBe(ErrorCode.OK);
    expect(y.offset).toBe(x.offset); // Y's bytes are where X's were
    leader.proc.kill('SIGKILL');
    a.proc.kill('SIGCONT');
    await a.waitFor(/HA: elected leader/);
  } finally {
    c.close();
  }
  const d = await MasterClient.connect(a.rpc);
  try {
    expect((await d.mountSegment(MOUNT)).status_code).toBe(ErrorCode.OK);
    // The stale image would serve X again, over the space Y now holds.
    expect((await d.getReplicaList({ key: 'x' })).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(a.output()).toMatch(/HA: the followed image is not usable|elected without a complete copy/);
  } finally {
    d.close();
  }
}

/** ha_commit_acks=1, two standbys, one lagging: after the leader's death no acknowledged commit is lost. */
async function laggingStandby(backend: HaBackend): Promise<void> {
  const { leader, standbys } = await masters(3, backend, ['--ha_commit_acks=1']);
  const [lagging, synced] = standbys;
  const committed: string[] = [];
  const c = await MasterClient.connect(leader.rpc);
  try {
    expect((await c.mountSegment(MOUNT)).status_code).toBe(ErrorCode.OK);
    for (let i = 0; i < 50; i++) {
      expect((await put(c, `before-${i}`)).code).toBe(ErrorCode.OK);
      committed.push(`before-${i}`);
    }
    lagging.proc.kill('SIGSTOP');
    // Acknowledged by the synced standby alone; the stream to the lagging one fills every buffer
    // on the way, and what the leader still holds dies with it.
    for (let b = 0; b < 10; b++) {
      const keys = Array.from({ length: 500 }, (_, i) => `flood-${b}-${i}-${'k'.repeat(4000)}`);
      const starts = await c.batchPutStart({ requests: keys.map((key) => ({ key, value_length: 64, slice_lengths: [64], config: { replica_num: 1 } })) });
      expect(starts.status_code).toBe(ErrorCode.OK);
      const ends = await c.batchPutEnd({ keys, replica_type: 0 });
      expect(ends.results.every((r) => r.status_code === ErrorCode.OK)).toBe(true);
      committed.push(...keys);
    }
    for (let i = 0; i < 100; i++) {
      expect((await put(c, `while-${i}`)).code).toBe(ErrorCode.OK);
      committed.push(`while-${i}`);
    }
    leader.proc.kill('SIGKILL');
    // The synced standby publishes its final position, then pauses for a moment (a GC, a slow
    // host): without the ranking, the lagging one would be first to campaign.
    await synced.waitFor(/HA: standby position published after the stream ended/);
    synced.proc.kill('SIGSTOP');
    lagging.proc.kill('SIGCONT');
    await lagging.waitFor(/HA: not campaigning: standby \S+ is ahead/);
    synced.proc.kill('SIGCONT');
    await synced.waitFor(/HA: elected leader/);
  } finally {
    c.close();
  }
  expect(lagging.output()).not.toMatch(/HA: elected leader/);
  const d = await MasterClient.connect(synced.rpc);
  try {
    expect((await d.mountSegment(MOUNT)).status_code).toBe(ErrorCode.OK);
    let lost = 0;
    for (let i = 0; i < committed.length; i += 500) {
      const r = await d.batchGetReplicaList({ keys: committed.slice(i, i + 500) });
      lost += r.results.filter((x) => x.status_code !== ErrorCode.OK).length;
    }
    expect({ lost, of: committed.length }).toEqual({ lost: 0, of: 5150 });
  } finally {
    d.close();
  }
}

const ready = existsSync(MAIN);
const backends: [string, string, (p: Processes) => Promise<HaBackend>][] = [
  ['etcd', 'etcd', (p) => p.etcd('safety_etcd')],
  ['redis', 'redis-server', (p) => p.redis('safety_redis')],
  ['k8s', '', (p) => p.k8s('safety_k8s')],
];
for (const [name, bin, backend] of backends) {
  const why =
    bin === '' ? 'skipped without dist/ (npm run build)' : `skipped without ${bin} (apt-get install ${bin === 'etcd' ? 'etcd-server' : 'redis-server'}) or dist/ (npm run build)`;
  const run = (bin === '' || have(bin)) && ready ? it : it.skip;
  run(`${name}: a standby dropped before the leader died does not serve a removed object when elected (${why})`, async () => explained(droppedStandby(await backend(ps))), 90_000);
  run(
    `${name}: --ha_commit_acks=1, the lagging standby does not win while the synced one lives; no acknowledged commit lost (${why})`,
    async () => explained(laggingStandby(await backend(ps))),
    90_000,
  );
}
