// End to end, real processes: what a stranger (another process on the same machine, no
// credentials) could do before authentication existed (issue 14, docs/threat-model.md): take a
// segment's name away from its owner (and what a name squatted while the master forgot it does to
// the owner's remount), reach memory a client never meant to serve (its staging
// buffer, its result arena and the Buffers get() returned in it), and use a store service's
// dummy-client Unix socket as another user. Run `npm run build` first.
//
// Since the cluster secret (e2e/auth.test.ts), a process without it is refused at every control
// interface before it can try any of this: the "strangers" below hold the run's secret
// (STORE_CLUSTER_SECRET_FILE, e2e/global-secret.ts), so these tests now show what the owner checks
// stop an insider from doing. What stays open to a process without the secret: the transfer
// engines' ports until the native handshake lands (h-native-auth), and the GET endpoints.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes, randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalCluster, track, type ProcessHandle } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { MasterClient } from '../client/master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { mapMemory, TransferEngine } from '../native/index.js';
import { rawConnect, requestHeader, WireStatus } from '../native/test-fixtures/raw-wire.js';
import { runSecret } from '../native/test-fixtures/run-secret.js';
import { asStranger, cannotSwitchUid, strangerUid } from '../native/test-fixtures/other-uid.js';

const MiB = 1024 * 1024;
const TCP_ONLY = { ...process.env, MC_STORE_SHM_TRANSPORT: '0' };
const here = dirname(fileURLToPath(import.meta.url));

describe("a stranger and a segment's name", () => {
  let cluster: LocalCluster;
  afterAll(async () => cluster?.stop(), 30_000);

  it("can neither unmount the owner's segment nor mount its own under that name: the owner's puts all land in the owner's memory", async () => {
    cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '64MB', env: TCP_ONLY });
    const owner = cluster.services[0];
    const stranger = await MasterClient.connect(cluster.master.rpc);
    const engine = new TransferEngine({ host: '127.0.0.1', shmTransport: false, env: {}, authSecret: runSecret() });
    const trap = mapMemory({ size: 64 * MiB });
    const writer = await Client.setup(cluster.clientConfig({ local_buffer_size: 8 * MiB }), { env: TCP_ONLY, engine: { shmTransport: false } });
    try {
      const endpoint = engine.start();
      const incarnation = engine.registerRegion(trap.address, trap.size);
      // Before, an empty client id skipped the owner check and the segment was gone.
      expect((await stranger.unmountSegment({ segment_name: owner.segment, client_id: '', grace_period_seconds: 0 })).status_code).toBe(ErrorCode.INVALID_PARAMS);
      expect((await stranger.unmountSegment({ segment_name: owner.segment, client_id: randomUUID(), grace_period_seconds: 0 })).status_code).toBe(ErrorCode.INVALID_PARAMS);
      const mount = await stranger.mountSegment({
        buffer: trap.address,
        size: trap.size,
        segment_name: owner.segment,
        client_id: randomUUID(),
        te_endpoint: endpoint,
        protocol: 'tcp',
        incarnation,
      });
      expect(mount.status_code).toBe(ErrorCode.SEGMENT_ALREADY_EXISTS);
      const segments = JSON.parse(await cluster.admin('/get_segments_detail')) as { segments: { segment_name: string; te_endpoint: string; client_id: string }[] };
      expect(segments.segments.map((s) => [s.segment_name, s.te_endpoint, s.client_id])).toEqual([[owner.segment, owner.endpoint, owner.clientId]]);
      const values = Array.from({ length: 20 }, () => randomBytes(64 * 1024));
      for (const [i, v] of values.entries()) await writer.put(`owned-${i}`, v);
      for (const [i, v] of values.entries()) expect((await writer.get(`owned-${i}`)).equals(v)).toBe(true);
      // Not one byte reached the stranger's memory (before: 20 of 20 puts did).
      const view = trap.view(0, trap.size);
      expect(view.every((b) => b === 0)).toBe(true);
    } finally {
      await writer.close();
      stranger.close();
      engine.close();
      trap.release();
    }
  });
});

