import { Duplex } from 'node:stream';
import { FakeClock } from '../common/clock.js';
import { CHANNEL_MAGIC, FrameDecoder, FrameKind, encodeFrame } from '../common/channel-frame.js';
import { decodeMessage, encodeMessage, masterMethodByName } from '../common/master-proto.js';
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import { MasterChannel, PendingCall } from './master-channel.js';
import { MasterClientClosedError, MasterConnectionError, MasterProtocolError, MasterTimeoutError } from './master-channel-errors.js';

/** Two connected in-memory streams: what one writes, the other reads. */
function duplexPair(): [Duplex, Duplex] {
  let b: Duplex | undefined;
  const make = (peer: () => Duplex): Duplex =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        peer().push(chunk);
        cb();
      },
      final(cb) {
        peer().push(null);
        cb();
      },
    });
  const a = make(() => b as Duplex);
  b = make(() => a);
  return [a, b];
}

interface Req {
  id: number;
  method: number;
  body: Record<string, unknown>;
}

/** The master end, driven by the test: records requests, answers on demand. */
function fakeMaster(side: Duplex): { requests: Req[]; magic: () => Buffer; reply: (r: Req, res: object) => void; error: (r: Req, why: string) => void; next: () => Promise<Req> } {
  const requests: Req[] = [];
  let head = Buffer.alloc(0);
  let waiter: (() => void) | undefined;
  const decoder = new FrameDecoder((kind, id, method, payload) => {
    const m = [...masterMethodByName.values()][method];
    requests.push({ id, method, body: decodeMessage(m.requestType, payload) });
    const w = waiter;
    waiter = undefined;
    w?.();
  });
  side.on('data', (chunk: Buffer) => {
    if (head.length < 4) {
      head = Buffer.concat([head, chunk]);
      if (head.length >= 4) decoder.push(head.subarray(4));
      return;
    }
    decoder.push(chunk);
  });
  let served = 0;
  return {
    requests,
    magic: () => head.subarray(0, 4),
    reply: (r, res) => {
      const m = [...masterMethodByName.values()][r.method];
      side.write(encodeFrame(FrameKind.RESPONSE, r.id, r.method, encodeMessage(m.responseType, res)));
    },
    error: (r, why) => side.write(encodeFrame(FrameKind.ERROR, r.id, r.method, Buffer.from(why))),
    next: () =>
      new Promise((resolve) => {
        const take = (): void => {
          if (requests.length > served) resolve(requests[served++]);
          else waiter = take;
        };
        take();
      }),
  };
}

const GRL = masterMethodByName.get('GetReplicaList')!;
const PS = masterMethodByName.get('PutStart')!;

