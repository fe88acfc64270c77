// Eviction policy: which objects go when space runs short, and which unfinished writes (zombie
// PutStarts) may be released. Pure selection over the object map; the caller frees the space.
//
// The object map's insertion order is its LRU order: every access re-inserts the key, so the
// first entries are the least recently used. Candidates are COMPLETE, unleased, not hard-pinned;
// those not soft-pinned go first; soft-pinned ones only when the allowance is on and the scan
// found no more unpinned candidates. The scan is bounded so one call never walks forever.
import type { ObjectMeta } from './object-meta.js';

export interface EvictionPolicy {
  allowEvictSoftPinned: boolean;
  softPinTtlMs: number;
}

/** How many entries one eviction call may look at: at least this many... */
export const EVICTION_MIN_SCAN = 10_000;
/** ...or this many per object to evict. */
export const EVICTION_SCAN_PER_VICTIM = 8;

/** Number of objects one eviction aims to remove: the ratio of all objects, at least 1. */
export function evictionTarget(objectCount: number, ratio: number): number {
  return Math.max(1, Math.ceil(objectCount * ratio));
}

export function selectVictims(objects: Map<string, ObjectMeta>, now: number, target: number, policy: EvictionPolicy): string[] {
  const victims: string[] = [];
  const softPinned: string[] = [];
  if (target <= 0) return victims;
  const scanLimit = Math.max(EVICTION_MIN_SCAN, target * EVICTION_SCAN_PER_VICTIM);
  let scanned = 0;
  let exhausted = true;
  for (const [key, meta] of objects) {
    if (scanned++ >= scanLimit) {
      exhausted = false;
      break;
    }
    if (!meta.complete || meta.hardPinned || meta.leased(now)) continue;
    if (meta.softPinned(now, policy.softPinTtlMs)) {
      if (policy.allowEvictSoftPinned && softPinned.length < target) softPinned.push(key);
      continue;
    }
    victims.push(key);
    if (victims.length >= target) return victims;
  }
  // Soft-pinned objects only once no unpinned candidate is left.
  if (exhausted) for (const key of softPinned) if (victims.length < target) victims.push(key);
  return victims;
}

/** Writes begun more than releaseTimeoutMs ago and never finished, oldest first. */
export function selectZombies(inFlight: Map<string, ObjectMeta>, now: number, releaseTimeoutMs: number): string[] {
  const out: string[] = [];
  // In-flight entries are inserted when their write starts, so start times ascend.
  for (const [key, meta] of inFlight) {
    if (now - meta.lastAccess <= releaseTimeoutMs) break;
    out.push(key);
  }
  return out;
}
