// What one request can make the master allocate, end to end: a real `node dist/master/main.js`
// refuses a request with too many elements before decoding it (INVALID_PARAMS, over the fast
// channel and gRPC alike), closes a channel connection that sends a request frame over 16 MB, and
// keeps serving. The reply-size limit of the channel is exercised on a ChannelConnection over a
// loopback socket with a small limit (a 64 MB reply from a real master is too heavy for a test).
// Run `npm run build` first.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import { CHANNEL_MAGIC, FrameKind, HEADER_BYTES, MAX_REQUEST_PAYLOAD_BYTES, encodeFrame } from '../common/channel-frame.js';
import { RawChannel } from './raw-channel.js';
import { ErrorCode } from '../common/error-code.js';
import { Logger } from '../common/logger.js';
import { decodeMessage, encodeWith, masterMethodByName, masterMethods } from '../common/master-proto.js';
import { ChannelConnection } from '../master/channel-server.js';
import { BATCH_CHUNK, MasterClient } from '../client/master-client.js';
import { MasterMetrics } from '../master/master-metrics.js';
import { RpcDispatcher } from '../master/rpc-dispatcher.js';

const MAIN = join(process.cwd(), 'dist', 'master', 'main.js');

interface Master {
  proc: ChildProcess;
  rpc: string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function startMaster(): Promise<Master> {
  const proc = spawn(process.execPath, [MAIN, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /store_master listening: rpc=(\S+)/.exec(err);
      if (m) resolve({ proc, rpc: m[1], stderr: () => err, exited });
    });
    void exited.then((code) => reject(new Error(`master exited with ${code} before listening: ${err}`)));
  });
}

const ping = masterMethodByName.get('Ping')!;
const pingRequest = encodeWith(ping.requestCodec, { client_id: '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b' });
const batchPutStart = masterMethodByName.get('BatchPutStart')!;
const statusOf = (type: typeof ping, payload: Uint8Array): number => decodeMessage<{ status_code: number }>(type.responseType, payload).status_code;
/** `n` empty PutStartRequests: the bytes 0a 00 repeated. */
const emptySubRequests = (n: number): Buffer => Buffer.alloc(2 * n).fill(Buffer.from([0x0a, 0x00]));

