// JSON Patch (RFC 6902) for the operator, on the rfc6902 library: `diff(before, after)` gives the
// operations that turn one JSON document into the other (how the webhook expresses its mutation),
// `applyPatch` applies operations to a copy (the CLI and tests show the pod the API server would
// store), and `deepEqual` is "no difference" (members whose value is undefined count as absent,
// as they vanish in JSON).
import { applyPatch as apply, createPatch, type Operation } from 'rfc6902';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type PatchOp = Operation;

export class PatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PatchError';
  }
}

/** Operations turning `before` into `after`; empty when they are equal. */
export function diff(before: unknown, after: unknown): PatchOp[] {
  return createPatch(before, after);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  return createPatch(a, b).length === 0;
}

/** Applies `ops` to a deep copy of `doc`, all or nothing: a PatchError names the first failing operation. */
export function applyPatch<T>(doc: T, ops: PatchOp[]): T {
  // Patched under a wrapper so that operations on the document root ("") work too.
  const box = { doc: structuredClone(doc) };
  const rooted = ops.map((o) => ({ ...o, path: `/doc${o.path}`, ...('from' in o ? { from: `/doc${o.from}` } : {}) }));
  const failed = apply(box, rooted).findIndex((r) => r !== null);
  if (failed >= 0) {
    const op = ops[failed];
    throw new PatchError(`json-patch: ${op.op} ${op.path} does not apply to the document`);
  }
  return box.doc;
}
