// Whether an existing object already has every field the renderer wants, and the merge patch
// that makes it so. `desired` must be a subset of `existing` (the API server adds defaults, which
// must not count as drift), except in maps the operator owns whole (selectors, ConfigMap data,
// node selectors) and optional pod fields it owns (nodeSelector, tolerations, affinity): there an
// extra key or a field the spec dropped is drift, removed with null in the JSON merge patch.
// Arrays must match in length with each element a subset, since a merge patch replaces them.

/** Maps compared exactly: an extra key in the live object changes behaviour (e.g. a Service selector). */
const EXACT_MAPS = new Set(['selector', 'matchLabels', 'data', 'nodeSelector']);
/** Pod spec fields the operator owns: absent from the render means absent from the object. */
const OWNED_POD_FIELDS = ['nodeSelector', 'tolerations', 'affinity'];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function scalarEqual(d: unknown, e: unknown): boolean {
  // Ports and quantities may come back in the other spelling only if the server normalised them.
  return d === e || (typeof e === 'number' && String(e) === d) || (typeof d === 'number' && String(d) === e);
}

export function isSubset(desired: unknown, existing: unknown, key = '', parentKey = ''): boolean {
  if (desired === undefined) return true;
  if (!isObj(desired) && !Array.isArray(desired)) return scalarEqual(desired, existing);
  if (Array.isArray(desired)) {
    return Array.isArray(existing) && existing.length === desired.length && desired.every((d, i) => isSubset(d, existing[i]));
  }
  if (!isObj(existing)) return false;
  if (EXACT_MAPS.has(key) && Object.keys(existing).some((k) => !(k in desired))) return false;
  if (key === 'spec' && parentKey === 'template' && OWNED_POD_FIELDS.some((f) => existing[f] !== undefined && desired[f] === undefined)) return false;
  return Object.entries(desired).every(([k, v]) => isSubset(v, existing[k], k, key));
}

/** JSON merge patch (RFC 7386) turning `existing` into an object that `desired` is a subset of. */
export function mergePatchFor(desired: unknown, existing: unknown, key = '', parentKey = ''): unknown {
  if (!isObj(desired) || !isObj(existing)) return desired;
  const patch: Obj = { ...desired };
  for (const [k, v] of Object.entries(desired)) if (isObj(v)) patch[k] = mergePatchFor(v, existing[k], k, key);
  if (EXACT_MAPS.has(key)) for (const k of Object.keys(existing)) if (!(k in desired)) patch[k] = null;
  if (key === 'spec' && parentKey === 'template') for (const f of OWNED_POD_FIELDS) if (existing[f] !== undefined && desired[f] === undefined) patch[f] = null;
  return patch;
}

/** The part of a rendered object the operator owns and patches: everything but status. */
export function managedFields<T extends { metadata?: unknown; status?: unknown }>(obj: T): Omit<T, 'status'> {
  const { status: _status, ...rest } = obj;
  return rest;
}
