// Schema defaulting, pruning and validation (shared by the test API server and the operator).

import { applyDefaults, prune, validate } from './structural-schema.js';

describe('structural schema', () => {
  const schema = {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        required: ['mode'],
        properties: {
          mode: { type: 'string', enum: ['a', 'b'] },
          n: { type: 'integer', minimum: 0, exclusiveMaximum: true, maximum: 10, default: 5 },
          ratio: { type: 'number' },
          port: { 'x-kubernetes-int-or-string': true },
          opt: { type: 'string', nullable: true },
          nested: { type: 'object', default: {}, properties: { d: { type: 'boolean', default: true } } },
          list: { type: 'array', minItems: 1, items: { type: 'object', properties: { k: { type: 'string', minLength: 2 } } } },
          either: { type: 'object', oneOf: [{ required: ['x'] }, { required: ['y'] }], properties: { x: { type: 'string' }, y: { type: 'string' } } },
        },
      },
    },
  };

  test('defaults fill absent fields, including inside defaulted objects', () => {
    expect(applyDefaults(schema, { spec: { mode: 'a' } }).spec).toEqual({ mode: 'a', n: 5, nested: { d: true } });
    expect(applyDefaults(schema, { spec: { mode: 'a', n: 0, nested: { d: false } } }).spec).toEqual({ mode: 'a', n: 0, nested: { d: false } });
  });

  test('unknown fields are pruned and reported with their paths', () => {
    const r = prune(schema, { apiVersion: 'v', kind: 'K', metadata: { name: 'x', any: 1 }, spec: { mode: 'a', zz: 1, list: [{ k: 'ab', q: 2 }] }, top: 1 });
    expect(r.value).toEqual({ apiVersion: 'v', kind: 'K', metadata: { name: 'x', any: 1 }, spec: { mode: 'a', list: [{ k: 'ab' }] } });
    expect(r.dropped).toEqual(['spec.zz', 'spec.list[0].q', 'top']);
  });

  test('validation reports type, enum, bounds, lengths, nullability and oneOf', () => {
    const fields = (spec: object) => validate(schema, { spec }).map((c) => `${c.field}|${c.reason}`);
    expect(fields({ mode: 'a', n: 10, ratio: 0.5, port: 'http', opt: null, list: [{ k: 'ab' }], either: { x: '1' } })).toEqual(['spec.n|FieldValueInvalid']);
    expect(fields({ mode: 'c', port: 1.5, list: [], either: { x: '1', y: '2' } })).toEqual([
      'spec.mode|FieldValueNotSupported',
      'spec.port|FieldValueTypeInvalid',
      'spec.list|FieldValueInvalid',
      'spec.either|FieldValueInvalid',
    ]);
    expect(fields({ list: [{ k: 'a' }], ratio: 'x' })).toEqual(['spec.mode|FieldValueRequired', 'spec.list[0].k|FieldValueInvalid', 'spec.ratio|FieldValueTypeInvalid']);
    expect(validate(schema, { spec: { mode: 'a', n: -1 } })[0].message).toBe('Invalid value: -1: spec.n in body should be greater than or equal to 0');
  });
});