describe('store_master request limits', () => {
  let m: Master;

  beforeAll(async () => {
    m = await startMaster();
  });

  afterAll(async () => {
    m.proc.kill('SIGTERM');
    await m.exited;
  });

  it('refuses 200,000 empty sub-requests over the channel with INVALID_PARAMS and keeps the connection', async () => {
    const ch = RawChannel.of(m.rpc);
    try {
      ch.send(encodeFrame(FrameKind.REQUEST, 1, batchPutStart.index, emptySubRequests(200_000)));
      ch.send(encodeFrame(FrameKind.REQUEST, 2, ping.index, pingRequest));
      const refused = await ch.reply(1);
      expect(refused).toMatchObject({ kind: FrameKind.RESPONSE, method: batchPutStart.index });
      expect(statusOf(batchPutStart, refused.payload)).toBe(ErrorCode.INVALID_PARAMS);
      const pong = await ch.reply(2);
      expect(pong.kind).toBe(FrameKind.RESPONSE);
      expect(statusOf(ping, pong.payload)).toBe(ErrorCode.OK);
      expect(m.stderr()).toMatch(/BatchPutStart over channel: malformed request: field 1 holds more than 65536 elements/);
    } finally {
      ch.close();
    }
  });

  it('refuses 200,000 empty sub-requests over gRPC with INVALID_PARAMS', async () => {
    const raw = new grpc.Client(m.rpc, grpc.credentials.createInsecure(), grpcAuthOptions());
    try {
      const call = (method: string, payload: Buffer) =>
        new Promise<Buffer>((resolve, reject) =>
          raw.makeUnaryRequest(
            `/store.MasterService/${method}`,
            (b: Buffer) => b,
            (b: Buffer) => b,
            payload,
            (e, r) => (e ? reject(e) : resolve(r as Buffer)),
          ),
        );
      expect(statusOf(batchPutStart, await call('BatchPutStart', emptySubRequests(200_000)))).toBe(ErrorCode.INVALID_PARAMS);
      expect(m.stderr()).toMatch(/BatchPutStart over grpc: malformed request: field 1 holds more than 65536 elements/);
      // a request over the 16 MB receive limit fails that call; the server goes on
      await expect(call('BatchPutStart', Buffer.alloc(MAX_REQUEST_PAYLOAD_BYTES + 1024))).rejects.toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
      expect(statusOf(ping, await call('Ping', pingRequest))).toBe(ErrorCode.OK);
    } finally {
      raw.close();
    }
  });

  it('closes a channel connection that sends a 20 MB request frame, and serves a new one', async () => {
    const ch = RawChannel.of(m.rpc);
    const len = 20 * 1024 * 1024;
    const header = encodeFrame(FrameKind.REQUEST, 1, batchPutStart.index, Buffer.alloc(0));
    header.writeUInt32LE(len, 0);
    ch.send(header);
    ch.send(Buffer.alloc(64 * 1024)); // the start of the payload; the master stops before the rest
    const pending = ch.reply(1);
    await ch.closed;
    await expect(pending).rejects.toThrow(/closed before the reply/);
    expect(m.stderr()).toMatch(/frame payload of 20971520 bytes exceeds the 16777216-byte limit; closing/);

    const again = RawChannel.of(m.rpc);
    try {
      again.send(encodeFrame(FrameKind.REQUEST, 7, ping.index, pingRequest));
      expect(statusOf(ping, (await again.reply(7)).payload)).toBe(ErrorCode.OK);
    } finally {
      again.close();
    }
  });

  it('MasterClient sends a batch longer than the master takes as several calls, results in order', async () => {
    const c = await MasterClient.connect(m.rpc);
    try {
      const client_id = '00000000-0000-4000-8000-0000000000c1';
      expect((await c.mountSegment({ buffer: 2 ** 40, size: 2 ** 36, segment_name: 'limits-seg', client_id, te_endpoint: '127.0.0.1:1', protocol: 'tcp' })).status_code).toBe(
        ErrorCode.OK,
      );
      const n = 70_000; // more than MAX_REQUEST_ELEMENTS (65,536), more than 4 x BATCH_CHUNK
      const keys = Array.from({ length: n }, (_, i) => `many-${i}`);
      // the last key repeats the first, 4 chunks later: it still meets the first one's put
      const requests = [...keys, 'many-0'].map((key) => ({ key, value_length: 64, slice_lengths: [64], config: { replica_num: 1 } }));
      const started = await c.batchPutStart({ requests });
      expect(started.status_code).toBe(ErrorCode.OK);
      expect(started.results).toHaveLength(n + 1);
      expect(started.results.slice(0, n).every((r) => r.status_code === ErrorCode.OK)).toBe(true);
      expect(started.results[n].status_code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS);
      expect(n).toBeGreaterThan(4 * BATCH_CHUNK);
      const ended = await c.batchPutEnd({ keys, replica_type: 0 });
      expect(ended.results.map((r) => r.key)).toEqual(keys);
      const exist = await c.batchExistKey({ keys: [...keys.slice(0, 3), 'absent', ...keys.slice(3)] });
      expect(exist.results).toHaveLength(n + 1);
      expect(exist.results.filter((r) => !r.exists).length).toBe(1);
      expect(exist.results[3].exists).toBe(false);
    } finally {
      c.close();
    }
  });
});

