// End to end, real processes: copy and move tasks (docs/tiers.md "Copy and move tasks",
// master/core/task-path.ts). A copy puts a replica on each named segment, read back from there
// byte for byte; a move leaves the object on the target only, with reads going on throughout; a
// target whose store service dies fails the task and leaves the object as it was; bad requests
// get their codes; a dummy client reaches the same calls through its store service.
// Run `npm run build` first.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { distRoot, LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import { MasterClient } from '../client/master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { InvalidParamsError, ObjectNotFoundError, StoreError } from '../client/errors.js';
import { mapMemory, TransferEngine } from '../native/index.js';
import type { MappedRegion } from '../client/native-port.js';
import { runSecret } from '../native/test-fixtures/run-secret.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { readReplicaInto } from './replica-read.js';

const CLI = join(distRoot(), 'cli', 'main.js');
const KiB = 1024;
const MiB = 1024 * KiB;

let cluster: LocalCluster;
let client: Client;
let master: MasterClient;
let engine: TransferEngine;
let local: MappedRegion;
let s: StoreServiceProcess[];

beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 4, segmentSize: '64MB', masterArgs: ['--client_ttl=2s', '--default_kv_lease_ttl=500'] });
  s = cluster.services;
  client = await Client.setup(cluster.clientConfig({ local_buffer_size: 32 * MiB }), { checksums: true });
  master = await MasterClient.connect(cluster.master.rpc);
  engine = new TransferEngine({ host: '127.0.0.1', env: {}, authSecret: runSecret() });
  engine.start();
  local = mapMemory({ size: 16 * MiB });
  engine.registerRegion(local.address, local.size, { serve: false });
}, 60_000);

afterAll(async () => {
  engine?.close();
  local?.release();
  master?.close();
  await client?.close();
  await cluster?.stop();
}, 30_000);

const replicas = async (key: string): Promise<ReplicaInfo__Output[]> => (await master.getReplicaList({ key })).replica_list;
const segmentsOf = async (key: string): Promise<string[]> => (await replicas(key)).map((r) => r.handles[0].segment_name);
const finished = (id: number) => cluster.master.waitFor(new RegExp(`task ${id} \\((copy|move) of "[^"]*"\\) (succeeded|failed: \\w+)`));

const readReplica = (r: ReplicaInfo__Output): Promise<Buffer> => readReplicaInto(engine, local, r);

