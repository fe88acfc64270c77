import { RequestBudget } from './request-budget.js';
import { Http2RequestMeter } from './http2-request-meter.js';

describe('RequestBudget', () => {
  it('closes the largest holders first (ties: the longest waiting) until the total is within the budget', () => {
    const b = new RequestBudget<string>({ maxBytes: 100, timeoutMs: 0 });
    expect(b.set('a', 40, 1)).toEqual([]);
    expect(b.set('b', 30, 2)).toEqual([]);
    expect(b.set('c', 30, 3)).toEqual([]);
    expect(b.bytes).toBe(100);
    // d pushes the total to 150: a (40) goes, then b or c (30 each): b has waited longer
    expect(b.set('d', 50, 4)).toEqual(['d']);
    expect(b.set('d', 20, 4)).toEqual(['a']);
    expect(b.bytes).toBe(80);
    expect(b.set('e', 35, 5)).toEqual(['e']);
    expect(b.set('c', 31, 3)).toEqual([]);
    expect(b.set('e', 30, 5)).toEqual(['c']);
    expect(b.bytes).toBe(80);
  });

  it('forgets a connection that holds nothing, or is closed', () => {
    const b = new RequestBudget<string>({ maxBytes: 100, timeoutMs: 1000 });
    b.set('a', 60, 1);
    b.set('a', 0, -1);
    expect(b.bytes).toBe(0);
    b.set('b', 70, 1);
    b.forget('b');
    expect(b.set('c', 100, 1)).toEqual([]);
    expect(b.expired(5000)).toEqual(['c']);
    expect(b.bytes).toBe(0);
  });

  it('reports connections whose oldest incomplete request is older than the timeout, even with 0 bytes', () => {
    const b = new RequestBudget<string>({ maxBytes: 1 << 30, timeoutMs: 30_000 });
    b.set('half-sent', 16 << 20, 1000);
    b.set('headers-only', 0, 2000);
    b.set('fresh', 10, 25_000);
    expect(b.expired(31_001)).toEqual(['half-sent']);
    expect(b.expired(32_001)).toEqual(['headers-only']);
    expect(b.expired(1e9)).toEqual(['fresh']);
    expect(new RequestBudget<string>({ maxBytes: 1, timeoutMs: 0 }).expired(1e12)).toEqual([]);
  });
});

/** An HTTP/2 frame: 9-byte header and `payload` (or `length` zero bytes). */
function frame(type: number, flags: number, stream: number, length: number): Buffer {
  const b = Buffer.alloc(9 + length);
  b.writeUIntBE(length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(stream, 5);
  return b;
}
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const [DATA, HEADERS, RST, SETTINGS] = [0, 1, 3, 4];
const END_STREAM = 1;

describe('Http2RequestMeter', () => {
  it('counts DATA of open request streams until END_STREAM, a reset or the server answering; any chunking', () => {
    const wire = Buffer.concat([
      PREFACE,
      frame(SETTINGS, 0, 0, 6),
      frame(HEADERS, 4, 1, 20),
      frame(DATA, 0, 1, 1000),
      frame(HEADERS, 4, 3, 20),
      frame(DATA, 0, 3, 500),
      frame(DATA, 0, 1, 200),
    ]);
    for (const step of [1, 7, 100, wire.length]) {
      const m = new Http2RequestMeter();
      for (let i = 0; i < wire.length; i += step) m.received(wire.subarray(i, i + step), 42);
      expect(m.bytes).toBe(1700);
      expect(m.openStreams).toBe(2);
      expect(m.oldestSince).toBe(42);
      m.received(frame(DATA, END_STREAM, 1, 10), 43);
      expect(m.bytes).toBe(500);
      m.sent(frame(HEADERS, 4 | END_STREAM, 3, 12)); // the server's trailers: the call is answered
      expect(m.bytes).toBe(0);
      expect(m.oldestSince).toBe(-1);
      m.received(frame(DATA, 0, 3, 300), 44); // late data of an answered call is not held
      expect(m.bytes).toBe(0);
      m.received(frame(HEADERS, 4, 5, 10), 45);
      m.received(frame(DATA, 0, 5, 64), 45);
      m.received(frame(RST, 0, 5, 4), 46);
      expect(m.bytes).toBe(0);
      expect(m.openStreams).toBe(0);
    }
  });
});
