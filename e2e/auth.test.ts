// End to end, real processes: the cluster secret on every control interface (issue 14,
// docs/threat-model.md). A peer without the secret, or with another one, is refused by the master's
// fast channel, its gRPC service and its metadata server's writes, and by a store service's
// dummy-client channel, its gRPC and its REST mount API, before anything changes; the refusal is
// counted in /metrics; the right secret is accepted. Servers refuse to start without a secret or
// --allow_unauthenticated. Run `npm run build` first.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { LocalCluster, distRoot, track } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import { MasterClient } from '../client/master-client.js';
import { MasterAuthError } from '../client/master-channel-errors.js';
import { UnauthenticatedError } from '../client/errors.js';
import { AUTH_HEADER, clientSecret, signCall } from '../common/cluster-secret.js';
import { FrameKind, encodeFrame } from '../common/channel-frame.js';
import { ErrorCode } from '../common/error-code.js';
import { encodeWith, masterMethodByName } from '../common/master-proto.js';
import { authInterceptor } from '../common/grpc-auth.js';
import { authHeaders } from './auth-helpers.js';
import { RawChannel } from './raw-channel.js';

const dir = mkdtempSync(join(tmpdir(), 'auth-e2e-'));
const wrongFile = join(dir, 'wrong');
writeFileSync(wrongFile, 'w'.repeat(64) + '\n');
const WRONG = clientSecret(wrongFile)!;
const putStart = masterMethodByName.get('PutStart')!;
const NO_SECRET_ENV = { ...process.env, STORE_CLUSTER_SECRET_FILE: '' };

let cluster: LocalCluster;
beforeAll(async () => {
  cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '64MB' });
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

/** A counter's value from Prometheus text (0 when absent). */
async function counter(url: string, name: string, iface: string): Promise<number> {
  const text = await (await fetch(url)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`interface="${iface}"`));
  return line ? Number(line.split(' ').pop()) : 0;
}
const masterRefused = (iface: string) => counter(`http://${cluster.master.metrics}/metrics`, 'store_master_auth_refused_total', iface);
const serviceRefused = (iface: string) => counter(`http://${cluster.services[0].http}/metrics`, 'store_service_auth_refused_total', iface);

const exists = async (key: string) => (await fetch(`http://${cluster.master.metrics}/query_key?key=${key}`)).status === 200;

/** A unary gRPC call of `path` with `options` (interceptors); resolves with the status code. */
function grpcStatus(address: string, path: string, payload: Buffer, options: grpc.ClientOptions): Promise<number> {
  const c = new grpc.Client(address, grpc.credentials.createInsecure(), options);
  return new Promise<number>((resolve) =>
    c.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      payload,
      (e) => {
        c.close();
        resolve(e ? e.code : grpc.status.OK);
      },
    ),
  );
}

