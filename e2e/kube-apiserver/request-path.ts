// Parses a Kubernetes REST path into the resource type, namespace, name and subresource it names:
// /api/v1/namespaces/ns/pods/name/status, /apis/group/version/plural, the legacy /watch/ prefix...

import { ApiError } from './api-error.js';
import type { ResourceRegistry, ResourceType } from './resource-registry.js';

export interface ResourceRequest {
  type: ResourceType;
  namespace: string;
  name?: string;
  subresource?: string;
  /** Set by the legacy `/api/v1/watch/...` form. */
  watchPrefix: boolean;
}

function notFoundPath(path: string): ApiError {
  return new ApiError(404, 'NotFound', `the server could not find the requested resource (${path})`);
}

/** Returns undefined for paths that are not resource paths (discovery and the like). */
export function parseResourcePath(reg: ResourceRegistry, pathname: string): ResourceRequest | undefined {
  const segs = pathname.split('/').filter(Boolean).map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === 'api' && segs.length >= 3) {
    group = '';
    version = segs[1];
    rest = segs.slice(2);
  } else if (segs[0] === 'apis' && segs.length >= 4) {
    group = segs[1];
    version = segs[2];
    rest = segs.slice(3);
  } else return undefined;
  let watchPrefix = false;
  if (rest[0] === 'watch') {
    watchPrefix = true;
    rest = rest.slice(1);
  }
  let namespace = '';
  if (rest[0] === 'namespaces' && rest.length >= 3 && group === '' && rest[2] !== 'status' && rest[2] !== 'finalize') {
    namespace = rest[1];
    rest = rest.slice(2);
  } else if (rest[0] === 'namespaces' && rest.length >= 3 && group !== '') {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const type = reg.get(group, version, rest[0]);
  if (!type) throw notFoundPath(pathname);
  if (namespace && !type.namespaced) throw notFoundPath(pathname);
  if (rest.length > 3) throw notFoundPath(pathname);
  const sub = rest[2];
  if (sub !== undefined && !((sub === 'status' && type.hasStatus) || (sub === 'scale' && type.scale))) throw notFoundPath(pathname);
  return { type, namespace, name: rest[1], subresource: sub, watchPrefix };
}
