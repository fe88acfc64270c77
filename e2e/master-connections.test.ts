// What connections can make a real master hold (issue 10, defect 4): raw sockets that send most
// of a big request and then nothing, over the fast channel and over gRPC (HTTP/2), more
// connections than --rpc_max_connections, and more than the process has file descriptors for.
// The master's peak memory (VmHWM in /proc/<pid>/status) stays within a bound derived from
// --rpc_max_buffered_request_bytes, the half-sent connections are closed (the largest holders
// when the budget is passed, the rest after --rpc_request_timeout_seconds), refusals and closes
// are counted in /metrics, and a well-behaved client is served throughout. Run `npm run build` first.
import { connect as http2Connect, type ClientHttp2Session } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { channelSocket } from './auth-helpers.js';
import { CHANNEL_MAGIC, FrameKind, MAX_REQUEST_PAYLOAD_BYTES, encodeFrame } from '../common/channel-frame.js';
import { ErrorCode } from '../common/error-code.js';
import { masterMethodByName } from '../common/master-proto.js';
import { MasterClient } from '../client/master-client.js';
import { memoryOf, metric, startMaster, type MasterProcess } from './master-process.js';

const MiB = 1024 * 1024;
const BUDGET = 64 * MiB;
/** Peak memory the attacks below may add to a master: the budget's bytes, their copies on the way (socket reads, V8's external memory before a collection), and slack for the heap. */
const PEAK_GROWTH_BOUND = 3 * BUDGET + 64 * MiB;
const CLIENT = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const putStart = masterMethodByName.get('PutStart')!;

/**
 * A channel connection (past the cluster-secret handshake: an insider) that sends a request frame
 * of 16 MiB short by 100 bytes, then waits.
 */
async function halfSentFrame(address: string, filler: Buffer): Promise<{ socket: Socket; closed: Promise<void> }> {
  const { socket } = await channelSocket(address);
  socket.on('error', () => undefined); // EPIPE / reset once the master closes it
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  const header = encodeFrame(FrameKind.REQUEST, 1, putStart.index, Buffer.alloc(0));
  header.writeUInt32LE(MAX_REQUEST_PAYLOAD_BYTES, 0);
  socket.write(header);
  socket.write(filler.subarray(0, MAX_REQUEST_PAYLOAD_BYTES - 100));
  return { socket, closed };
}

/** A gRPC call whose request message promises 16 MiB and sends `sent` bytes of it, then waits. */
function halfSentGrpcCall(address: string, filler: Buffer, sent: number): { session: ClientHttp2Session; closed: Promise<void> } {
  const session = http2Connect(`http://${address}`);
  session.on('error', () => undefined);
  const stream = session.request({ ':method': 'POST', ':path': '/store.MasterService/PutStart', 'content-type': 'application/grpc', te: 'trailers' });
  stream.on('error', () => undefined);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(MAX_REQUEST_PAYLOAD_BYTES - 100, 1);
  stream.write(prefix);
  stream.write(filler.subarray(0, sent));
  return { session, closed: new Promise((r) => session.once('close', () => r())) };
}

/** Pings over a MasterClient until `until` settles; resolves with the number of pings, all OK. */
async function pingThroughout(m: MasterProcess, until: Promise<unknown>): Promise<{ pings: number; failures: string[] }> {
  const c = await MasterClient.connect(m.rpc, { requestTimeoutMs: 20_000 });
  let done = false;
  void until.then(() => (done = true));
  let pings = 0;
  const failures: string[] = [];
  try {
    while (!done || pings === 0) {
      try {
        const r = await c.ping({ client_id: CLIENT });
        if (r.status_code === ErrorCode.OK) pings++;
        else failures.push(`status ${r.status_code}`);
      } catch (e) {
        failures.push((e as Error).message);
      }
    }
  } finally {
    c.close();
  }
  return { pings, failures };
}

