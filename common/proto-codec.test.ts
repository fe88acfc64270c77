import fc from 'fast-check';
import protobuf from 'protobufjs';
import { keyProblem } from './key-rules.js';
import { codecOf, decodeMessage, decodeWith, encodeMessage, encodeWith, masterMethods } from './master-proto.js';

/** Arbitrary plain objects for a message type, from its reflection. */
function arbitraryOf(type: protobuf.Type, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of type.fieldsArray) {
    f.resolve();
    let a: fc.Arbitrary<unknown>;
    const scalar = (t: string): fc.Arbitrary<unknown> => {
      switch (t) {
        case 'int32':
          return fc.integer();
        case 'uint32':
          return fc.integer({ min: 0, max: 0xffffffff });
        case 'uint64':
          return fc.oneof(fc.maxSafeNat(), fc.nat(300));
        case 'int64':
          return fc.oneof(fc.maxSafeInteger(), fc.integer({ min: -300, max: 300 }));
        case 'bool':
          return fc.boolean();
        case 'string':
          return fc.oneof(fc.string({ unit: 'grapheme', maxLength: 60 }), fc.string({ maxLength: 200 }));
        default:
          throw new Error(`no arbitrary for ${t}`);
      }
    };
    if (f instanceof protobuf.MapField) {
      const v = f.resolvedType instanceof protobuf.Type ? arbitraryOf(f.resolvedType, depth + 1) : scalar(f.type);
      // protobufjs decodes a "__proto__" map key into the prototype, so it is no reference for it;
      // the dedicated test below covers that key.
      a = fc.dictionary(
        fc.string({ maxLength: 20 }).filter((k) => k !== '__proto__'),
        v,
        { maxKeys: 4 },
      );
    } else {
      const one =
        f.resolvedType instanceof protobuf.Type
          ? arbitraryOf(f.resolvedType, depth + 1)
          : f.resolvedType instanceof protobuf.Enum
            ? fc.constantFrom(...Object.values(f.resolvedType.values))
            : scalar(f.type);
      a = f.repeated ? fc.array(one, { maxLength: depth === 0 ? 20 : 4 }) : f.resolvedType instanceof protobuf.Type ? fc.option(one, { nil: null }) : one;
    }
    fields[f.name] = a;
  }
  return fc.record(fields, { requiredKeys: [] });
}

const types = [
  ...new Map(
    masterMethods.flatMap(
      (m) =>
        [
          [m.requestType.name, m.requestType],
          [m.responseType.name, m.responseType],
        ] as const,
    ),
  ).values(),
];