describe("a stranger who takes a segment's name while the master has forgotten it", () => {
  let cluster: LocalCluster;
  afterAll(async () => cluster?.stop(), 30_000);

  it("does not make the owner's remount a false success; the owner gets its name back once the squatter's client id expires", async () => {
    cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '64MB', masterArgs: ['--client_ttl=5s'], env: TCP_ONLY });
    const owner = cluster.services[0];
    const engine = new TransferEngine({ host: '127.0.0.1', shmTransport: false, env: {}, authSecret: runSecret() });
    const trap = mapMemory({ size: 64 * MiB });
    let stranger: MasterClient | undefined;
    const detail = async () =>
      (JSON.parse(await cluster.admin('/get_segments_detail')) as { segments: { segment_name: string; te_endpoint: string; client_id: string }[] }).segments.map((x) => [
        x.segment_name,
        x.te_endpoint,
        x.client_id,
      ]);
    try {
      const endpoint = engine.start();
      const incarnation = engine.registerRegion(trap.address, trap.size);
      // The owner is paused while the master restarts empty: the stranger mounts first.
      owner.proc.kill('SIGSTOP');
      try {
        await cluster.restartMaster();
        stranger = await MasterClient.connect(cluster.master.rpc);
        const squatter = randomUUID();
        const m = await stranger.mountSegment({
          buffer: trap.address,
          size: trap.size,
          segment_name: owner.segment,
          client_id: squatter,
          te_endpoint: endpoint,
          protocol: 'tcp',
          incarnation,
        });
        expect(m.status_code).toBe(ErrorCode.OK); // names are first come, first served (docs/threat-model.md)
      } finally {
        owner.proc.kill('SIGCONT');
      }
      // The owner's remount meets SEGMENT_ALREADY_EXISTS; it may replace only a mount of its own,
      // so it fails and is asked again at the next heartbeat (a second attempt proves the first
      // did not succeed).
      await owner.waitFor(/asked for a remount[\s\S]*asked for a remount/);
      const squatted = await detail();
      expect(squatted).toHaveLength(1);
      expect(squatted[0].slice(0, 2)).toEqual([owner.segment, endpoint]);
      expect(owner.output()).not.toMatch(/remounted 1 segment\(s\) with master/);
      // The squatter never pings: past --client_ttl its segment goes, and the owner's next remount succeeds.
      await owner.waitFor(/remounted 1 segment\(s\) with master/);
      expect(await detail()).toEqual([[owner.segment, owner.endpoint, owner.clientId]]);
    } finally {
      stranger?.close();
      engine.close();
      trap.release();
    }
  });
});

interface Target {
  endpoint: string;
  staging: number;
  stagingSize: number;
  arena: number;
  arenaSize: number;
  held: number;
  heldLength: number;
  segment: number;
  segmentSize: number;
}

