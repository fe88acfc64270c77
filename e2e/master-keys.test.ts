// Key hygiene against a real master (issue 10, defect 6): keys and segment names outside the
// alphabet (common/key-rules.ts) are refused, bytes that are not UTF-8 are refused on the wire
// (fast channel and gRPC) instead of becoming U+FFFD, and the HTTP formats read every valid key
// back unambiguously: one line per key, commas through repeated key= parameters. Run
// `npm run build` first.
import * as grpc from '@grpc/grpc-js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import { FrameKind, encodeFrame } from '../common/channel-frame.js';
import { ErrorCode } from '../common/error-code.js';
import { decodeMessage, masterMethodByName } from '../common/master-proto.js';
import { MasterClient } from '../client/master-client.js';
import { startMaster, type MasterProcess } from './master-process.js';
import { RawChannel } from './raw-channel.js';

const CLIENT = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const putStart = masterMethodByName.get('PutStart')!;
const statusOf = (payload: Uint8Array): number => decodeMessage<{ status_code: number }>(putStart.responseType, payload).status_code;

/** A PutStartRequest whose key is `key` as raw bytes (which need not be UTF-8), 64 bytes, 1 replica. */
function putStartBytes(key: Buffer): Buffer {
  const sliceLengths = Buffer.from([0x22, 0x01, 0x40]); // field 4 (packed): [64]
  return Buffer.concat([Buffer.from([0x0a, key.length]), key, Buffer.from([0x10, 0x40]), sliceLengths]);
}

const text = async (url: string): Promise<string> => (await fetch(url)).text();

