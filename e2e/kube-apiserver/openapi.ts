// A minimal OpenAPI v3 discovery: the /openapi/v3 index and one document per group version, listing
// each resource's paths with their group-version-kind and query parameters. That is what kubectl
// checks to decide that the server validates fields itself (`fieldValidation=Strict`), so
// `kubectl apply` works without --validate=false; /openapi/v2 is an empty document. Schemas are not published; kubectl then computes
// apply patches from its compiled-in types (built-ins) or as JSON merge patches (custom resources).

import type { ResourceRegistry, ResourceType } from './resource-registry.js';

type Obj = Record<string, any>;

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

export function openApiIndex(reg: ResourceRegistry): Obj {
  const paths: Obj = {};
  for (const t of reg.all()) {
    const p = gvPath(t.group, t.version);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=${reg.all().length}` };
  }
  return { paths };
}

const QUERY_PARAMS = ['dryRun', 'fieldManager', 'fieldValidation', 'force', 'pretty'].map((name) => ({
  name,
  in: 'query',
  schema: { type: 'string', uniqueItems: true },
}));

function operation(t: ResourceType, action: string): Obj {
  return {
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': { group: t.group, version: t.version, kind: t.kind },
    parameters: QUERY_PARAMS,
    responses: { '200': { description: 'OK' } },
  };
}

/**
 * An empty Swagger 2.0 document for /openapi/v2. kubectl falls back to it for client-side
 * validation of kinds the server does not serve; finding no schema there, it goes on to report
 * `no matches for kind ...` as it would against a real server.
 */
export function openApiV2(): Obj {
  return { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.33.0' }, paths: {}, definitions: {} };
}

/** The same document in the protobuf form kubectl asks for: a gnostic Document with only `swagger = "2.0"` (field 1). */
export const OPENAPI_V2_PROTOBUF = Buffer.from([0x0a, 0x03, 0x32, 0x2e, 0x30]);
export const OPENAPI_V2_PROTOBUF_TYPE = 'application/octet-stream';

/** The OpenAPI v3 document of one group version (undefined when not served). */
export function openApiGroupVersion(reg: ResourceRegistry, group: string, version: string): Obj | undefined {
  const types = reg.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const paths: Obj = {};
  for (const t of types) {
    const base = `/${gvPath(group, version)}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.plural}`;
    paths[base] = { get: operation(t, 'list'), post: operation(t, 'post') };
    paths[`${base}/{name}`] = { get: operation(t, 'get'), put: operation(t, 'put'), patch: operation(t, 'patch'), delete: operation(t, 'delete') };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.33.0' }, paths, components: { schemas: {} } };
}
