// Strategic merge patch for the built-in kinds: like a JSON merge patch, except that lists with
// a patch merge key (containers, env and volumes by name, container ports by containerPort...)
// merge element by element, and the directives kubectl's three-way apply emits are honoured:
// `$patch: delete|replace`, `$retainKeys`, `$setElementOrder/<list>` and
// `$deleteFromPrimitiveList/<list>`. Lists without a merge key are replaced, as in the real server.

import { badRequest } from './api-error.js';
import { deepClone, deepEqual, isPlainObject } from './json-patch.js';

type Json = any;

/** The merge strategy of a list field: by key for lists of objects, 'set' for primitive lists. */
type ListStrategy = { key: string } | 'set' | undefined;

const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  imagePullSecrets: 'name',
  hostAliases: 'ip',
  conditions: 'type',
  ownerReferences: 'uid',
  topologySpreadConstraints: 'topologyKey',
  resourceClaims: 'name',
};

/** The strategy of list `field` at `path` (the keys from the root down to the list's parent). */
export function listStrategy(path: string[], field: string): ListStrategy {
  if (field === 'finalizers' && path[path.length - 1] === 'metadata') return 'set';
  if (field === 'ports') {
    // Container ports merge by containerPort, Service ports by port.
    return path.includes('containers') || path.includes('initContainers') ? { key: 'containerPort' } : { key: 'port' };
  }
  const key = MERGE_KEYS[field];
  return key ? { key } : undefined;
}

const ORDER_PREFIX = '$setElementOrder/';
const DELETE_PRIMITIVE_PREFIX = '$deleteFromPrimitiveList/';

function mergeKeyed(original: Json[], patch: Json[], key: string, path: string[], field: string): Json[] {
  if (patch.some((e) => isPlainObject(e) && e.$patch === 'replace')) {
    return patch.filter((e) => !(isPlainObject(e) && e.$patch === 'replace')).map((e) => stripDirectives(e));
  }
  const out = original.map((e) => deepClone(e));
  for (const el of patch) {
    if (!isPlainObject(el)) throw badRequest(`strategic merge patch: element of ${field} is not an object`);
    if (!(key in el)) throw badRequest(`map: ${JSON.stringify(el)} does not contain declared merge key: ${key}`);
    const idx = out.findIndex((o) => isPlainObject(o) && deepEqual(o[key], el[key]));
    if (el.$patch === 'delete') {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = mergeObject(out[idx], el, [...path, field]);
    else out.push(mergeObject({}, el, [...path, field]));
  }
  return out;
}

function applyOrder(list: Json[], order: Json[], strategy: ListStrategy): Json[] {
  const keyOf = (e: Json) => (strategy && strategy !== 'set' && isPlainObject(e) ? e[strategy.key] : e);
  const rank = new Map<string, number>();
  order.forEach((e, i) => rank.set(JSON.stringify(keyOf(e)), i));
  const ordered = list.filter((e) => rank.has(JSON.stringify(keyOf(e))));
  ordered.sort((a, b) => rank.get(JSON.stringify(keyOf(a)))! - rank.get(JSON.stringify(keyOf(b)))!);
  // Elements the order does not name (added by others) keep their relative place after those it does.
  return [...ordered, ...list.filter((e) => !rank.has(JSON.stringify(keyOf(e))))];
}

function stripDirectives(v: Json): Json {
  if (Array.isArray(v)) return v.map(stripDirectives);
  if (!isPlainObject(v)) return v;
  const out: Record<string, Json> = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === '$patch' || k === '$retainKeys' || k.startsWith(ORDER_PREFIX) || k.startsWith(DELETE_PRIMITIVE_PREFIX)) continue;
    if (x === null) continue;
    out[k] = stripDirectives(x);
  }
  return out;
}

function mergeObject(original: Json, patch: Record<string, Json>, path: string[]): Json {
  if (patch.$patch === 'delete') return undefined;
  if (patch.$patch === 'replace') return stripDirectives(patch);
  const out: Record<string, Json> = isPlainObject(original) ? deepClone(original) : {};
  const orders: [string, Json[]][] = [];
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch' || k === '$retainKeys') continue;
    if (k.startsWith(ORDER_PREFIX)) {
      orders.push([k.slice(ORDER_PREFIX.length), v]);
      continue;
    }
    if (k.startsWith(DELETE_PRIMITIVE_PREFIX)) {
      const field = k.slice(DELETE_PRIMITIVE_PREFIX.length);
      if (Array.isArray(out[field]) && Array.isArray(v)) out[field] = out[field].filter((e: Json) => !v.some((d) => deepEqual(d, e)));
      continue;
    }
    if (v === null) {
      delete out[k];
      continue;
    }
    if (Array.isArray(v)) {
      const strategy = listStrategy(path, k);
      const cur = Array.isArray(out[k]) ? out[k] : [];
      if (strategy === 'set') out[k] = [...cur, ...v.filter((e) => !cur.some((c: Json) => deepEqual(c, e)))];
      else if (strategy) out[k] = mergeKeyed(cur, v, strategy.key, path, k);
      else out[k] = stripDirectives(v);
      continue;
    }
    if (isPlainObject(v)) {
      const merged = mergeObject(out[k], v, [...path, k]);
      if (merged === undefined) delete out[k];
      else out[k] = merged;
      continue;
    }
    out[k] = v;
  }
  for (const [field, order] of orders) {
    if (Array.isArray(out[field]) && Array.isArray(order)) out[field] = applyOrder(out[field], order, listStrategy(path, field));
  }
  if (Array.isArray(patch.$retainKeys)) {
    for (const k of Object.keys(out)) if (!patch.$retainKeys.includes(k)) delete out[k];
  }
  return out;
}

/** Applies a strategic merge patch to a built-in object; returns a new object. */
export function strategicMergePatch(original: Json, patch: Json): Json {
  if (!isPlainObject(patch)) throw badRequest('strategic merge patch must be a JSON object');
  return mergeObject(original, patch, []) ?? {};
}
