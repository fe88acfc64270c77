// The `/scale` subresource: an autoscaling/v1 Scale view of a workload's replica count, for the
// built-in workloads (spec.replicas, status.replicas, the selector rendered as a string) and for
// CRDs that declare subresources.scale (specReplicasPath, statusReplicasPath, labelSelectorPath).

import { badRequest } from './api-error.js';
import { isPlainObject } from './json-patch.js';

type Obj = Record<string, any>;

export interface ScalePaths {
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath?: string;
}

export const WORKLOAD_SCALE: ScalePaths = { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas' };

function segments(path: string): string[] {
  return path.replace(/^\./, '').split('.').filter(Boolean);
}

function getPath(o: Obj, path: string): unknown {
  let cur: unknown = o;
  for (const s of segments(path)) cur = isPlainObject(cur) ? cur[s] : undefined;
  return cur;
}

function selectorString(sel: unknown): string {
  if (!isPlainObject(sel)) return '';
  const parts = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of (sel.matchExpressions ?? []) as Obj[]) {
    const values = (e.values ?? []).join(',');
    if (e.operator === 'In') parts.push(`${e.key} in (${values})`);
    else if (e.operator === 'NotIn') parts.push(`${e.key} notin (${values})`);
    else if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  return parts.join(',');
}

/** The Scale object of `obj`. */
export function toScale(obj: Obj, paths: ScalePaths): Obj {
  const m = obj.metadata;
  const selector = paths.labelSelectorPath ? getPath(obj, paths.labelSelectorPath) : selectorString(obj.spec?.selector);
  const status: Obj = { replicas: Number(getPath(obj, paths.statusReplicasPath) ?? 0) };
  if (selector) status.selector = typeof selector === 'string' ? selector : JSON.stringify(selector);
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: { name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion, creationTimestamp: m.creationTimestamp },
    spec: { replicas: Number(getPath(obj, paths.specReplicasPath) ?? 0) },
    status,
  };
}

/** `obj` with the replica count of a Scale written at specReplicasPath (a new object). */
export function withReplicas(obj: Obj, paths: ScalePaths, scale: unknown): Obj {
  const replicas = isPlainObject(scale) ? scale.spec?.replicas : undefined;
  if (!Number.isInteger(replicas) || replicas < 0) throw badRequest(`Scale.spec.replicas must be a non-negative integer, got ${JSON.stringify(replicas)}`);
  const out = structuredClone(obj);
  const segs = segments(paths.specReplicasPath);
  let cur: Obj = out;
  for (const s of segs.slice(0, -1)) cur = isPlainObject(cur[s]) ? cur[s] : (cur[s] = {});
  cur[segs[segs.length - 1]] = replicas;
  out.metadata.resourceVersion = (scale as Obj).metadata?.resourceVersion || obj.metadata.resourceVersion;
  return out;
}