describe('store_master key hygiene', () => {
  let m: MasterProcess;
  let c: MasterClient;

  beforeAll(async () => {
    m = await startMaster();
    c = await MasterClient.connect(m.rpc);
    expect((await c.mountSegment({ buffer: 2 ** 40, size: 2 ** 30, segment_name: 'seg-1', client_id: CLIENT, te_endpoint: '127.0.0.1:1', protocol: 'tcp' })).status_code).toBe(
      ErrorCode.OK,
    );
  });

  afterAll(async () => {
    c.close();
    await m.stop();
  });

  const put = async (key: string): Promise<number> => {
    const s = await c.putStart({ key, value_length: 64, slice_lengths: [64], config: { replica_num: 1 } });
    if (s.status_code !== ErrorCode.OK) return s.status_code;
    return (await c.putEnd({ key, replica_type: 0 })).status_code;
  };

  it('refuses keys with control characters and names with a newline; /get_all_keys and /get_all_segments list one item per line', async () => {
    for (const key of ['two\nkeys', 'cr\r', 'tab\t', 'nul\0', 'del\u007f', 'nel\u0085']) expect(await put(key)).toBe(ErrorCode.INVALID_KEY);
    expect((await c.mountSegment({ buffer: 2 ** 41, size: 2 ** 20, segment_name: 'seg\nfake', client_id: CLIENT, te_endpoint: '127.0.0.1:2', protocol: 'tcp' })).status_code).toBe(
      ErrorCode.INVALID_PARAMS,
    );
    const valid = ['plain', 'with space', 'a,b', 'x=1&y=2', 'path/to/k', 'ключ', '键', '🙂'];
    for (const key of valid) expect(await put(key)).toBe(ErrorCode.OK);
    expect(
      (await text(`${m.http}/get_all_keys`))
        .split('\n')
        .filter((l) => l)
        .sort(),
    ).toEqual([...valid].sort());
    expect(await text(`${m.http}/get_all_segments`)).toBe('seg-1\n');
  });

  it('/batch_query_keys takes keys=a,b (split on commas) and repeated key= parameters (each one whole key)', async () => {
    const spec = JSON.parse(await text(`${m.http}/batch_query_keys?keys=plain,a,b`));
    expect(Object.keys(spec.data).sort()).toEqual(['a', 'b', 'plain']);
    expect(spec.data.plain.ok).toBe(true);
    expect(spec.data.a).toEqual({ ok: false, error: 'OBJECT_NOT_FOUND: key not found' });
    const q = ['a,b', 'with space', 'ключ', 'x=1&y=2'].map((k) => `key=${encodeURIComponent(k)}`).join('&');
    const repeated = JSON.parse(await text(`${m.http}/batch_query_keys?${q}`));
    expect(repeated.success).toBe(true);
    expect(Object.keys(repeated.data).sort()).toEqual(['a,b', 'with space', 'x=1&y=2', 'ключ'].sort());
    for (const v of Object.values<{ ok: boolean; values: unknown[] }>(repeated.data)) {
      expect(v.ok).toBe(true);
      expect(v.values).toHaveLength(1);
    }
    const missing = await fetch(`${m.http}/batch_query_keys`);
    expect(missing.status).toBe(400);
    expect(await missing.text()).toMatch(/keys=a,b or \?key=a&key=b/);
  });

  it('refuses key bytes that are not UTF-8 over the fast channel with INVALID_KEY; a real U+FFFD key is another key', async () => {
    const ch = RawChannel.of(m.rpc);
    try {
      const bad = [
        Buffer.from('alias\xff', 'latin1'),
        Buffer.from('alias\xfe', 'latin1'),
        Buffer.from([0x61, 0x6c, 0x69, 0x61, 0x73, 0xed, 0xa0, 0x80]),
        Buffer.from([0x61, 0xc0, 0xaf]),
      ];
      for (let i = 0; i < bad.length; i++) {
        ch.send(encodeFrame(FrameKind.REQUEST, i + 1, putStart.index, putStartBytes(bad[i])));
        const r = await ch.reply(i + 1);
        expect(r.kind).toBe(FrameKind.RESPONSE);
        expect(statusOf(r.payload)).toBe(ErrorCode.INVALID_KEY);
      }
    } finally {
      ch.close();
    }
    expect(await put('alias\ufffd')).toBe(ErrorCode.OK);
    expect((await c.getReplicaList({ key: 'alias\ufffd' })).status_code).toBe(ErrorCode.OK);
    expect(await text(`${m.http}/get_all_keys`)).not.toMatch(/alias[^\ufffd\n]/);
  });

  it('refuses key bytes that are not UTF-8 over gRPC with INVALID_KEY', async () => {
    const raw = new grpc.Client(m.rpc, grpc.credentials.createInsecure(), grpcAuthOptions());
    try {
      const call = (payload: Buffer) =>
        new Promise<Buffer>((resolve, reject) =>
          raw.makeUnaryRequest(
            '/store.MasterService/PutStart',
            (b: Buffer) => b,
            (b: Buffer) => b,
            payload,
            (e, r) => (e ? reject(e) : resolve(r as Buffer)),
          ),
        );
      expect(statusOf(await call(putStartBytes(Buffer.from('grpc\xff', 'latin1'))))).toBe(ErrorCode.INVALID_KEY);
      expect(statusOf(await call(putStartBytes(Buffer.from([0x67, 0xed, 0xbf, 0xbf]))))).toBe(ErrorCode.INVALID_KEY);
      expect(statusOf(await call(putStartBytes(Buffer.from('grpc-ok'))))).toBe(ErrorCode.OK);
    } finally {
      raw.close();
    }
  });

  it('never sends a key with an unpaired surrogate: alias\\ud800 and alias\\udfff cannot become one key', async () => {
    await expect(c.putStart({ key: 'alias\ud800', value_length: 64, slice_lengths: [64], config: { replica_num: 1 } })).rejects.toThrow(/unpaired UTF-16 surrogate/);
    await expect(c.getReplicaList({ key: 'alias\udfff' })).rejects.toBeInstanceOf(TypeError);
    expect((await c.ping({ client_id: CLIENT })).status_code).toBe(ErrorCode.OK);
  });
});