describe('store_master connection limits', () => {
  const filler = Buffer.alloc(MAX_REQUEST_PAYLOAD_BYTES, 0x61);

  it('64 channel connections each holding a 16 MiB frame short by 100 bytes: bounded memory, all closed, counted, pings served throughout', async () => {
    const m = await startMaster([`--rpc_max_buffered_request_bytes=${BUDGET}`, '--rpc_request_timeout_seconds=2']);
    try {
      const base = memoryOf(m.pid, 'VmRSS');
      const attackers = await Promise.all(Array.from({ length: 64 }, () => halfSentFrame(m.rpc, filler)));
      const allClosed = Promise.all(attackers.map((a) => a.closed));
      const served = pingThroughout(m, allClosed);
      await allClosed;
      const { pings, failures } = await served;
      expect(failures).toEqual([]);
      expect(pings).toBeGreaterThan(0);
      const growth = memoryOf(m.pid, 'VmHWM') - base;
      expect(growth).toBeLessThanOrEqual(PEAK_GROWTH_BOUND);
      const byBudget = await metric(m, 'store_master_rpc_connections_closed_total', 'reason="request_budget"');
      const byTimeout = await metric(m, 'store_master_rpc_connections_closed_total', 'reason="request_timeout"');
      expect(byBudget).toBeGreaterThan(0);
      expect(byTimeout).toBeGreaterThan(0);
      expect(byBudget + byTimeout).toBe(64);
      expect(await metric(m, 'store_master_rpc_buffered_request_bytes')).toBe(0);
      expect(m.stderr()).toMatch(/closing RPC connection from 127\.0\.0\.1:\d+: incomplete requests across connections passed --rpc_max_buffered_request_bytes=67108864/);
      expect(m.stderr()).toMatch(/a request did not fully arrive within --rpc_request_timeout_seconds=2/);
    } finally {
      await m.stop();
    }
  });

  it('16 gRPC calls each sending 8 MiB of a 16 MiB message: bounded memory, all closed, counted, pings served throughout', async () => {
    const m = await startMaster([`--rpc_max_buffered_request_bytes=${BUDGET}`, '--rpc_request_timeout_seconds=2']);
    try {
      const base = memoryOf(m.pid, 'VmRSS');
      const calls = Array.from({ length: 16 }, () => halfSentGrpcCall(m.rpc, filler, 8 * MiB));
      const allClosed = Promise.all(calls.map((c) => c.closed));
      const served = pingThroughout(m, allClosed);
      await allClosed;
      const { pings, failures } = await served;
      expect(failures).toEqual([]);
      expect(pings).toBeGreaterThan(0);
      expect(memoryOf(m.pid, 'VmHWM') - base).toBeLessThanOrEqual(PEAK_GROWTH_BOUND);
      const byBudget = await metric(m, 'store_master_rpc_connections_closed_total', 'reason="request_budget"');
      const byTimeout = await metric(m, 'store_master_rpc_connections_closed_total', 'reason="request_timeout"');
      expect(byBudget).toBeGreaterThan(0);
      expect(byBudget + byTimeout).toBe(16);
    } finally {
      await m.stop();
    }
  });

  it('refuses connections past --rpc_max_connections on accept, counts them, and serves again once some close', async () => {
    const m = await startMaster(['--rpc_max_connections=16']);
    try {
      const held: Socket[] = [];
      const [host, port] = m.rpc.split(':');
      const open = (): Promise<Socket> =>
        new Promise((resolve) => {
          const s = connect(Number(port), host, () => {
            s.write(CHANNEL_MAGIC);
            resolve(s);
          });
          s.on('error', () => undefined);
        });
      for (let i = 0; i < 24; i++) held.push(await open());
      // the master closes the 8 past the limit at once (accepted in connect order)
      const refused = held.slice(16);
      await Promise.all(refused.map((s) => new Promise((r) => (s.destroyed ? r(null) : s.once('close', r)))));
      expect(await metric(m, 'store_master_rpc_connections_refused_total', 'reason="limit"')).toBe(8);
      expect(await metric(m, 'store_master_rpc_connections')).toBe(16);
      for (const s of held.slice(0, 4)) s.destroy();
      // The master learns of those closes on its own time: wait until it counts them (its gauge),
      // or a new connection may still find it full.
      while ((await metric(m, 'store_master_rpc_connections')) > 12) await new Promise((r) => setImmediate(r));
      const c = await MasterClient.connect(m.rpc);
      try {
        expect((await c.ping({ client_id: CLIENT })).status_code).toBe(ErrorCode.OK);
      } finally {
        c.close();
        for (const s of held) s.destroy();
      }
    } finally {
      await m.stop();
    }
  });

  it('under a file descriptor limit, caps connections below it: the rest are refused and counted, never an EMFILE', async () => {
    // 1024 descriptors leave 896 for RPC connections (master-startup.ts: FD_RESERVE); 1200 try
    const m = await startMaster([], { nofile: 1024 });
    try {
      expect(m.stderr()).toMatch(/--rpc_max_connections=4096 needs more file descriptors than the limit of 1024 \(ulimit -n\) leaves; serving at most 896 RPC connections/);
      const [host, port] = m.rpc.split(':');
      const sockets: Socket[] = [];
      // the master keeps 896 and closes the rest on accept: wait for those 304 closes
      let closes = 0;
      const refusedAll = new Promise<void>((resolve) => {
        for (let i = 0; i < 1200; i++) {
          const s = connect(Number(port), host, () => s.write(CHANNEL_MAGIC));
          s.on('error', () => undefined);
          s.once('close', () => ++closes === 1200 - 896 && resolve());
          sockets.push(s);
        }
      });
      await refusedAll;
      expect(await metric(m, 'store_master_rpc_connections_refused_total', 'reason="limit"')).toBe(1200 - 896);
      expect(await metric(m, 'store_master_rpc_connections')).toBe(896);
      expect(m.stderr()).not.toMatch(/EMFILE/);
      for (const s of sockets) s.destroy();
      await Promise.all(sockets.map((s) => new Promise((r) => (s.closed ? r(null) : s.once('close', r)))));
      const c = await MasterClient.connect(m.rpc);
      try {
        expect((await c.ping({ client_id: CLIENT })).status_code).toBe(ErrorCode.OK);
      } finally {
        c.close();
      }
      expect(m.proc.exitCode).toBeNull();
    } finally {
      await m.stop();
    }
  });
});
