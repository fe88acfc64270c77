// Label selectors (`a=b,c!=d,e in (x,y),f notin (z),g,!h`) and field selectors
// (`metadata.name=x,metadata.namespace!=y`) as the list and watch verbs accept them.

import { badRequest } from './api-error.js';

type Requirement = { key: string; op: 'eq' | 'neq'; value: string } | { key: string; op: 'in' | 'notin'; values: string[] } | { key: string; op: 'exists' | 'notexists' };

export type Selector = (labels: Record<string, string>) => boolean;

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((p) => p.trim()).filter((p) => p.length > 0);
}

function parseRequirement(term: string): Requirement {
  let m = /^([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
  if (m)
    return {
      key: m[1],
      op: m[2] as 'in' | 'notin',
      values: m[3]
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean),
    };
  m = /^([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=()]*)$/.exec(term);
  if (m) return { key: m[1], op: m[2] === '!=' ? 'neq' : 'eq', value: m[3] };
  m = /^!\s*([^\s!=()]+)$/.exec(term);
  if (m) return { key: m[1], op: 'notexists' };
  m = /^([^\s!=()]+)$/.exec(term);
  if (m) return { key: m[1], op: 'exists' };
  throw badRequest(`unable to parse requirement: ${term}`);
}

function matches(r: Requirement, labels: Record<string, string>): boolean {
  const has = Object.prototype.hasOwnProperty.call(labels, r.key);
  switch (r.op) {
    case 'eq':
      return has && labels[r.key] === r.value;
    case 'neq':
      return !has || labels[r.key] !== r.value;
    case 'in':
      return has && r.values.includes(labels[r.key]);
    case 'notin':
      return !has || !r.values.includes(labels[r.key]);
    case 'exists':
      return has;
    case 'notexists':
      return !has;
  }
}

export function parseLabelSelector(s: string | null | undefined): Selector {
  if (!s) return () => true;
  const reqs = splitTopLevel(s).map(parseRequirement);
  return (labels) => reqs.every((r) => matches(r, labels ?? {}));
}

/** Fields beyond metadata.name/namespace that the real server lets each built-in kind select on. */
const KIND_FIELDS: Record<string, string[]> = {
  Event: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
  Pod: ['spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName', 'spec.hostNetwork', 'status.phase', 'status.podIP', 'status.nominatedNodeName'],
  Secret: ['type'],
  Namespace: ['status.phase'],
  Node: ['spec.unschedulable'],
  ReplicaSet: ['status.replicas'],
};

function fieldValue(obj: Record<string, any>, path: string): string {
  if (path === 'metadata.namespace') return obj.metadata?.namespace ?? '';
  if (path === 'source') return obj.source?.component ?? '';
  let cur: any = obj;
  for (const p of path.split('.')) cur = cur === undefined || cur === null ? undefined : cur[p];
  return cur === undefined || cur === null ? '' : String(cur);
}

/**
 * Field selectors: metadata.name and metadata.namespace for every type, the kind-specific
 * fields of KIND_FIELDS, and a CRD version's selectableFields (`extra`). Others are a 400.
 */
export function parseFieldSelector(s: string | null | undefined, kind = '', extra: string[] = []): (obj: Record<string, any>) => boolean {
  if (!s) return () => true;
  const allowed = new Set(['metadata.name', 'metadata.namespace', ...(KIND_FIELDS[kind] ?? []), ...extra]);
  const reqs = splitTopLevel(s).map((term) => {
    const m = /^([^\s!=]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw badRequest(`invalid selector: '${s}'; can't understand '${term}'`);
    const field = m[1];
    if (!allowed.has(field)) throw badRequest(`field label not supported: ${field}`);
    return { field, neq: m[2] === '!=', value: m[3] };
  });
  return (obj) =>
    reqs.every((r) => {
      const v = fieldValue(obj, r.field);
      return r.neq ? v !== r.value : v === r.value;
    });
}
