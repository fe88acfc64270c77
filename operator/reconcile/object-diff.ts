// Whether an existing object already has every field the renderer wants: `desired` must be a
// subset of `existing` (the API server adds defaults, which must not count as drift). Arrays must
// have the same length with each element a subset, since a merge patch replaces whole arrays.

export function isSubset(desired: unknown, existing: unknown): boolean {
  if (desired === undefined) return true;
  if (desired === null || typeof desired !== 'object') {
    // Quantities and ports may come back in another spelling only if the server normalised them.
    return desired === existing || (typeof existing === 'number' && String(existing) === desired) || (typeof desired === 'number' && String(desired) === existing);
  }
  if (Array.isArray(desired)) {
    return Array.isArray(existing) && existing.length === desired.length && desired.every((d, i) => isSubset(d, existing[i]));
  }
  if (existing === null || typeof existing !== 'object' || Array.isArray(existing)) return false;
  return Object.entries(desired as Record<string, unknown>).every(([k, v]) => isSubset(v, (existing as Record<string, unknown>)[k]));
}

/** The part of a rendered object the operator owns and patches: everything but status. */
export function managedFields<T extends { metadata?: unknown; status?: unknown }>(obj: T): Omit<T, 'status'> {
  const { status: _status, ...rest } = obj;
  return rest;
}