describe("a stranger and a client's engine", () => {
  let cluster: LocalCluster;
  let target: ProcessHandle | undefined;
  afterAll(async () => {
    if (target && target.proc.exitCode === null) {
      target.proc.stdin?.end('exit\n');
      await target.exited;
    }
    await cluster?.stop();
  }, 30_000);

  it('is refused its staging buffer, result arena and returned Buffers, over TCP and shm, the same as an address never registered; segments stay readable', async () => {
    cluster = await LocalCluster.start({ storeServices: 0 });
    const proc = spawn(process.execPath, [join(here, 'fixtures/probe-target.mjs'), cluster.master.rpc, cluster.master.metadata], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    target = track('probe-target', proc);
    const t = JSON.parse((await target.waitFor(/^target (.*)$/m))[1]) as Target;
    expect(t.held).toBeGreaterThanOrEqual(t.arena);
    expect(t.held + t.heldLength).toBeLessThanOrEqual(t.arena + t.arenaSize);

    // TCP, by hand: the probe a port scan makes. Every private range answers exactly what an
    // address no region ever covered answers (nothing to learn), and the connection stays usable.
    const conn = await rawConnect(t.endpoint, undefined, runSecret());
    const nowhere = 4096; // the first page is never mapped
    const probes = [t.staging, t.staging + t.stagingSize - 1, t.arena, t.held, t.held + t.heldLength - 1, nowhere];
    const statuses: number[] = [];
    for (const address of probes) {
      conn.sock.write(requestHeader({ op: 'read', address, length: 1 }));
      statuses.push(await conn.response());
    }
    expect(statuses).toEqual(probes.map(() => WireStatus.OUT_OF_RANGE));
    conn.sock.write(requestHeader({ op: 'write', address: t.held, length: 4096 }));
    conn.sock.write(Buffer.alloc(4096, 0xee));
    expect(await conn.response()).toBe(WireStatus.OUT_OF_RANGE);
    conn.sock.write(requestHeader({ op: 'read', address: t.segment, length: 4096 }));
    expect(await conn.response()).toBe(WireStatus.OK);
    conn.sock.destroy();

    // Through the engine, over the same-host shm transport and over TCP.
    for (const shmTransport of [true, false]) {
      const engine = new TransferEngine({ host: '127.0.0.1', shmTransport, env: {}, authSecret: runSecret() });
      const local = mapMemory({ size: MiB });
      try {
        engine.start();
        engine.registerRegion(local.address, local.size, { serve: false });
        const read = (remoteAddress: number) => engine.transfer([{ op: 'read', endpoint: t.endpoint, remoteAddress, localAddress: local.address, length: 4096 }]);
        await expect(read(t.staging)).rejects.toMatchObject({ code: 'ADDRESS_OUT_OF_RANGE' });
        await expect(read(t.held)).rejects.toMatchObject({ code: 'ADDRESS_OUT_OF_RANGE' });
        await expect(engine.transfer([{ op: 'write', endpoint: t.endpoint, remoteAddress: t.held, localAddress: local.address, length: 4096 }])).rejects.toMatchObject({
          code: 'ADDRESS_OUT_OF_RANGE',
        });
        await read(t.segment); // what peers must reach still works
      } finally {
        engine.close();
        local.release();
      }
    }
    // The Buffer get() returned, still held by the application, has the bytes it was given.
    proc.stdin.write('check\n');
    expect((await target.waitFor(/^intact (\w+)$/m))[1]).toBe('true');
    proc.stdin.end('exit\n');
    expect(await target.exited).toBe(0);
  });
});

// Another uid, a real socket: the test runs as root and starts the stranger under setpriv.
describe("a stranger and the store service's dummy-client socket", () => {
  let cluster: LocalCluster;
  afterAll(async () => cluster?.stop(), 30_000);

  (cannotSwitchUid ? it.skip : it)(
    `is refused when its uid is not allowed, even where the socket file lets everyone connect${cannotSwitchUid ? ` (skipped: needs ${cannotSwitchUid})` : ''}`,
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'kvstore-stranger-'));
      chmodSync(dir, 0o1777);
      try {
        cluster = await LocalCluster.start({ storeServices: 0 });
        const svc = await cluster.addService([`--shm_dir=${dir}`]);
        chmodSync(svc.socket, 0o777); // as a permissive umask or shared volume leaves it
        const knock = (wrap: string[], secretFile = process.env.STORE_CLUSTER_SECRET_FILE ?? '') =>
          new Promise<string>((resolve, reject) =>
            execFile(
              wrap[0] ?? process.execPath,
              [...wrap.slice(1), ...(wrap.length ? [process.execPath] : []), join(here, 'fixtures/socket-knock.mjs'), svc.socket],
              { env: { ...process.env, STORE_CLUSTER_SECRET_FILE: secretFile } },
              (err, out) => (err ? reject(err) : resolve(out.trim())),
            ),
          );
        // without the cluster secret (the stranger cannot read the run's file, mode 0600)
        expect(await knock(asStranger, '')).toMatch(
          new RegExp(
            `^refused .*unreachable .*Hello refused by store service .*: uid ${strangerUid} may not use the dummy-client socket .* \\(the store service allows 0; --peer_uids adds more\\)`,
          ),
        );
        // with a copy of it: the uid check still refuses before the handshake
        const copy = join(dir, 'secret-copy');
        copyFileSync(process.env.STORE_CLUSTER_SECRET_FILE!, copy);
        chmodSync(copy, 0o644);
        expect(await knock(asStranger, copy)).toMatch(new RegExp(`^refused .*dummy-client server refused the connection: uid ${strangerUid} may not use the dummy-client socket`));
        await svc.waitFor(new RegExp(`dummy-client socket \\S+: refused pid \\d+ uid ${strangerUid}: not an allowed uid \\(allowed: 0; --peer_uids adds more\\)`));
        expect(await knock([])).toBe('connected'); // the same uid as the store service
      } finally {
        await cluster?.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