describe('copy and move tasks', () => {
  it('copies an object to the named segments; each new replica holds the bytes put', async () => {
    const value = randomBytes(3 * MiB + 17);
    await client.put('copy-me', value, { replica_num: 1, preferred_segment: s[0].segment });
    expect(await segmentsOf('copy-me')).toEqual([s[0].segment]);

    const id = await client.createCopyTask('copy-me', [s[1].segment, s[2].segment]);
    expect(id).toBeGreaterThan(0);
    expect((await finished(id))[2]).toBe('succeeded');
    const task = await client.queryTask(id);
    expect(task).toMatchObject({ id, kind: 'copy', key: 'copy-me', state: 'success', errorCode: 0, targets: [s[1].segment, s[2].segment], source: '' });
    expect(task.attempts).toBeGreaterThanOrEqual(1);
    expect(task.createdAt).toBeLessThanOrEqual(task.updatedAt);
    expect(Math.abs(task.updatedAt - Date.now())).toBeLessThan(60_000);

    const list = await replicas('copy-me');
    expect(list.map((r) => r.handles[0].segment_name).sort()).toEqual([s[0].segment, s[1].segment, s[2].segment].sort());
    for (const r of list) expect((await readReplica(r)).equals(value)).toBe(true);
    expect((await client.get('copy-me')).equals(value)).toBe(true);
  });

  it('moves an object: the source no longer holds it, and reads go on during and after the move', async () => {
    const value = randomBytes(2 * MiB + 5);
    await client.put('move-me', value, { replica_num: 1, preferred_segment: s[0].segment });
    let reads = 0;
    let stop = false;
    const reader = (async () => {
      while (!stop) {
        const got = await client.get('move-me');
        if (!got.equals(value)) throw new Error(`read ${reads} returned other bytes`);
        reads++;
      }
    })();
    try {
      const id = await client.createMoveTask('move-me', s[0].segment, s[3].segment);
      expect((await finished(id))[2]).toBe('succeeded');
      expect(await client.queryTask(id)).toMatchObject({ kind: 'move', state: 'success', source: s[0].segment, targets: [s[3].segment] });
      const list = await replicas('move-me');
      expect(list.map((r) => r.handles[0].segment_name)).toEqual([s[3].segment]);
      expect((await readReplica(list[0])).equals(value)).toBe(true);
      const after = reads;
      while (reads < after + 5)
        await client
          .get('move-me')
          .then((got) => expect(got.equals(value)).toBe(true))
          .then(() => reads++);
    } finally {
      stop = true;
      await reader;
    }
    expect(reads).toBeGreaterThan(5);
    expect((await client.get('move-me')).equals(value)).toBe(true);
  });

  it('refuses bad requests with their codes', async () => {
    await client.put('bad-req', randomBytes(1000), { replica_num: 1, preferred_segment: s[0].segment });
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'no error',
        (e: unknown) => (e as StoreError).code,
      );
    await expect(client.createCopyTask('no-such-key', [s[1].segment])).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(await code(client.createCopyTask('bad-req', ['no-such-segment']))).toBe(ErrorCode.SEGMENT_NOT_FOUND);
    expect(await code(client.createCopyTask('bad-req', [s[0].segment]))).toBe(ErrorCode.REPLICA_ALREADY_ON_SEGMENT);
    await expect(client.createCopyTask('bad-req', [])).rejects.toBeInstanceOf(InvalidParamsError);
    expect(await code(client.createMoveTask('bad-req', s[1].segment, s[2].segment))).toBe(ErrorCode.NO_REPLICA_ON_SEGMENT);
    await expect(client.createMoveTask('bad-req', s[0].segment, s[0].segment)).rejects.toBeInstanceOf(InvalidParamsError);
    expect(await code(client.queryTask(987_654_321))).toBe(ErrorCode.TASK_NOT_FOUND);
    await expect(client.queryTask(-1)).rejects.toBeInstanceOf(InvalidParamsError);
  });

  it('a dummy client creates and queries tasks through its store service', async () => {
    const dummy = await DummyClient.connect({ socketPath: s[1].socket, bufferSize: 8 * MiB });
    try {
      const value = randomBytes(100 * KiB);
      await dummy.put('dummy-copy', value, { replica_num: 1, preferred_segment: s[0].segment });
      const id = await dummy.createCopyTask('dummy-copy', [s[2].segment]);
      await finished(id);
      expect(await dummy.queryTask(id)).toMatchObject({ id, kind: 'copy', state: 'success', key: 'dummy-copy' });
      expect((await segmentsOf('dummy-copy')).sort()).toEqual([s[0].segment, s[2].segment].sort());
      await expect(dummy.queryTask(987_654_321)).rejects.toMatchObject({ code: ErrorCode.TASK_NOT_FOUND });
      await expect(dummy.createMoveTask('dummy-copy', s[3].segment, s[1].segment)).rejects.toMatchObject({ code: ErrorCode.NO_REPLICA_ON_SEGMENT });
    } finally {
      await dummy.close();
    }
  });

  it('the CLI queues, waits for and shows tasks (store task copy|move|query)', async () => {
    const value = randomBytes(64 * KiB);
    await client.put('cli-task', value, { replica_num: 1, preferred_segment: s[0].segment });
    const env = { ...process.env, STORE_MASTER_ADDRESS: cluster.master.rpc };
    // Not spawnSync: this process's client copies too, and a blocked event loop would stall the copy the CLI waits for.
    const cli = async (args: string[]) => {
      const p = spawn(process.execPath, [CLI, 'task', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const [status] = (await once(p, 'close')) as [number];
      return { status, stdout, stderr };
    };
    const copied = await cli(['copy', 'cli-task', s[1].segment, '--wait', '--json']);
    expect(copied.stderr).toBe('');
    expect(copied.status).toBe(0);
    const doc = JSON.parse(copied.stdout) as { id: number; state: string; kind: string };
    expect(doc).toMatchObject({ state: 'success', kind: 'copy' });
    const shown = await cli(['query', String(doc.id)]);
    expect(shown.status).toBe(0);
    expect(shown.stdout).toMatch(/state\s+success/);
    const queued = await cli(['move', 'cli-task', s[0].segment, s[3].segment]);
    expect(queued.status).toBe(0);
    const id = Number(queued.stdout.trim());
    expect((await finished(id))[2]).toBe('succeeded');
    expect((await segmentsOf('cli-task')).sort()).toEqual([s[1].segment, s[3].segment].sort());
    expect((await cli(['query', '987654321'])).status).toBe(1); // not found
    const refused = await cli(['copy', 'cli-task', s[1].segment]);
    expect(refused.status).toBe(4);
    expect(refused.stderr).toMatch(/^store task: copy "cli-task" to .*REPLICA_ALREADY_ON_SEGMENT/);
    expect((await cli(['fly', 'cli-task'])).status).toBe(2); // usage
  });

  it('a target whose store service dies mid-task: the task fails, the object stays whole where it was', async () => {
    const value = randomBytes(MiB + 1);
    await client.put('doomed-target', value, { replica_num: 1, preferred_segment: s[0].segment });
    const target = s[2];
    target.proc.kill('SIGKILL'); // the master still has its segment mounted until --client_ttl passes
    await target.exited; // copies start at once (copy notices): the target must be gone before the task
    const id = await client.createMoveTask('doomed-target', s[0].segment, target.segment);
    expect((await finished(id))[2]).toBe('failed: SEGMENT_NOT_FOUND');
    expect(await client.queryTask(id)).toMatchObject({ state: 'failed', errorCode: ErrorCode.SEGMENT_NOT_FOUND, errorName: 'SEGMENT_NOT_FOUND' });
    const list = await replicas('doomed-target');
    expect(list.map((r) => r.handles[0].segment_name)).toEqual([s[0].segment]); // nothing half-joined, the source kept
    expect((await readReplica(list[0])).equals(value)).toBe(true);
    expect((await client.get('doomed-target')).equals(value)).toBe(true);

    const metrics = await fetch(`http://${cluster.master.metrics}/metrics`).then((r) => r.text());
    expect(Number(/store_master_tasks_succeeded_total (\d+)/.exec(metrics)![1])).toBe(5);
    expect(Number(/store_master_tasks_failed_total (\d+)/.exec(metrics)![1])).toBe(1);
    expect(metrics).toMatch(/store_master_tasks_pending 0/);
    expect(metrics).toMatch(/store_master_tasks_processing 0/);
  });
});
