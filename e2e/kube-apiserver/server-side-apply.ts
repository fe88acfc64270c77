// Server-side apply, simplified: the applied configuration is merged into the live object
// (built-in lists by their patch merge key, custom-resource lists replaced), and fields the same
// field manager applied last time but left out now are removed. Ownership conflicts between
// managers are not detected (every apply behaves as if forced). fieldsV1 renders the managed
// field set in the real server's `f:` notation for metadata.managedFields.

import { deepClone, isPlainObject, mergePatch } from './json-patch.js';
import { strategicMergePatch } from './strategic-merge-patch.js';

type Obj = Record<string, any>;

/** Leaf paths of a configuration; lists are leaves (owned atomically). */
function leafPaths(v: unknown, prefix: string[] = [], out: string[][] = []): string[][] {
  if (isPlainObject(v) && Object.keys(v).length > 0) {
    for (const [k, x] of Object.entries(v)) leafPaths(x, [...prefix, k], out);
  } else out.push(prefix);
  return out;
}

function has(v: unknown, path: string[]): boolean {
  let cur: unknown = v;
  for (const p of path) {
    if (!isPlainObject(cur) || !(p in cur)) return false;
    cur = cur[p];
  }
  return true;
}

function removePath(o: Obj, path: string[]): void {
  const parents: Obj[] = [];
  let cur: Obj = o;
  for (const p of path.slice(0, -1)) {
    if (!isPlainObject(cur[p])) return;
    parents.push(cur);
    cur = cur[p];
  }
  delete cur[path[path.length - 1]];
  // Objects left empty by the removal go too, as the real server drops fields nobody owns.
  for (let i = parents.length - 1; i >= 0; i--) {
    const key = path[i];
    if (isPlainObject(parents[i][key]) && Object.keys(parents[i][key]).length === 0) delete parents[i][key];
    else break;
  }
}

/** Merges `config` into `live`, first removing fields `previous` (this manager's last apply) had. */
export function applyConfig(live: Obj, config: Obj, previous: Obj | undefined, builtin: boolean): Obj {
  const base = deepClone(live);
  if (previous) {
    for (const p of leafPaths(previous)) {
      if (p[0] === 'apiVersion' || p[0] === 'kind' || (p[0] === 'metadata' && (p[1] === 'name' || p[1] === 'namespace'))) continue;
      if (!has(config, p)) removePath(base, p);
    }
  }
  return builtin ? strategicMergePatch(base, config) : mergePatch(base, config);
}

/** The field set of an object in FieldsV1 form: `{"f:spec": {"f:replicas": {}}}`. */
export function fieldsV1(v: unknown): Obj {
  const out: Obj = {};
  if (!isPlainObject(v)) return out;
  for (const [k, x] of Object.entries(v)) {
    if (k === 'status' || (k === 'metadata' && !isPlainObject(x))) continue;
    if (k === 'metadata') {
      const m: Obj = {};
      for (const mk of ['labels', 'annotations', 'finalizers', 'ownerReferences']) if (x[mk] !== undefined) m[`f:${mk}`] = fieldsV1(x[mk]);
      if (Object.keys(m).length > 0) out['f:metadata'] = m;
      continue;
    }
    out[`f:${k}`] = isPlainObject(x) ? fieldsV1(x) : {};
  }
  return out;
}
