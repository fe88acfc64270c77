// A small RFC 6902 JSON Patch: `diff(before, after)` produces the operations that turn one JSON
// document into the other (how the webhook expresses its mutation), and `applyPatch` applies
// add/remove/replace (the CLI and tests use it to show the pod the API server would store).

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type PatchOp =
  | { op: 'add'; path: string; value: Json }
  | { op: 'replace'; path: string; value: Json }
  | { op: 'remove'; path: string };

const escape = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');
const unescape = (token: string) => token.replace(/~1/g, '/').replace(/~0/g, '~');
const isObject = (v: unknown): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

/** Operations turning `before` into `after`; empty when they are equal. `undefined` members count as absent. */
export function diff(before: unknown, after: unknown, path = ''): PatchOp[] {
  if (deepEqual(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const ops: PatchOp[] = [];
    for (const k of Object.keys(before)) {
      if (before[k] !== undefined && after[k] === undefined) ops.push({ op: 'remove', path: `${path}/${escape(k)}` });
    }
    for (const k of Object.keys(after)) {
      if (after[k] === undefined) continue;
      if (before[k] === undefined) ops.push({ op: 'add', path: `${path}/${escape(k)}`, value: after[k] });
      else ops.push(...diff(before[k], after[k], `${path}/${escape(k)}`));
    }
    return ops;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const ops: PatchOp[] = [];
    const common = Math.min(before.length, after.length);
    for (let i = 0; i < common; i++) ops.push(...diff(before[i], after[i], `${path}/${i}`));
    for (let i = common; i < after.length; i++) ops.push({ op: 'add', path: `${path}/${i}`, value: after[i] as Json });
    // Remove from the end so earlier indices stay valid while applying.
    for (let i = before.length - 1; i >= common; i--) ops.push({ op: 'remove', path: `${path}/${i}` });
    return ops;
  }
  if (path === '') throw new Error('json-patch: cannot replace the document root');
  return [{ op: 'replace', path, value: after as Json }];
}

export class PatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PatchError';
  }
}

/** Applies add/remove/replace to a deep copy of `doc`; throws PatchError on a path that does not resolve. */
export function applyPatch<T>(doc: T, ops: PatchOp[]): T {
  const root = structuredClone(doc) as unknown;
  for (const op of ops) {
    const tokens = op.path.split('/').slice(1).map(unescape);
    if (op.path === '' || tokens.length === 0) throw new PatchError('json-patch: the document root cannot be patched');
    let parent: unknown = root;
    for (const t of tokens.slice(0, -1)) {
      parent = Array.isArray(parent) ? parent[Number(t)] : isObject(parent) ? parent[t] : undefined;
      if (parent === undefined) throw new PatchError(`json-patch: path ${op.path} does not exist`);
    }
    const last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (!Number.isInteger(i) || i < 0 || i > parent.length || (op.op !== 'add' && i >= parent.length)) throw new PatchError(`json-patch: index ${last} out of range at ${op.path}`);
      if (op.op === 'add') parent.splice(i, 0, op.value);
      else if (op.op === 'replace') parent[i] = op.value;
      else parent.splice(i, 1);
    } else if (isObject(parent)) {
      if (op.op !== 'add' && !(last in parent)) throw new PatchError(`json-patch: path ${op.path} does not exist`);
      if (op.op === 'remove') delete parent[last];
      else parent[last] = op.value;
    } else throw new PatchError(`json-patch: path ${op.path} does not exist`);
  }
  return root as T;
}