describe('ChannelConnection reply limit', () => {
  // A small core answering BatchExistKey with one result per key: the reply grows with the keys.
  const core = {
    batchExistKey: (req: { keys: string[] }) => ({ status_code: ErrorCode.OK, results: req.keys.map(() => ({ status_code: ErrorCode.OK, exists: true, lease_ttl_ms: 5000 })) }),
    ping: () => ({ status_code: ErrorCode.OK, view_version: 1, need_remount: false }),
  };
  const exist = masterMethodByName.get('BatchExistKey')!;
  const LIMIT = 4096;
  let server: Server;
  let address: string;
  const logged: string[] = [];

  beforeAll(async () => {
    const log = new Logger({ program: 'limits-test', stderr: (line) => logged.push(line) });
    const dispatcher = new RpcDispatcher(
      core,
      masterMethods,
      () => performance.now(),
      new MasterMetrics(masterMethods, () => {
        throw new Error('no stats in this test');
      }),
      log,
    );
    server = createServer((socket) => {
      // the listener's job: strip the magic, hand the rest to the connection
      let head = Buffer.alloc(0);
      const sniff = (d: Buffer): void => {
        head = Buffer.concat([head, d]);
        if (head.length < CHANNEL_MAGIC.length) return;
        socket.removeListener('data', sniff);
        const conn = new ChannelConnection(socket, masterMethods, dispatcher, log, LIMIT);
        if (head.length > CHANNEL_MAGIC.length) conn.onData(head.subarray(CHANNEL_MAGIC.length));
      };
      socket.on('data', sniff);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const a = server.address() as { port: number };
    address = `127.0.0.1:${a.port}`;
  });

  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  it('answers a reply over the limit with an ERROR frame for that call only, and serves the next calls', async () => {
    const keys = (n: number) => encodeWith(exist.requestCodec, { keys: Array.from({ length: n }, (_, i) => `key-${i}`) });
    const ch = RawChannel.of(address, null);
    try {
      ch.send(encodeFrame(FrameKind.REQUEST, 1, exist.index, keys(10)));
      ch.send(encodeFrame(FrameKind.REQUEST, 2, exist.index, keys(2000))); // ~18 KB of results
      ch.send(encodeFrame(FrameKind.REQUEST, 3, ping.index, Buffer.alloc(0)));
      const small = await ch.reply(1);
      expect(small.kind).toBe(FrameKind.RESPONSE);
      expect(decodeMessage<{ results: unknown[] }>(exist.responseType, small.payload).results).toHaveLength(10);
      const big = await ch.reply(2);
      expect(big.kind).toBe(FrameKind.ERROR);
      expect(big.payload.toString()).toMatch(new RegExp(`^reply of \\d+ bytes exceeds the ${LIMIT}-byte frame limit; ask for fewer keys$`));
      const pong = await ch.reply(3);
      expect(pong.kind).toBe(FrameKind.RESPONSE);
      expect(statusOf(ping, pong.payload)).toBe(ErrorCode.OK);
      // the same connection goes on serving replies under the limit
      ch.send(encodeFrame(FrameKind.REQUEST, 4, exist.index, keys(100)));
      expect((await ch.reply(4)).kind).toBe(FrameKind.RESPONSE);
      expect(ch.destroyed).toBe(false);
      expect(logged.join('')).toMatch(/BatchExistKey over channel: reply of \d+ bytes exceeds/);
    } finally {
      ch.close();
    }
  });

  it('sends no stray bytes: the frames after a dropped reply decode cleanly', async () => {
    const ch = RawChannel.of(address, null);
    try {
      const keys = encodeWith(exist.requestCodec, { keys: Array.from({ length: 5000 }, (_, i) => `k${i}`) });
      for (let id = 1; id <= 20; id++) ch.send(encodeFrame(FrameKind.REQUEST, id, id % 2 ? exist.index : ping.index, id % 2 ? keys : Buffer.alloc(0)));
      for (let id = 1; id <= 20; id++) {
        const r = await ch.reply(id);
        expect(r.kind).toBe(id % 2 ? FrameKind.ERROR : FrameKind.RESPONSE);
        if (r.kind === FrameKind.RESPONSE) expect(r.payload.length).toBeLessThan(HEADER_BYTES + LIMIT);
      }
    } finally {
      ch.close();
    }
  });
});
