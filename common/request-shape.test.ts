import { encodeWith, masterMethodByName } from './master-proto.js';
import { MAX_REQUEST_ELEMENTS, packedFieldsOf, requestShapeProblem } from './request-shape.js';

const batchPutStart = masterMethodByName.get('BatchPutStart')!.requestCodec;
const putStart = masterMethodByName.get('PutStart')!.requestCodec;
const batchExist = masterMethodByName.get('BatchExistKey')!.requestCodec;

/** `n` empty sub-requests of field 1: the bytes 0a 00 repeated. */
const emptyRepeats = (n: number): Buffer => Buffer.alloc(2 * n).fill(Buffer.from([0x0a, 0x00]));

describe('requestShapeProblem', () => {
  it('passes a real request at the cap and refuses one element more', () => {
    const keys = (n: number) => encodeWith(batchExist, { keys: Array.from({ length: n }, (_, i) => `k${i}`) });
    expect(requestShapeProblem(keys(1000), 1000)).toBeUndefined();
    expect(requestShapeProblem(keys(1001), 1000)).toMatch(/^field 1 holds more than 1000 elements/);
  });

  it('refuses 200,000 empty sub-requests under the default cap', () => {
    expect(requestShapeProblem(emptyRepeats(200_000), MAX_REQUEST_ELEMENTS)).toMatch(/field 1 holds more than 65536 elements/);
    expect(requestShapeProblem(emptyRepeats(MAX_REQUEST_ELEMENTS), MAX_REQUEST_ELEMENTS)).toBeUndefined();
  });

  it('counts every field number separately and adds up a field split across the message', () => {
    const a = Buffer.alloc(2 * 600).fill(Buffer.from([0x0a, 0x00])); // field 1
    const b = Buffer.alloc(2 * 600).fill(Buffer.from([0x12, 0x00])); // field 2
    expect(requestShapeProblem(Buffer.concat([a, b]), 1000)).toBeUndefined();
    expect(requestShapeProblem(Buffer.concat([a, b, a]), 1000)).toMatch(/^field 1 /);
  });

  it('counts scalar occurrences of every wire type', () => {
    const varints = Buffer.alloc(3 * 400).fill(Buffer.from([0x08, 0x96, 0x01])); // field 1 varint 150
    const fixed64 = Buffer.concat(Array.from({ length: 400 }, () => Buffer.from([0x11, 1, 2, 3, 4, 5, 6, 7, 8]))); // field 2
    const fixed32 = Buffer.concat(Array.from({ length: 400 }, () => Buffer.from([0x1d, 1, 2, 3, 4]))); // field 3
    expect(requestShapeProblem(Buffer.concat([varints, fixed64, fixed32]), 400)).toBeUndefined();
    expect(requestShapeProblem(Buffer.concat([varints, fixed64, fixed32, Buffer.from([0x1d, 1, 2, 3, 4])]), 400)).toMatch(/^field 3 /);
  });

  it('counts the values of a packed scalar field the schema declares, not its bytes', () => {
    const packed = packedFieldsOf(putStart);
    expect(packed.get(4)).toBe('varint'); // slice_lengths
    expect(packed.has(1)).toBe(false); // key is a string
    const lengths = (n: number, v: number) => encodeWith(putStart, { key: 'k', value_length: 1, slice_lengths: Array.from({ length: n }, () => v) });
    // 1500 three-byte varints: 4500 bytes but 1500 elements
    expect(requestShapeProblem(lengths(1500, 100_000), 2000, packed)).toBeUndefined();
    expect(requestShapeProblem(lengths(2001, 1), 2000, packed)).toMatch(/^field 4 holds more than 2000 elements/);
    // 64M packed slice lengths, as in the audit, scaled down: refused before decoding
    expect(requestShapeProblem(lengths(100_000, 0), MAX_REQUEST_ELEMENTS, packed)).toMatch(/^field 4 /);
  });

  it('treats a length-delimited field that is not a packed scalar as one element', () => {
    // one 5000-byte key string: one element, whatever its bytes look like
    const oneKey = encodeWith(batchExist, { keys: ['x'.repeat(5000)] });
    expect(requestShapeProblem(oneKey, 100, packedFieldsOf(batchExist))).toBeUndefined();
    const oneSub = encodeWith(batchPutStart, { requests: [{ key: 'k', value_length: 1, slice_lengths: Array.from({ length: 3000 }, () => 1) }] });
    expect(requestShapeProblem(oneSub, 100, packedFieldsOf(batchPutStart))).toBeUndefined();
  });

  it('sizes packed fixed-width fields by their width', () => {
    const packed = new Map([
      [1, 'fixed64' as const],
      [2, 'fixed32' as const],
    ]);
    const field = (tag: number, len: number) => Buffer.concat([Buffer.from([tag, (len & 0x7f) | 0x80, len >> 7]), Buffer.alloc(len)]);
    expect(requestShapeProblem(field(0x0a, 8 * 200), 200, packed)).toBeUndefined();
    expect(requestShapeProblem(field(0x0a, 8 * 201), 200, packed)).toMatch(/^field 1 /);
    expect(requestShapeProblem(field(0x12, 4 * 201), 200, packed)).toMatch(/^field 2 /);
  });

  it('skips the walk for payloads too small to exceed the cap', () => {
    // 1000 bytes can hold at most 1000 elements; malformed or not, it is left to the decoder
    expect(requestShapeProblem(emptyRepeats(500), 1000)).toBeUndefined();
    expect(requestShapeProblem(emptyRepeats(500), 999)).toBeUndefined(); // 500 fields, 1000 bytes: walked, fine
    expect(requestShapeProblem(emptyRepeats(500), 499)).toMatch(/^field 1 /);
  });

  it('leaves malformed wire to the decoder', () => {
    const truncatedLen = Buffer.concat([emptyRepeats(100), Buffer.from([0x0a, 0xff, 0xff, 0x03])]); // length past the end
    expect(requestShapeProblem(truncatedLen, 150)).toBeUndefined();
    const group = Buffer.concat([Buffer.from([0x0b]), emptyRepeats(100)]); // wire type 3
    expect(requestShapeProblem(group, 150)).toBeUndefined();
    const longVarint = Buffer.concat([Buffer.from([0x08]), Buffer.alloc(11, 0xff), emptyRepeats(100)]);
    expect(requestShapeProblem(longVarint, 150)).toBeUndefined();
    const cutFixed = Buffer.concat([emptyRepeats(20), Buffer.from([0x11, 1, 2])]);
    expect(requestShapeProblem(cutFixed, 30)).toBeUndefined();
    // but elements counted before the damage already refuse it
    expect(requestShapeProblem(Buffer.concat([emptyRepeats(100), Buffer.from([0x0b])]), 10)).toMatch(/^field 1 /);
  });

  it('bounds the number of distinct field numbers', () => {
    // 300 different unknown fields, each once (two-byte keys + one-byte varint)
    const many = Buffer.concat(Array.from({ length: 300 }, (_, i) => Buffer.from([(((i + 16) * 8) & 0x7f) | 0x80, ((i + 16) * 8) >> 7, 0])));
    expect(requestShapeProblem(many, 299)).toMatch(/distinct fields/);
    expect(requestShapeProblem(many, 300)).toBeUndefined();
  });
});
