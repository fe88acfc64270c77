import { FrameDecoder, FrameError, FrameKind, FrameWriter, HEADER_BYTES, encodeFrame } from './channel-frame.js';

interface Seen {
  kind: number;
  id: number;
  method: number;
  payload: string;
}

function collector(): { seen: Seen[]; decoder: FrameDecoder } {
  const seen: Seen[] = [];
  const decoder = new FrameDecoder((kind, id, method, payload) => seen.push({ kind, id, method, payload: Buffer.from(payload).toString('hex') }), 1024);
  return { seen, decoder };
}

const frames = [
  encodeFrame(FrameKind.REQUEST, 1, 5, Buffer.from('hello')),
  encodeFrame(FrameKind.RESPONSE, 0xffffffff, 65535, Buffer.alloc(0)),
  encodeFrame(FrameKind.ERROR, 42, 3, Buffer.from('unknown method')),
  encodeFrame(FrameKind.REQUEST, 7, 0, Buffer.alloc(300, 0xab)),
];
const expected = [
  { kind: 0, id: 1, method: 5, payload: Buffer.from('hello').toString('hex') },
  { kind: 1, id: 0xffffffff, method: 65535, payload: '' },
  { kind: 2, id: 42, method: 3, payload: Buffer.from('unknown method').toString('hex') },
  { kind: 0, id: 7, method: 0, payload: Buffer.alloc(300, 0xab).toString('hex') },
];
const stream = Buffer.concat(frames);

describe('encodeFrame', () => {
  it('writes the documented little-endian header', () => {
    const f = encodeFrame(FrameKind.RESPONSE, 0x01020304, 0x0506, Buffer.from([9, 8]));
    expect([...f]).toEqual([2, 0, 0, 0, 4, 3, 2, 1, 6, 5, 1, 0, 9, 8]);
    expect(f.length).toBe(HEADER_BYTES + 2);
  });
});

describe('FrameDecoder', () => {
  it('decodes frames fed one byte at a time', () => {
    const { seen, decoder } = collector();
    for (let i = 0; i < stream.length; i++) {
      decoder.push(stream.subarray(i, i + 1));
      // a frame is delivered exactly when its last byte arrives
      let end = 0;
      const complete = frames.filter((f) => (end += f.length) <= i + 1).length;
      expect(seen.length).toBe(complete);
    }
    expect(seen).toEqual(expected);
    expect(decoder.buffered).toBe(0);
  });

  it('decodes every split of the stream into two chunks', () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const { seen, decoder } = collector();
      decoder.push(stream.subarray(0, cut));
      decoder.push(stream.subarray(cut));
      expect(seen).toEqual(expected);
    }
  });

  it('decodes the whole stream in one chunk', () => {
    const { seen, decoder } = collector();
    decoder.push(stream);
    expect(seen).toEqual(expected);
  });

  it('refuses an oversize frame as soon as its length is known', () => {
    const { decoder } = collector();
    const big = encodeFrame(FrameKind.REQUEST, 1, 1, Buffer.alloc(2000));
    expect(() => decoder.push(big.subarray(0, 4))).toThrow(FrameError);
    const d2 = collector().decoder;
    d2.push(big.subarray(0, 2));
    expect(() => d2.push(big.subarray(2, 6))).toThrow(/exceeds/);
  });
});

describe('FrameWriter', () => {
  it('sends every frame queued in one tick as one write', async () => {
    const writes: Buffer[] = [];
    const w = new FrameWriter((d) => writes.push(d));
    for (const f of frames) w.push(f);
    expect(writes).toHaveLength(0);
    await new Promise((r) => process.nextTick(r));
    expect(writes).toHaveLength(1);
    expect(writes[0].equals(stream)).toBe(true);
    w.push(frames[0]);
    await new Promise((r) => process.nextTick(r));
    expect(writes).toHaveLength(2);
  });
});
