// Structural OpenAPI v3 schemas of CustomResourceDefinitions, applied the way the real API server
// applies them to a custom resource: defaults are filled in, unknown fields are pruned (unless
// x-kubernetes-preserve-unknown-fields), and the result is validated (type, required, enum,
// minimum/maximum, lengths, item counts, pattern, int-or-string, nullable, allOf/anyOf/oneOf/not,
// and the x-kubernetes-validations rules through an injected rule evaluator, cel-rules.ts). Field
// errors carry the same reasons and messages as the real server's, so clients see familiar 422
// responses. One module for the test API server (e2e/kube-apiserver) and the operator, which
// checks its custom resources against the CRDs in crds/ with it.
import { isDeepStrictEqual } from 'node:util';

export type Schema = Record<string, any>;

/** One field error, as in a Kubernetes Status's details.causes. */
export interface FieldCause {
  reason: string;
  message: string;
  field: string;
}

const isPlainObject = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
const deepEqual = isDeepStrictEqual;
const deepClone = <T>(v: T): T => structuredClone(v);

/** Evaluates one x-kubernetes-validations rule; returns true (valid), false, or 'skip' if unsupported. */
export type RuleEvaluator = (rule: string, self: unknown, oldSelf: unknown) => boolean | 'skip';

const ROOT_FIELDS = ['apiVersion', 'kind', 'metadata'];

function child(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return '"array"';
  if (isPlainObject(v)) return '"object"';
  return String(v);
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(schema: Schema, v: unknown): boolean {
  if (schema['x-kubernetes-int-or-string']) return typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));
  const t = schema.type;
  if (!t) return true;
  const actual = typeOf(v);
  if (t === 'number') return actual === 'number' || actual === 'integer';
  return t === actual;
}

/** Fills in schema defaults for absent fields, top-down; returns a new value. */
export function applyDefaults(schema: Schema | undefined, value: any): any {
  if (!schema) return value;
  if (isPlainObject(value)) {
    const out: Record<string, any> = { ...value };
    const props: Record<string, Schema> = schema.properties ?? {};
    for (const [k, ps] of Object.entries(props)) {
      if ((out[k] === undefined || (out[k] === null && !ps.nullable)) && ps.default !== undefined) out[k] = deepClone(ps.default);
      if (out[k] !== undefined) out[k] = applyDefaults(ps, out[k]);
    }
    if (isPlainObject(schema.additionalProperties)) {
      for (const k of Object.keys(out)) if (!(k in props)) out[k] = applyDefaults(schema.additionalProperties, out[k]);
    }
    return out;
  }
  if (Array.isArray(value) && schema.items) return value.map((e) => applyDefaults(schema.items, e));
  return value;
}

/**
 * Drops fields the schema does not declare. Returns the pruned value and the paths dropped
 * (a strict field validation reports those as errors instead).
 */
export function prune(schema: Schema | undefined, value: any, path = '', isRoot = true, dropped: string[] = []): { value: any; dropped: string[] } {
  if (!schema) return { value, dropped };
  if (isPlainObject(value)) {
    const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
    const embedded = isRoot || schema['x-kubernetes-embedded-resource'] === true;
    const props: Record<string, Schema> = schema.properties ?? {};
    const addl = schema.additionalProperties;
    const out: Record<string, any> = {};
    for (const [k, v] of Object.entries(value)) {
      const p = child(path, k);
      if (embedded && ROOT_FIELDS.includes(k)) {
        // metadata is ObjectMeta, governed by the server, not by the CRD schema.
        out[k] = k === 'metadata' ? v : prune(props[k], v, p, false, dropped).value;
      } else if (k in props) out[k] = prune(props[k], v, p, false, dropped).value;
      else if (isPlainObject(addl)) out[k] = prune(addl, v, p, false, dropped).value;
      else if (addl === true || preserve) out[k] = v;
      else dropped.push(p);
    }
    return { value: out, dropped };
  }
  if (Array.isArray(value) && schema.items) {
    return { value: value.map((e, i) => prune(schema.items, e, `${path}[${i}]`, false, dropped).value), dropped };
  }
  return { value, dropped };
}

interface Ctx {
  causes: FieldCause[];
  evalRule?: RuleEvaluator;
}

function fail(ctx: Ctx, field: string, reason: string, message: string): void {
  ctx.causes.push({ reason, message, field });
}

