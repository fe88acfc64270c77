// Checks a StoreCluster or StoreSegment against its CustomResourceDefinition in crds/ the way the
// API server does, with the module the test API server uses (common/structural-schema.ts): the
// CRD's defaults are applied, unknown fields reported, the structural schema validated and the
// CRD's own x-kubernetes-validations CEL rules evaluated (common/cel-rules.ts). Every violation
// comes back as "<field>: <message>", the rule's message for a CEL rule.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import { evalRule } from '../../common/cel-rules.js';
import { applyDefaults, prune, validate, type Schema } from '../../common/structural-schema.js';

export type { Schema };

export interface CrdInfo {
  kind: string;
  apiVersion: string;
  schema: Schema;
}

const CRD_FILES = ['store.kvcache.io_storeclusters.yaml', 'store.kvcache.io_storesegments.yaml'];

/** Finds crds/ (beside the sources or the compiled dist/) and loads each CRD's storage schema. */
export function loadCrdSchemas(dir?: string): Map<string, CrdInfo> {
  let d = dir;
  if (!d) {
    let here = dirname(fileURLToPath(import.meta.url));
    for (let i = 0; i < 5 && !existsSync(join(here, 'crds', CRD_FILES[0])); i++) here = dirname(here);
    d = join(here, 'crds');
  }
  const out = new Map<string, CrdInfo>();
  for (const f of CRD_FILES) {
    const crd = yaml.load(readFileSync(join(d, f), 'utf8')) as any;
    const v = crd.spec.versions.find((x: any) => x.storage);
    out.set(crd.spec.names.kind, { kind: crd.spec.names.kind, apiVersion: `${crd.spec.group}/${v.name}`, schema: v.schema.openAPIV3Schema });
  }
  return out;
}

let installed: Map<string, CrdInfo> | undefined;
/** The CRDs shipped in crds/, loaded once. */
export function shippedCrds(): Map<string, CrdInfo> {
  installed ??= loadCrdSchemas();
  return installed;
}

/**
 * Every violation of `obj` against `crd` (apiVersion, unknown fields, schema, CEL rules), each as
 * "<field>: <message>"; [] when the API server would accept it.
 */
export function checkCustomResource(obj: unknown, crd: CrdInfo): string[] {
  const errors: string[] = [];
  const apiVersion = (obj as { apiVersion?: unknown } | null)?.apiVersion;
  if (apiVersion !== crd.apiVersion) errors.push(`apiVersion: ${JSON.stringify(apiVersion)} must be ${crd.apiVersion}`);
  // As JSON, as the API server receives it (no undefined-valued keys).
  const { value, dropped } = prune(crd.schema, JSON.parse(JSON.stringify(obj ?? null)));
  for (const p of dropped) errors.push(`${p}: unknown field`);
  for (const c of validate(crd.schema, applyDefaults(crd.schema, value), undefined, evalRule)) errors.push(`${c.field}: ${c.message}`);
  return errors;
}
