// The offline commands: `render` (the objects the operator would create for the StoreClusters
// and StoreSegments in a file) and `inject` (a pod as the webhook would mutate it). Pure text in,
// text out; a CliError carries the readable reasons for exit code 2.
import yaml from 'js-yaml';
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { StoreCluster, StoreSegment } from '../gen/index.js';
import { API_VERSION } from '../api/constants.js';
import { defaultStoreCluster, defaultStoreSegment, type DefaultedStoreCluster, type OperatorDefaults } from '../api/defaults.js';
import { checkCustomResource, type CrdInfo } from '../api/crd-schema.js';
import { validateStoreCluster, validateStoreSegment } from '../api/validation.js';
import { renderCluster, renderSegment } from '../render/render.js';
import { mutatePod } from '../webhook/admission.js';
import { applyPatch } from '../webhook/json-patch.js';

export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

function parseDocs(text: string, file: string): KubernetesObject[] {
  let docs: unknown[];
  try {
    docs = yaml.loadAll(text);
  } catch (e) {
    throw new CliError(`${file}: not valid YAML: ${(e as Error).message}`);
  }
  const out: KubernetesObject[] = [];
  for (const d of docs) {
    if (d === null || d === undefined) continue;
    if (typeof d !== 'object' || Array.isArray(d)) throw new CliError(`${file}: every document must be a Kubernetes object (a mapping with apiVersion and kind)`);
    const o = d as KubernetesObject & { items?: KubernetesObject[] };
    if (o.kind === 'List' && Array.isArray(o.items)) out.push(...o.items);
    else out.push(o);
  }
  return out;
}

const toYaml = (objs: unknown[]) => objs.map((o) => yaml.dump(o, { noRefs: true, lineWidth: -1 })).join('---\n');
const label = (o: KubernetesObject) => `${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name ?? '<unnamed>'}`;

/** The object as written checked against its CRD (schema and CEL rules), as the API server would. */
function schemaErrors(o: KubernetesObject, crds: Map<string, CrdInfo>): string[] {
  const crd = crds.get(o.kind ?? '');
  return crd ? checkCustomResource(o, crd) : [];
}

/** Errors of the object as written and of its defaulted form, each once. */
const both = (raw: string[], defaulted: string[]) => [...new Set([...raw, ...defaulted])];

export function renderCommand(text: string, file: string, defaults: OperatorDefaults, crds: Map<string, CrdInfo>): string {
  const docs = parseDocs(text, file);
  const problems: string[] = [];
  const clusters = new Map<string, DefaultedStoreCluster>();
  const output: unknown[] = [];
  for (const o of docs) {
    if (o.kind !== 'StoreCluster' && o.kind !== 'StoreSegment') {
      problems.push(`${label(o)}: only StoreCluster and StoreSegment (${API_VERSION}) can be rendered`);
      continue;
    }
    let errs = schemaErrors(o, crds);
    if (o.kind === 'StoreCluster') {
      const d = defaultStoreCluster(o as StoreCluster, defaults);
      errs = both(errs, validateStoreCluster(d));
      if (!errs.length) clusters.set(`${d.metadata.namespace}/${d.metadata.name}`, d);
    }
    if (errs.length) problems.push(`${label(o)}:\n${errs.map((e) => `    - ${e}`).join('\n')}`);
  }
  for (const o of docs) {
    if (o.kind === 'StoreCluster') {
      const d = defaultStoreCluster(o as StoreCluster, defaults);
      const c = clusters.get(`${d.metadata.namespace}/${d.metadata.name}`);
      if (c) output.push(...renderCluster(c).desired);
    } else if (o.kind === 'StoreSegment') {
      const s = defaultStoreSegment(o as StoreSegment, defaults);
      const errs = validateStoreSegment(s);
      if (schemaErrors(o, crds).length) continue; // already reported
      const c = clusters.get(`${s.metadata.namespace}/${s.spec.cluster}`);
      if (!c && !docs.some((x) => x.kind === 'StoreCluster' && x.metadata?.name === s.spec.cluster)) errs.push(`spec.cluster: StoreCluster "${s.spec.cluster}" is not in ${file} (render needs it for the master address)`);
      if (errs.length) problems.push(`${label(o)}:\n${errs.map((e) => `    - ${e}`).join('\n')}`);
      else if (c) output.push(...renderSegment(s, c).desired);
    }
  }
  if (problems.length) throw new CliError(`${file} is invalid:\n  ${problems.join('\n  ')}`);
  if (!output.length) throw new CliError(`${file} holds no StoreCluster or StoreSegment`);
  return toYaml(output);
}

/**
 * The pod(s) in `podText` as the webhook would admit them. Clusters come from `clusterText`
 * (StoreCluster documents); without it, a cluster with default settings named by the pod's
 * annotation (or "kvcache") is assumed, as if it existed in the pod's namespace.
 */
export function injectCommand(podText: string, podFile: string, clusterText: string | undefined, clusterFile: string, defaults: OperatorDefaults, crds: Map<string, CrdInfo>): string {
  const clusters: DefaultedStoreCluster[] = [];
  if (clusterText !== undefined) {
    for (const o of parseDocs(clusterText, clusterFile)) {
      if (o.kind !== 'StoreCluster') continue;
      const d = defaultStoreCluster(o as StoreCluster, defaults);
      const errs = both(schemaErrors(o, crds), validateStoreCluster(d));
      if (errs.length) throw new CliError(`${clusterFile}: ${label(o)} is invalid:\n${errs.map((e) => `  - ${e}`).join('\n')}`);
      clusters.push(d);
    }
  }
  const out: unknown[] = [];
  const problems: string[] = [];
  for (const o of parseDocs(podText, podFile)) {
    if (o.kind !== 'Pod') {
      problems.push(`${label(o)}: only Pods can be injected (the webhook mutates pods as they are created)`);
      continue;
    }
    const pod = o as V1Pod;
    const ns = pod.metadata?.namespace ?? defaults.namespace;
    const result = mutatePod(pod, ns, (namespace, name) => {
      if (clusterText === undefined) {
        return defaultStoreCluster({ apiVersion: API_VERSION, kind: 'StoreCluster', metadata: { name: name ?? 'kvcache', namespace }, spec: {} }, defaults);
      }
      const inNs = clusters.filter((c) => c.metadata.namespace === namespace);
      if (name) return inNs.find((c) => c.metadata.name === name) ?? `StoreCluster ${namespace}/${name} not found in ${clusterFile}`;
      if (inNs.length === 1) return inNs[0];
      return inNs.length ? `several StoreClusters in namespace ${namespace}; name one with the annotation` : `no StoreCluster in namespace ${namespace} in ${clusterFile}`;
    });
    if (result.denied) problems.push(`${label(o)}:\n${result.denied.map((e) => `    - ${e}`).join('\n')}`);
    else out.push(applyPatch(pod, result.patch));
  }
  if (problems.length) throw new CliError(`injection refused:\n  ${problems.join('\n  ')}`);
  return toYaml(out);
}