function validateNode(schema: Schema, v: any, old: any, path: string, ctx: Ctx, isRoot: boolean): void {
  const label = path || '<root>';
  if (v === null) {
    if (!schema.nullable && schema.type) fail(ctx, label, 'FieldValueTypeInvalid', `Invalid value: "null": ${label} in body must be of type ${schema.type}: "null"`);
    return;
  }
  if (!typeMatches(schema, v)) {
    const want = schema['x-kubernetes-int-or-string'] ? 'integer,string' : schema.type;
    fail(ctx, label, 'FieldValueTypeInvalid', `Invalid value: ${show(v)}: ${label} in body must be of type ${want}: "${typeOf(v)}"`);
    return;
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e: unknown) => deepEqual(e, v))) {
    fail(ctx, label, 'FieldValueNotSupported', `Unsupported value: ${show(v)}: supported values: ${schema.enum.map((e: unknown) => JSON.stringify(e)).join(', ')}`);
  }
  if (typeof v === 'number') {
    if (typeof schema.minimum === 'number' && (schema.exclusiveMinimum === true ? v <= schema.minimum : v < schema.minimum)) {
      fail(
        ctx,
        label,
        'FieldValueInvalid',
        `Invalid value: ${v}: ${label} in body should be greater than ${schema.exclusiveMinimum === true ? '' : 'or equal to '}${schema.minimum}`,
      );
    }
    if (typeof schema.maximum === 'number' && (schema.exclusiveMaximum === true ? v >= schema.maximum : v > schema.maximum)) {
      fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${v}: ${label} in body should be less than ${schema.exclusiveMaximum === true ? '' : 'or equal to '}${schema.maximum}`);
    }
    if (typeof schema.multipleOf === 'number' && v % schema.multipleOf !== 0) {
      fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${v}: ${label} in body should be a multiple of ${schema.multipleOf}`);
    }
  }
  if (typeof v === 'string') {
    if (typeof schema.minLength === 'number' && [...v].length < schema.minLength) {
      fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${show(v)}: ${label} in body should be at least ${schema.minLength} chars long`);
    }
    if (typeof schema.maxLength === 'number' && [...v].length > schema.maxLength) {
      fail(ctx, label, 'FieldValueTooLong', `Too long: may not be more than ${schema.maxLength} bytes`);
    }
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(v)) {
      fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${show(v)}: ${label} in body should match '${schema.pattern}'`);
    }
  }
  if (Array.isArray(v)) {
    if (typeof schema.minItems === 'number' && v.length < schema.minItems) {
      fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${v.length}: ${label} in body should have at least ${schema.minItems} items`);
    }
    if (typeof schema.maxItems === 'number' && v.length > schema.maxItems) {
      fail(ctx, label, 'FieldValueTooMany', `Too many: ${v.length}: must have at most ${schema.maxItems} items`);
    }
    if (schema.items) v.forEach((e, i) => validateNode(schema.items, e, undefined, `${path}[${i}]`, ctx, false));
  }
  if (isPlainObject(v)) {
    const props: Record<string, Schema> = schema.properties ?? {};
    for (const r of schema.required ?? []) {
      if (v[r] === undefined) fail(ctx, child(path, r), 'FieldValueRequired', 'Required value');
    }
    for (const [k, x] of Object.entries(v)) {
      if (isRoot && ROOT_FIELDS.includes(k)) continue;
      const oldX = isPlainObject(old) ? old[k] : undefined;
      if (props[k]) validateNode(props[k], x, oldX, child(path, k), ctx, false);
      else if (isPlainObject(schema.additionalProperties)) validateNode(schema.additionalProperties, x, oldX, `${path}[${k}]`, ctx, false);
    }
    if (typeof schema.minProperties === 'number' && Object.keys(v).length < schema.minProperties) {
      fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${Object.keys(v).length}: ${label} in body should have at least ${schema.minProperties} properties`);
    }
    if (typeof schema.maxProperties === 'number' && Object.keys(v).length > schema.maxProperties) {
      fail(ctx, label, 'FieldValueTooMany', `Too many: ${Object.keys(v).length}: must have at most ${schema.maxProperties} items`);
    }
  }
  validateCombinators(schema, v, old, path, ctx);
  validateRules(schema, v, old, path, ctx);
}

function passes(schema: Schema, v: any, old: any, path: string, ctx: Ctx): boolean {
  const sub: Ctx = { causes: [], evalRule: ctx.evalRule };
  validateNode(schema, v, old, path, sub, false);
  return sub.causes.length === 0;
}

function validateCombinators(schema: Schema, v: any, old: any, path: string, ctx: Ctx): void {
  const label = path || '<root>';
  for (const s of schema.allOf ?? []) validateNode(s, v, old, path, ctx, false);
  if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s: Schema) => passes(s, v, old, path, ctx))) {
    fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${show(v)}: ${label} in body must match at least one schema in anyOf`);
  }
  if (Array.isArray(schema.oneOf)) {
    const n = schema.oneOf.filter((s: Schema) => passes(s, v, old, path, ctx)).length;
    if (n !== 1) fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${show(v)}: ${label} in body must match exactly one schema in oneOf`);
  }
  if (isPlainObject(schema.not) && passes(schema.not, v, old, path, ctx)) {
    fail(ctx, label, 'FieldValueInvalid', `Invalid value: ${show(v)}: ${label} in body should not be valid against the schema in not`);
  }
}

function validateRules(schema: Schema, v: any, old: any, path: string, ctx: Ctx): void {
  const rules: Array<Record<string, any>> = schema['x-kubernetes-validations'] ?? [];
  if (!ctx.evalRule) return;
  for (const r of rules) {
    const transition = /\boldSelf\b/.test(String(r.rule));
    if (transition && old === undefined) continue; // transition rules apply to updates only
    const ok = ctx.evalRule(String(r.rule), v, old);
    if (ok === false) {
      const field = r.fieldPath ? child(path, String(r.fieldPath).replace(/^\./, '')) : path || '<root>';
      const reason = r.reason ?? 'FieldValueInvalid';
      const message = r.message ?? `failed rule: ${r.rule}`;
      fail(ctx, field, reason, reason === 'FieldValueInvalid' ? `Invalid value: ${show(v)}: ${message}` : message);
    }
  }
}

/** Validates a defaulted, pruned object against its schema; `old` is the stored object on update. */
export function validate(schema: Schema | undefined, obj: any, old?: any, evalRule?: RuleEvaluator): FieldCause[] {
  if (!schema) return [];
  const ctx: Ctx = { causes: [], evalRule };
  validateNode(schema, obj, old, '', ctx, true);
  return ctx.causes;
}