describe('the master fast channel', () => {
  it('answers a PutStart without the secret with an ERROR frame, closes, stores nothing, and counts it', async () => {
    const before = await masterRefused('master-channel');
    const ch = RawChannel.of(cluster.master.rpc, null);
    ch.send(encodeFrame(FrameKind.REQUEST, 5, putStart.index, encodeWith(putStart.requestCodec, { key: 'stranger-1', value_length: 10, slice_lengths: [10] })));
    const reply = await ch.reply(5);
    expect(reply.kind).toBe(FrameKind.ERROR);
    expect(reply.payload.toString()).toMatch(/^UNAUTHENTICATED: .*requires the cluster secret/);
    await ch.closed;
    expect(await exists('stranger-1')).toBe(false);
    expect(await masterRefused('master-channel')).toBe(before + 1);
  });

  it('refuses a wrong secret with a typed UNAUTHENTICATED error at connect, and accepts the right one', async () => {
    const before = await masterRefused('master-channel');
    const err = await MasterClient.connect(cluster.master.rpc, { secret: WRONG }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MasterAuthError);
    expect((err as MasterAuthError).code).toBe(ErrorCode.UNAUTHENTICATED);
    expect((err as Error).message).toMatch(/wrong cluster secret/);
    expect(await masterRefused('master-channel')).toBe(before + 1);
    const ok = await MasterClient.connect(cluster.master.rpc);
    try {
      expect((await ok.ping({ client_id: '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b' })).status_code).toBe(ErrorCode.OK);
    } finally {
      ok.close();
    }
  });

  it('Client.setup with a wrong secret fails at once with UnauthenticatedError, not after its retries', async () => {
    const err = await Client.setup(cluster.clientConfig({ local_buffer_size: 4 * 1024 * 1024 }), { clusterSecretFile: wrongFile, log: () => {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthenticatedError);
    expect((err as UnauthenticatedError).code).toBe(ErrorCode.UNAUTHENTICATED);
  });
});

describe('the master gRPC service', () => {
  const path = '/store.MasterService/PutStart';
  const req = () => encodeWith(putStart.requestCodec, { key: 'stranger-grpc', value_length: 10, slice_lengths: [10] });

  it('refuses calls without the header, with a wrong secret or replayed; serves the right one', async () => {
    const before = await masterRefused('master-grpc');
    expect(await grpcStatus(cluster.master.rpc, path, req(), {})).toBe(grpc.status.UNAUTHENTICATED);
    expect(await grpcStatus(cluster.master.rpc, path, req(), { interceptors: [authInterceptor(WRONG)] })).toBe(grpc.status.UNAUTHENTICATED);
    expect(await exists('stranger-grpc')).toBe(false);
    // one signed header sent twice: the second is a replay
    const fixed = signCall(clientSecret()!, 'POST', '/store.MasterService/Ping');
    const replaying: grpc.Interceptor = (options, next) =>
      new grpc.InterceptingCall(next(options), {
        start(metadata, listener, go) {
          metadata.set(AUTH_HEADER, fixed);
          go(metadata, listener);
        },
      });
    const ping = encodeWith(masterMethodByName.get('Ping')!.requestCodec, { client_id: '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b' });
    expect(await grpcStatus(cluster.master.rpc, '/store.MasterService/Ping', ping, { interceptors: [replaying] })).toBe(grpc.status.OK);
    expect(await grpcStatus(cluster.master.rpc, '/store.MasterService/Ping', ping, { interceptors: [replaying] })).toBe(grpc.status.UNAUTHENTICATED);
    expect(await masterRefused('master-grpc')).toBe(before + 3);
    expect(await grpcStatus(cluster.master.rpc, '/store.MasterService/Ping', ping, { interceptors: [authInterceptor(clientSecret()!)] })).toBe(grpc.status.OK);
  });
});

describe("the master's metadata server", () => {
  it('refuses PUT and DELETE without the secret or with a wrong one (401, the record unchanged); GET stays open', async () => {
    const url = `${cluster.master.metadata}?key=auth-e2e-record`;
    const put = (body: string, headers: Record<string, string>) => fetch(url, { method: 'PUT', body, headers });
    expect((await put('{"v":1}', authHeaders('PUT', url, '{"v":1}'))).status).toBe(200);
    const before = await masterRefused('metadata-http');
    const bare = await put('{"v":"stranger"}', {});
    expect(bare.status).toBe(401);
    expect(await bare.json()).toEqual({ status: 'error', error: expect.stringMatching(/^UNAUTHENTICATED: missing x-kvstore-auth/) });
    expect((await put('{"v":"stranger"}', authHeaders('PUT', url, '{"v":"stranger"}', WRONG))).status).toBe(401);
    // a header signed for another body does not carry over
    expect((await put('{"v":"stranger"}', authHeaders('PUT', url, '{"v":1}'))).status).toBe(401);
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(401);
    expect(await (await fetch(url)).text()).toBe('{"v":1}');
    expect(await masterRefused('metadata-http')).toBe(before + 4);
    expect((await fetch(url, { method: 'DELETE', headers: authHeaders('DELETE', url) })).status).toBe(200);
  });
});

describe("a store service's dummy-client service", () => {
  it('refuses a DummyClient with a wrong secret or none (TCP and the Unix socket) with UnauthenticatedError; accepts the right one', async () => {
    const svc = cluster.services[0];
    const before = await serviceRefused('dummy-client');
    for (const where of [{ address: svc.rpc, socketPath: '' }, { address: svc.rpc }]) {
      await expect(DummyClient.connect({ ...where, bufferSize: 1 << 20, clusterSecretFile: wrongFile, requestTimeoutMs: 20_000 })).rejects.toThrow(UnauthenticatedError);
      await expect(DummyClient.connect({ ...where, bufferSize: 1 << 20, env: NO_SECRET_ENV, requestTimeoutMs: 20_000 })).rejects.toThrow(/requires the cluster secret/);
    }
    expect(await serviceRefused('dummy-client')).toBe(before + 4);
    const ok = await DummyClient.connect({ address: svc.rpc, bufferSize: 1 << 20 });
    try {
      await ok.put('auth-e2e-dummy', Buffer.from('inside'));
      expect(Buffer.from(await ok.get('auth-e2e-dummy')).toString()).toBe('inside');
    } finally {
      await ok.close();
    }
  });

  it('refuses gRPC calls without the header', async () => {
    const svc = cluster.services[0];
    const before = await serviceRefused('dummy-client-grpc');
    expect(await grpcStatus(svc.rpc, '/store.ClientService/Hello', Buffer.alloc(0), {})).toBe(grpc.status.UNAUTHENTICATED);
    expect(await grpcStatus(svc.rpc, '/store.ClientService/Hello', Buffer.alloc(0), { interceptors: [authInterceptor(clientSecret()!)] })).toBe(grpc.status.OK);
    expect(await serviceRefused('dummy-client-grpc')).toBe(before + 1);
  });
});

describe("a store service's REST mount API", () => {
  it('mounts nothing for a call without the secret or with a wrong one (401), and mounts for the right one', async () => {
    const svc = cluster.services[0];
    const url = `http://${svc.http}/api/mount`;
    const body = JSON.stringify({ size: 4 * 1024 * 1024 });
    const segments = async () => ((await (await fetch(`http://${svc.http}/segments`)).json()) as { segments: unknown[] }).segments.length;
    const before = await segments();
    const refusedBefore = await serviceRefused('rest-api');
    const post = (headers: Record<string, string>) => fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
    const bare = await post({});
    expect(bare.status).toBe(401);
    expect(await bare.json()).toEqual({ status: 'error', error: expect.stringMatching(/^UNAUTHENTICATED/) });
    expect((await post(authHeaders('POST', url, body, WRONG))).status).toBe(401);
    expect(await segments()).toBe(before);
    expect(await serviceRefused('rest-api')).toBe(refusedBefore + 2);
    const ok = await post(authHeaders('POST', url, body));
    expect(ok.status).toBe(200);
    const ids = ((await ok.json()) as { segment_ids: string[] }).segment_ids;
    expect(await segments()).toBe(before + ids.length);
    const unmountUrl = `http://${svc.http}/api/unmount`;
    const unmountBody = JSON.stringify({ segment_ids: ids });
    expect((await fetch(unmountUrl, { method: 'POST', body: unmountBody, headers: { 'content-type': 'application/json' } })).status).toBe(401);
    const un = await fetch(unmountUrl, { method: 'POST', body: unmountBody, headers: { 'content-type': 'application/json', ...authHeaders('POST', unmountUrl, unmountBody) } });
    expect(un.status).toBe(200);
  });
});

describe('startup', () => {
  const run = (bin: string, args: string[], env: NodeJS.ProcessEnv) => spawnSync(process.execPath, [join(distRoot(), bin), ...args], { env, encoding: 'utf8', timeout: 30_000 });

  it.each([
    ['master/main.js', ['--rpc_port=0', '--metrics_port=0']],
    ['sidecar/main.js', ['--port=0', '--rpc_port=0']],
  ])('%s refuses to start without a secret or --allow_unauthenticated: exit 2, one line saying both ways', (bin, args) => {
    const r = run(bin, args, NO_SECRET_ENV);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--cluster_secret_file=PATH .*store secret new FILE.*--allow_unauthenticated/);
    const short = join(dir, 'short');
    writeFileSync(short, 'x'.repeat(20));
    const s = run(bin, [...args, `--cluster_secret_file=${short}`], NO_SECRET_ENV);
    expect(s.status).toBe(2);
    expect(s.stderr).toMatch(/20 bytes; at least 32/);
  });

  it('store secret new FILE writes 64 hex characters, mode 0600, and refuses to overwrite', () => {
    const file = join(dir, 'made');
    const cli = (args: string[]) => spawnSync(process.execPath, [join(distRoot(), 'cli/main.js'), ...args], { encoding: 'utf8' });
    const r = cli(['secret', 'new', file]);
    expect(r.status).toBe(0);
    expect(readFileSync(file, 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const again = cli(['secret', 'new', file]);
    expect(again.status).toBe(5);
    expect(again.stderr).toMatch(/exists/);
  });

  it('an unauthenticated master (--allow_unauthenticated) warns, and a client with a secret gets a clear error at once, not a hang', async () => {
    const h = track(
      'open-master',
      spawn(process.execPath, [join(distRoot(), 'master/main.js'), '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', '--allow_unauthenticated'], {
        env: NO_SECRET_ENV,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    try {
      const m = await h.waitFor(/store_master listening: rpc=(\S+)/);
      expect(h.output()).toMatch(/running WITHOUT authentication/);
      const err = await MasterClient.connect(m[1]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MasterAuthError);
      expect((err as Error).message).toMatch(/does not authenticate/);
      const open = await MasterClient.connect(m[1], { secret: null });
      open.close();
    } finally {
      h.proc.kill('SIGTERM');
      await h.exited;
    }
  });
});
