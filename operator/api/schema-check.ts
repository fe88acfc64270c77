// Checks a custom resource against its CRD's structural OpenAPI v3 schema the way the API
// server's schema validation does (types, required, enum, bounds, patterns, lengths, unknown
// fields, int-or-string), returning every violation with its path. CEL rules are not evaluated
// here; validation.ts implements the same cross-field rules in TypeScript.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';

export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

export function checkSchema(value: unknown, schema: Schema, path = ''): string[] {
  const at = path || '<root>';
  if (value === undefined || value === null) return [];
  const errors: string[] = [];
  const t = schema['x-kubernetes-int-or-string'] ? (Number.isInteger(value) ? 'integer' : typeof value === 'string' ? 'string' : 'bad') : schema.type;
  if (t === 'bad') return [`${at}: must be an integer or a string`];
  const actual = Array.isArray(value) ? 'array' : typeof value;
  switch (t) {
    case 'object':
      if (actual !== 'object') return [`${at}: must be an object, got ${actual}`];
      break;
    case 'array':
      if (actual !== 'array') return [`${at}: must be an array, got ${actual}`];
      break;
    case 'string':
      if (actual !== 'string') return [`${at}: must be a string, got ${actual}`];
      break;
    case 'integer':
      if (!Number.isInteger(value)) return [`${at}: must be an integer, got ${JSON.stringify(value)}`];
      break;
    case 'number':
      if (actual !== 'number') return [`${at}: must be a number, got ${actual}`];
      break;
    case 'boolean':
      if (actual !== 'boolean') return [`${at}: must be a boolean, got ${actual}`];
      break;
  }
  if (schema.enum && !schema.enum.includes(value)) errors.push(`${at}: ${JSON.stringify(value)} is not one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`);
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${at}: ${value} is less than the minimum ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errors.push(`${at}: ${value} is greater than the maximum ${schema.maximum}`);
  }
  if (typeof value === 'string') {
    if (schema.minLength !== undefined && value.length < schema.minLength) errors.push(`${at}: must be at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push(`${at}: must be at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) errors.push(`${at}: "${value}" does not match ${schema.pattern}`);
  }
  if (actual === 'array' && schema.items) (value as unknown[]).forEach((v, i) => errors.push(...checkSchema(v, schema.items!, `${path}[${i}]`)));
  if (actual === 'object' && t === 'object') {
    const obj = value as Record<string, unknown>;
    for (const r of schema.required ?? []) if (obj[r] === undefined) errors.push(`${path ? `${path}.` : ''}${r}: required`);
    for (const [k, v] of Object.entries(obj)) {
      const p = path ? `${path}.${k}` : k;
      const sub = schema.properties?.[k];
      if (sub) errors.push(...checkSchema(v, sub, p));
      else if (typeof schema.additionalProperties === 'object') errors.push(...checkSchema(v, schema.additionalProperties, p));
      else if (schema.properties && !schema['x-kubernetes-preserve-unknown-fields']) errors.push(`${p}: unknown field`);
    }
  }
  return errors;
}

export interface CrdInfo {
  kind: string;
  apiVersion: string;
  schema: Schema;
}

/** Finds crds/ (beside the sources or the compiled dist/) and loads each CRD's storage schema. */
export function loadCrdSchemas(dir?: string): Map<string, CrdInfo> {
  let d = dir;
  if (!d) {
    let here = dirname(fileURLToPath(import.meta.url));
    for (let i = 0; i < 5 && !existsSync(join(here, 'crds', 'store.kvcache.io_storeclusters.yaml')); i++) here = dirname(here);
    d = join(here, 'crds');
  }
  const out = new Map<string, CrdInfo>();
  for (const f of ['store.kvcache.io_storeclusters.yaml', 'store.kvcache.io_storesegments.yaml']) {
    const crd = yaml.load(readFileSync(join(d, f), 'utf8')) as any;
    const v = crd.spec.versions.find((x: any) => x.storage);
    out.set(crd.spec.names.kind, { kind: crd.spec.names.kind, apiVersion: `${crd.spec.group}/${v.name}`, schema: v.schema.openAPIV3Schema });
  }
  return out;
}