describe('compiled proto codec', () => {
  it.each(types.map((t) => [t.name, t] as const))('%s: agrees with protobufjs both ways', (_name, type) => {
    const codec = codecOf(type.name);
    fc.assert(
      fc.property(arbitraryOf(type), (obj) => {
        const ours = encodeWith(codec, obj);
        const theirs = encodeMessage(type, obj);
        const expected = decodeMessage(type, theirs);
        expect(decodeWith(codec, theirs)).toEqual(expected);
        expect(decodeMessage(type, ours)).toEqual(expected);
        expect(decodeWith(codec, ours)).toEqual(expected);
      }),
      { numRuns: 150 },
    );
  });

  it('keeps a "__proto__" map key as an ordinary key', () => {
    const codec = codecOf('BatchQueryIpResponse');
    const obj = { status_code: 0, client_ip_map: JSON.parse('{"__proto__": {"ip_addresses": ["10.0.0.1"]}, "c": {"ip_addresses": []}}') };
    const back = decodeWith<{ client_ip_map: Record<string, unknown> }>(codec, encodeWith(codec, obj));
    expect(Object.getPrototypeOf(back.client_ip_map)).toBe(Object.prototype);
    expect(Object.keys(back.client_ip_map).sort()).toEqual(['__proto__', 'c']);
    expect(Object.getOwnPropertyDescriptor(back.client_ip_map, '__proto__')?.value).toEqual({ ip_addresses: ['10.0.0.1'] });
  });

  it('keeps negative status codes, 2^53-1 addresses and long nested bodies', () => {
    const codec = codecOf('GetReplicaListResponse');
    const long = 'x'.repeat(300);
    const res = {
      status_code: -300,
      lease_ttl_ms: Number.MAX_SAFE_INTEGER,
      replica_list: [
        {
          status: 3,
          replica_type: 1,
          file: { path: 'a%2Fb', size: 2 ** 40 },
          handles: [
            {
              segment_name: long,
              size: 1,
              buffer: Number.MAX_SAFE_INTEGER,
              status: 1,
              te_endpoint: 'é:1',
              memory_type: 1,
              incarnation: Number.MAX_SAFE_INTEGER,
              generation: 2 ** 52 + 1,
            },
          ],
        },
      ],
      slice_checksums: [0, 1, 0xffffffff],
      version: 2 ** 30 - 1,
    };
    expect(decodeWith(codec, encodeWith(codec, res))).toEqual(res);
  });

  it('fills every absent field with its default (the __Output shape)', () => {
    expect(decodeWith(codecOf('PutStartRequest'), Buffer.alloc(0))).toEqual({ key: '', value_length: 0, config: null, slice_lengths: [] });
    expect(decodeWith(codecOf('GetReplicaListByRegexResponse'), Buffer.alloc(0))).toEqual({ status_code: 0, object_map: {} });
  });

  it('refuses a wrong-typed field naming it, instead of encoding zero', () => {
    const codec = codecOf('PutStartRequest');
    expect(() => encodeWith(codec, { key: 'k', value_length: 'lots' })).toThrow(/field value_length: expected a non-negative integer/);
    expect(() => encodeWith(codec, { key: 7 })).toThrow(/field key: expected a string/);
    expect(() => encodeWith(codec, { key: 'k', slice_lengths: [1, -2] })).toThrow(/field slice_lengths\[1\]/);
    expect(() => encodeWith(codec, { key: 'k', config: { replica_num: 1.5 } })).toThrow(/field config\.replica_num/);
    expect(encodeWith(codec, { key: 'k', value_length: '4096' })).toEqual(encodeWith(codec, { key: 'k', value_length: 4096 }));
  });

  it('decodes repeated and distinct short strings exactly (shared string cache)', () => {
    const codec = codecOf('BatchExistKeyRequest');
    // many distinct keys (so cache slots collide), near-duplicates, repeats, non-ASCII and long ones
    const keys: string[] = [];
    for (let i = 0; i < 5000; i++) keys.push(`obj-${i}`, `obj-${i}`.replace(/.$/, 'x'));
    keys.push('seg-0', 'seg-0', 'seg-1', 'ségment', 'ségment', 'k'.repeat(64), 'k'.repeat(65), '', 'a', 'b');
    // equal length and equal ends, different elsewhere (one slot), and a non-ASCII byte where an
    // ASCII twin has the same length and ends
    for (let i = 0; i < 26; i++) keys.push(`ab${String.fromCharCode(97 + i)}defghijklmnopqrstuvwxyz`, 'abcdefghijklmnopqrstuvwxyz');
    keys.push('abcdefghijklmnopqrstuvwxyz', 'ab\u00e9efghijklmnopqrstuvwxyz', 'abcdefghijklmnopqrstuvwxyz', 'ab\u00e9efghijklmnopqrstuvwxyz');
    const bytes = encodeWith(codec, { keys });
    expect(decodeWith(codec, bytes)).toEqual({ keys });
    expect(decodeWith(codec, bytes)).toEqual({ keys }); // second pass: answers from the cache
  });

  it('names the path of a wrong-typed field inside repeated messages', () => {
    const codec = codecOf('BatchPutStartRequest');
    expect(() =>
      encodeWith(codec, {
        requests: [
          { key: 'a', value_length: 1 },
          { key: 'b', slice_lengths: [1, 'x'] },
        ],
      }),
    ).toThrow(/field requests\[1\]\.slice_lengths\[1\]/);
    expect(() => encodeWith(codec, { requests: [{ key: 'a', config: 'fast' }] })).toThrow(/field requests\[0\]\.config: expected an object/);
    // the writer is usable again after a refused message
    expect(decodeWith(codec, encodeWith(codec, { requests: [{ key: 'a', value_length: 1 }] }))).toMatchObject({ requests: [{ key: 'a', value_length: 1 }] });
  });

  it('rejects truncated or overrunning input with a RangeError', () => {
    const codec = codecOf('PutStartRequest');
    const good = encodeWith(codec, { key: 'abcdef', value_length: 10, slice_lengths: [10] });
    for (let n = 1; n < good.length; n++) {
      let threw = false;
      try {
        decodeWith(codec, good.subarray(0, n));
      } catch (e) {
        threw = e instanceof RangeError;
      }
      // a prefix either fails cleanly or is itself a complete message (cut between fields)
      if (!threw) expect(() => decodeWith(codec, good.subarray(0, n))).not.toThrow();
    }
    expect(() => decodeWith(codec, Buffer.from([0x0a, 0x05, 0x61]))).toThrow(RangeError);
    expect(() => decodeWith(codec, Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]))).toThrow(RangeError);
  });

  it('never decodes bytes that are not UTF-8 into a valid key (no silent U+FFFD)', () => {
    const codec = codecOf('GetReplicaListRequest');
    const keyBytes = (b: Buffer): Buffer => Buffer.concat([Buffer.from([0x0a, b.length]), b]);
    const bad = [
      Buffer.from('alias\xff', 'latin1'), // not a UTF-8 byte
      Buffer.from('alias\xfe', 'latin1'),
      Buffer.from([0x61, 0xed, 0xa0, 0x80]), // U+D800 encoded: surrogates have no UTF-8 form
      Buffer.from([0x61, 0xc0, 0xaf]), // overlong '/'
      Buffer.from([0x61, 0xe2, 0x82]), // truncated sequence
      Buffer.concat([Buffer.from('k'.repeat(80)), Buffer.from([0x80])]), // past the short-string path
    ];
    for (const b of bad) {
      const { key } = decodeWith<{ key: string }>(codec, keyBytes(b));
      expect(keyProblem(key)).toMatch(/unpaired surrogate U\+DCFF/);
    }
    // and a string with an unpaired surrogate is never encoded (it would arrive as U+FFFD)
    expect(() => encodeWith(codec, { key: 'alias\ud800' })).toThrow(/unpaired UTF-16 surrogate/);
    expect(() => encodeWith(codec, { key: 'x'.repeat(50) + '\udfff' })).toThrow(TypeError);
    expect(() => encodeWith(codec, { key: 'é'.repeat(50) + '\ud83d' })).toThrow(TypeError);
    // real U+FFFD and other non-ASCII text decode as they are
    for (const k of ['\ufffd', 'a\ufffdb', 'ключ', '🙂', 'x'.repeat(70) + '\ufffd']) {
      const { key } = decodeWith<{ key: string }>(codec, keyBytes(Buffer.from(k)));
      expect(key).toBe(k);
      expect(keyProblem(key)).toBeUndefined();
    }
  });
});
