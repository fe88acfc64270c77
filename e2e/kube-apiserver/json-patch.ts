// JSON Patch (RFC 6902) and JSON Merge Patch (RFC 7386), the two generic patch types the API
// server accepts for every resource. Both return a new document and never modify their input.

import { ApiError } from './api-error.js';

type Json = any;

export function deepClone<T>(v: T): T {
  return v === undefined ? v : structuredClone(v);
}

export function isPlainObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function deepEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** RFC 7386: objects merge recursively, null deletes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isPlainObject(patch)) return deepClone(patch);
  const out: Record<string, any> = isPlainObject(target) ? deepClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function patchError(message: string): ApiError {
  return new ApiError(422, 'Invalid', message);
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw patchError(`invalid JSON pointer: "${pointer}"`);
  return pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function resolveParent(doc: Json, tokens: string[], op: string, path: string): { parent: Json; last: string } {
  let cur = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isPlainObject(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw patchError(`jsonpatch ${op} operation does not apply: doc is missing path: "${path}"`);
  }
  return { parent: cur, last: tokens[tokens.length - 1] };
}

function getAt(doc: Json, path: string, op: string): Json {
  let cur = doc;
  for (const t of parsePointer(path)) {
    if (Array.isArray(cur)) cur = cur[t === '-' ? cur.length : Number(t)];
    else if (isPlainObject(cur) && Object.prototype.hasOwnProperty.call(cur, t)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw patchError(`jsonpatch ${op} operation does not apply: doc is missing path: "${path}"`);
  }
  return cur;
}

function arrayIndex(arr: Json[], t: string, forInsert: boolean, op: string, path: string): number {
  if (forInsert && t === '-') return arr.length;
  if (!/^(0|[1-9][0-9]*)$/.test(t)) throw patchError(`jsonpatch ${op} operation does not apply: invalid index "${t}" in "${path}"`);
  const i = Number(t);
  if (i > arr.length || (!forInsert && i === arr.length)) {
    throw patchError(`jsonpatch ${op} operation does not apply: index out of bounds in "${path}"`);
  }
  return i;
}

function addAt(doc: Json, path: string, value: Json, op: string): Json {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return deepClone(value);
  const { parent, last } = resolveParent(doc, tokens, op, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, true, op, path), 0, deepClone(value));
  else if (isPlainObject(parent)) parent[last] = deepClone(value);
  else throw patchError(`jsonpatch ${op} operation does not apply: doc is missing path: "${path}"`);
  return doc;
}

function removeAt(doc: Json, path: string, op: string): Json {
  const tokens = parsePointer(path);
  const { parent, last } = resolveParent(doc, tokens, op, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, false, op, path), 1);
  else if (isPlainObject(parent) && Object.prototype.hasOwnProperty.call(parent, last)) delete parent[last];
  else throw patchError(`jsonpatch ${op} operation does not apply: doc is missing key: ${path}`);
  return doc;
}

/** RFC 6902 operations: add, remove, replace, move, copy, test. A failing test rejects the whole patch. */
export function jsonPatch(target: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw new ApiError(400, 'BadRequest', 'json patch must be an array of operations');
  let doc = deepClone(target);
  for (const o of ops) {
    if (!isPlainObject(o) || typeof o.op !== 'string' || typeof o.path !== 'string') {
      throw new ApiError(400, 'BadRequest', `invalid json patch operation: ${JSON.stringify(o)}`);
    }
    switch (o.op) {
      case 'add':
        doc = addAt(doc, o.path, o.value, 'add');
        break;
      case 'remove':
        doc = removeAt(doc, o.path, 'remove');
        break;
      case 'replace':
        getAt(doc, o.path, 'replace');
        if (o.path === '') doc = deepClone(o.value);
        else doc = addAt(removeAt(doc, o.path, 'replace'), o.path, o.value, 'replace');
        break;
      case 'move': {
        const v = getAt(doc, o.from, 'move');
        doc = addAt(removeAt(doc, o.from, 'move'), o.path, v, 'move');
        break;
      }
      case 'copy':
        doc = addAt(doc, o.path, getAt(doc, o.from, 'copy'), 'copy');
        break;
      case 'test':
        if (!deepEqual(getAt(doc, o.path, 'test'), o.value)) {
          throw patchError(`testing value ${o.path} failed: test operation failed`);
        }
        break;
      default:
        throw new ApiError(400, 'BadRequest', `unknown json patch operation "${o.op}"`);
    }
  }
  return doc;
}
