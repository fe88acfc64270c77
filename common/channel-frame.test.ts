import { FrameDecoder, FrameError, FrameKind, FrameWriter, HEADER_BYTES, encodeFrame } from './channel-frame.js';
import { codecOf, encodeWith } from './master-proto.js';

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
  const tick = () => new Promise((r) => process.nextTick(r));
  const grl = codecOf('GetReplicaListRequest');
  /** Queues the four test frames, the first as a message encoded in place. */
  function pushAll(w: FrameWriter): void {
    w.pushMessage(FrameKind.REQUEST, 1, 5, grl, { key: 'k' });
    w.pushPayload(FrameKind.RESPONSE, 0xffffffff, 65535, Buffer.alloc(0));
    w.pushPayload(FrameKind.ERROR, 42, 3, Buffer.from('unknown method'));
    w.pushPayload(FrameKind.REQUEST, 7, 0, Buffer.alloc(300, 0xab));
  }
  const firstFrame = encodeFrame(FrameKind.REQUEST, 1, 5, encodeWith(grl, { key: 'k' }));

  it('sends every frame queued in one tick as one write, bytes as encodeFrame makes them', async () => {
    const writes: Buffer[] = [];
    const w = new FrameWriter((d) => writes.push(Buffer.from(d)));
    w.pushRaw(Buffer.from('KVC1'));
    pushAll(w);
    expect(w.queuedFrames).toBe(4);
    expect(writes).toHaveLength(0);
    await tick();
    expect(writes).toHaveLength(1);
    expect(writes[0].equals(Buffer.concat([Buffer.from('KVC1'), firstFrame, ...frames.slice(1)]))).toBe(true);
    expect(w.queuedFrames).toBe(0);
    expect(w.queued).toBe(0);
    w.pushPayload(FrameKind.REQUEST, 1, 5, Buffer.from('hello'));
    await tick();
    expect(writes).toHaveLength(2);
    expect(writes[1].equals(frames[0])).toBe(true);
  });

  it('queues nothing for a message that does not encode', async () => {
    const writes: Buffer[] = [];
    const w = new FrameWriter((d) => writes.push(d));
    w.pushPayload(FrameKind.REQUEST, 1, 5, Buffer.from('hello'));
    expect(() => w.pushMessage(FrameKind.REQUEST, 2, 5, grl, { key: 12 })).toThrow(TypeError);
    expect(w.queuedFrames).toBe(1);
    await tick();
    expect(writes).toHaveLength(1);
    expect(writes[0].equals(frames[0])).toBe(true);
  });

  it('never rewrites bytes it handed out, across slabs and past a slab-sized message', async () => {
    const writes: Buffer[] = [];
    const copies: Buffer[] = [];
    const w = new FrameWriter((d) => {
      writes.push(d);
      copies.push(Buffer.from(d));
    });
    const sizes = [100, 40_000, 70_000, 1, 300_000, 20_000, 5, 250_000, 33_000];
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < sizes.length; i++) if ((i + round) % 3 !== 0) w.pushPayload(FrameKind.REQUEST, round * 100 + i, i, Buffer.alloc(sizes[i], round * 16 + i));
      w.pushMessage(FrameKind.REQUEST, round, 5, grl, { key: 'x'.repeat(round * 20_000) });
      await tick();
    }
    // the views first handed out still hold what was sent
    writes.forEach((d, i) => expect(d.equals(copies[i])).toBe(true));
    const seen: Seen[] = [];
    const sig = (p: Uint8Array) => `${p.length}:${p[0] ?? ''}:${p[p.length - 1] ?? ''}`;
    const decoder = new FrameDecoder((kind, id, method, payload) => seen.push({ kind, id, method, payload: sig(payload) }), 1 << 20);
    for (const d of copies) decoder.push(d);
    expect(decoder.buffered).toBe(0);
    const want: Seen[] = [];
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < sizes.length; i++)
        if ((i + round) % 3 !== 0) want.push({ kind: 0, id: round * 100 + i, method: i, payload: sig(Buffer.alloc(sizes[i], round * 16 + i)) });
      want.push({ kind: 0, id: round, method: 5, payload: sig(encodeWith(grl, { key: 'x'.repeat(round * 20_000) })) });
    }
    expect(seen).toEqual(want);
  });

  it('drops the frame pushMessage just queued, keeping those before it, and sends the replacement', async () => {
    const writes: Buffer[] = [];
    const w = new FrameWriter((d) => writes.push(Buffer.from(d)));
    w.pushPayload(FrameKind.REQUEST, 1, 5, Buffer.from('hello'));
    // a message far bigger than a slab: the writer grows, then gives the big slab up on drop
    const big = w.pushMessage(FrameKind.RESPONSE, 9, 5, grl, { key: 'y'.repeat(1_000_000) });
    expect(big).toBe(encodeWith(grl, { key: 'y'.repeat(1_000_000) }).length);
    expect(w.queuedFrames).toBe(2);
    w.dropLast();
    expect(w.queuedFrames).toBe(1);
    expect(w.queued).toBe(frames[0].length);
    expect(() => w.dropLast()).toThrow(/no frame to drop/);
    w.pushPayload(FrameKind.ERROR, 42, 3, Buffer.from('unknown method'));
    const small = w.pushMessage(FrameKind.REQUEST, 1, 5, grl, { key: 'k' });
    expect(small).toBe(firstFrame.length - HEADER_BYTES);
    await tick();
    expect(writes).toHaveLength(1);
    expect(writes[0].equals(Buffer.concat([frames[0], frames[2], firstFrame]))).toBe(true);
  });

  it('refuses to drop a frame already flushed or followed by another push', async () => {
    const w = new FrameWriter(() => {});
    w.pushMessage(FrameKind.REQUEST, 1, 5, grl, { key: 'k' });
    w.pushPayload(FrameKind.REQUEST, 2, 5, Buffer.from('x'));
    expect(() => w.dropLast()).toThrow(/no frame to drop/);
    w.pushMessage(FrameKind.REQUEST, 3, 5, grl, { key: 'k' });
    await tick();
    expect(() => w.dropLast()).toThrow(/no frame to drop/);
    expect(() => w.pushMessage(FrameKind.REQUEST, 4, 5, grl, { key: 12 })).toThrow(TypeError);
    expect(() => w.dropLast()).toThrow(/no frame to drop/);
  });
});
