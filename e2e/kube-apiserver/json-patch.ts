// JSON Patch (RFC 6902, the rfc6902 library) and JSON Merge Patch (RFC 7386, json-merge-patch),
// the two generic patch types the API server accepts for every resource, with the API server's
// errors (400 for a malformed patch, 422 with its wording when an operation does not apply). Both
// return a new document and never modify their input. Also the JSON helpers the test server uses.
import { isDeepStrictEqual } from 'node:util';
import mergePatchLib from 'json-merge-patch';
import { applyPatch, type Operation } from 'rfc6902';
import { ApiError } from './api-error.js';

type Json = any;

export function deepClone<T>(v: T): T {
  return v === undefined ? v : structuredClone(v);
}

export function isPlainObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const deepEqual: (a: Json, b: Json) => boolean = isDeepStrictEqual;

/** RFC 7386: objects merge recursively, null deletes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  return mergePatchLib.apply(deepClone(target), deepClone(patch));
}

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

/** RFC 6902 operations: add, remove, replace, move, copy, test. Any failing operation rejects the whole patch. */
export function jsonPatch(target: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw new ApiError(400, 'BadRequest', 'json patch must be an array of operations');
  for (const o of ops) {
    if (!isPlainObject(o) || typeof o.op !== 'string' || typeof o.path !== 'string' || (o.path !== '' && !o.path.startsWith('/'))) {
      throw new ApiError(400, 'BadRequest', `invalid json patch operation: ${JSON.stringify(o)}`);
    }
    if (!OPS.has(o.op)) throw new ApiError(400, 'BadRequest', `unknown json patch operation "${o.op}"`);
    if ((o.op === 'move' || o.op === 'copy') && typeof o.from !== 'string') throw new ApiError(400, 'BadRequest', `invalid json patch operation: ${JSON.stringify(o)}`);
  }
  // Patched under a wrapper so that operations on the document root ("") work too.
  const box = { doc: deepClone(target) };
  const rooted = ops.map((o) => ({ ...o, path: `/doc${o.path}`, ...(typeof o.from === 'string' ? { from: `/doc${o.from}` } : {}) })) as Operation[];
  const results = applyPatch(box, rooted);
  const i = results.findIndex((r) => r !== null);
  if (i < 0) return box.doc;
  const o = ops[i];
  if (results[i]!.name === 'TestError') throw new ApiError(422, 'Invalid', `testing value ${o.path} failed: test operation failed`);
  if (o.op === 'remove') throw new ApiError(422, 'Invalid', `jsonpatch remove operation does not apply: doc is missing key: ${o.path}`);
  const reported = (results[i] as { path?: unknown }).path;
  const missing = (typeof reported === 'string' ? reported : `/doc${o.path}`).slice('/doc'.length);
  throw new ApiError(422, 'Invalid', `jsonpatch ${o.op} operation does not apply: doc is missing path: "${missing}"`);
}