describe('MasterChannel', () => {
  it('sends the magic, then requests; decodes replies into the __Output shape', async () => {
    const [c, s] = duplexPair();
    const master = fakeMaster(s);
    const ch = new MasterChannel(c, 'mem:1');
    const p = ch.call<GetReplicaListResponse__Output>(GRL, { key: 'k1' });
    const req = await master.next();
    expect(master.magic().equals(CHANNEL_MAGIC)).toBe(true);
    expect(req.body).toEqual({ key: 'k1' });
    master.reply(req, { status_code: 0, replica_list: [{ handles: [{ segment_name: 's', size: 10, buffer: 2 ** 40, te_endpoint: 'h:1' }], status: 3 }], lease_ttl_ms: 5000 });
    const res = await p;
    expect(res).toEqual({
      status_code: 0,
      lease_ttl_ms: 5000,
      replica_list: [
        {
          status: 3,
          replica_type: 0,
          file: null,
          handles: [{ segment_name: 's', size: 10, buffer: 2 ** 40, status: 0, te_endpoint: 'h:1', memory_type: 0, incarnation: 0, generation: 0 }],
        },
      ],
      slice_checksums: [],
      version: 0,
    });
  });

  it('matches out-of-order replies to many calls in flight by id', async () => {
    const [c, s] = duplexPair();
    const master = fakeMaster(s);
    const ch = new MasterChannel(c, 'mem:1');
    const calls = Array.from({ length: 64 }, (_, i) => ch.call<{ status_code: number }>(PS, { key: `k${i}`, value_length: i, slice_lengths: [i] }));
    expect(ch.inFlight).toBe(64);
    const reqs: Req[] = [];
    for (let i = 0; i < 64; i++) reqs.push(await master.next());
    for (const r of reqs.reverse()) master.reply(r, { status_code: -Number(r.body.value_length) });
    const res = await Promise.all(calls);
    expect(res.map((r) => r.status_code)).toEqual(Array.from({ length: 64 }, (_, i) => (i === 0 ? 0 : -i)));
    expect(ch.inFlight).toBe(0);
  });

  it('rejects a call the master refused with MasterProtocolError', async () => {
    const [c, s] = duplexPair();
    const master = fakeMaster(s);
    const ch = new MasterChannel(c, 'mem:1');
    const p = ch.call(GRL, { key: 'x' });
    master.error(await master.next(), 'unknown method 99');
    await expect(p).rejects.toThrow(MasterProtocolError);
    await expect(p).rejects.toThrow(/unknown method 99/);
  });

  it('rejects every pending call with MasterConnectionError when the connection drops, and later calls too', async () => {
    const [c, s] = duplexPair();
    const master = fakeMaster(s);
    const ch = new MasterChannel(c, 'mem:1');
    const calls = [ch.call(GRL, { key: 'a' }), ch.call(GRL, { key: 'b' })];
    await master.next();
    c.destroy();
    for (const p of calls) await expect(p).rejects.toBeInstanceOf(MasterConnectionError);
    expect(ch.closed).toBe(true);
    await expect(ch.call(GRL, { key: 'c' })).rejects.toBeInstanceOf(MasterConnectionError);
  });

  it('rejects with MasterTimeoutError when no reply comes, and ignores the late reply', async () => {
    const [c, s] = duplexPair();
    const master = fakeMaster(s);
    const clock = new FakeClock();
    const ch = new MasterChannel(c, 'mem:1', { requestTimeoutMs: 20_000, clock });
    const p = ch.call(GRL, { key: 'slow' });
    let failed = false;
    void p.catch(() => (failed = true));
    const req = await master.next();
    await clock.advance(19_999);
    expect(failed).toBe(false);
    await clock.advance(1000); // the deadline check runs every timeout/4, at most every second
    await expect(p).rejects.toBeInstanceOf(MasterTimeoutError);
    master.reply(req, { status_code: 0 });
    const q = ch.call<{ status_code: number }>(GRL, { key: 'after' });
    master.reply(await master.next(), { status_code: -200 });
    expect((await q).status_code).toBe(-200);
    ch.close();
  });

  it('close() fails pending calls with MasterClientClosedError', async () => {
    const [c, s] = duplexPair();
    fakeMaster(s);
    const ch = new MasterChannel(c, 'mem:1');
    const p = ch.call(GRL, { key: 'a' });
    ch.close();
    await expect(p).rejects.toBeInstanceOf(MasterClientClosedError);
  });

  it('rejects a request that cannot be encoded without sending anything', async () => {
    const [c, s] = duplexPair();
    const master = fakeMaster(s);
    const ch = new MasterChannel(c, 'mem:1');
    await expect(ch.call(PS, { key: 'a', value_length: 'lots' })).rejects.toThrow(/PutStart: cannot encode/);
    expect(master.requests).toHaveLength(0);
  });
});

describe('PendingCall', () => {
  const method = masterMethodByName.get('GetReplicaList')!;
  it('delivers the first outcome only, and then holds no link to the caller', () => {
    const got: unknown[] = [];
    const p = new PendingCall(
      method,
      0,
      (v) => got.push(['ok', v]),
      (e) => got.push(['err', e.message]),
    );
    expect(p.settled).toBe(false);
    p.resolve({ status_code: 0 });
    p.reject(new Error('late'));
    p.resolve({ status_code: 1 });
    expect(got).toEqual([['ok', { status_code: 0 }]]);
    expect(p.settled).toBe(true);
    // a settled call kept in old space must not keep its promise (and the reply) reachable
    expect(Object.values(p).filter((x) => typeof x === 'function')).toEqual([]);
  });
  it('a rejection is final too', () => {
    const got: unknown[] = [];
    const p = new PendingCall(
      method,
      0,
      (v) => got.push(['ok', v]),
      (e) => got.push(['err', e.message]),
    );
    p.reject(new Error('timed out'));
    p.resolve({ status_code: 0 });
    expect(got).toEqual([['err', 'timed out']]);
    expect(Object.values(p).filter((x) => typeof x === 'function')).toEqual([]);
  });
});
