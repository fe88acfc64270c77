// The offline commands: `render` (the objects the operator would create for the StoreClusters
// and StoreSegments in a file) and `inject` (a pod as the webhook would mutate it). Pure text in,
// text out; a CliError carries the readable reasons for exit code 2.
import { CliError } from './cli-error.js';
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

export { CliError };

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

/** One -f input (or --cluster-file): its name for messages and its text. */
export interface Source {
  file: string;
  text: string;
}

interface Doc {
  o: KubernetesObject;
  file: string;
}

/** With one input, messages need not name it per object. */
const noteFor = (inputs: number) => (file: string) => (inputs > 1 ? ` (${file})` : '');
const docsOf = (sources: Source[]): Doc[] => sources.flatMap((s) => parseDocs(s.text, s.file).map((o) => ({ o, file: s.file })));
const inputsNamed = (sources: Source[]) => sources.map((s) => s.file).join(', ');

/** The valid StoreClusters among `docs`, by namespace/name; problems of invalid ones go to `problems`. */
function clustersOf(
  docs: Doc[],
  defaults: OperatorDefaults,
  crds: Map<string, CrdInfo>,
  problems: string[],
  fileNote: (file: string) => string,
): Map<string, DefaultedStoreCluster> {
  const clusters = new Map<string, DefaultedStoreCluster>();
  for (const { o, file } of docs) {
    if (o.kind !== 'StoreCluster') continue;
    const d = defaultStoreCluster(o as StoreCluster, defaults);
    const errs = both(schemaErrors(o, crds), validateStoreCluster(d));
    if (errs.length) problems.push(`${label(o)}${fileNote(file)}:\n${errs.map((e) => `    - ${e}`).join('\n')}`);
    else clusters.set(`${d.metadata.namespace}/${d.metadata.name}`, d);
  }
  return clusters;
}

/**
 * The objects the operator would create for the StoreClusters and StoreSegments in `sources`.
 * A StoreSegment's cluster is looked up among the inputs and `context` (--cluster-file), whose
 * own objects are not rendered.
 */
export function renderCommand(sources: Source[], context: Source[], defaults: OperatorDefaults, crds: Map<string, CrdInfo>): string {
  const fileNote = noteFor(sources.length + context.length);
  const docs = docsOf(sources);
  const problems: string[] = [];
  for (const { o, file } of docs) {
    if (o.kind !== 'StoreCluster' && o.kind !== 'StoreSegment') problems.push(`${label(o)}${fileNote(file)}: only StoreCluster and StoreSegment (${API_VERSION}) can be rendered`);
  }
  const clusters = clustersOf(docs, defaults, crds, problems, fileNote);
  const known = new Map([...clustersOf(docsOf(context), defaults, crds, problems, fileNote), ...clusters]);
  const named = (ns: string, name: string) =>
    [...docs, ...docsOf(context)].some(({ o }) => o.kind === 'StoreCluster' && o.metadata?.name === name && (o.metadata?.namespace ?? defaults.namespace) === ns);
  const output: unknown[] = [];
  for (const { o, file } of docs) {
    if (o.kind === 'StoreCluster') {
      const d = defaultStoreCluster(o as StoreCluster, defaults);
      const c = clusters.get(`${d.metadata.namespace}/${d.metadata.name}`);
      if (c) output.push(...renderCluster(c).desired);
    } else if (o.kind === 'StoreSegment') {
      const s = defaultStoreSegment(o as StoreSegment, defaults);
      const schema = schemaErrors(o, crds);
      const errs = both(schema, validateStoreSegment(s));
      const c = known.get(`${s.metadata.namespace}/${s.spec.cluster}`);
      if (!c && !named(s.metadata.namespace, s.spec.cluster)) {
        errs.push(
          `spec.cluster: StoreCluster "${s.spec.cluster}" (namespace ${s.metadata.namespace}) is not among ${inputsNamed([...sources, ...context])}: render needs it for the master address (add it with -f or --cluster-file)`,
        );
      }
      if (errs.length) problems.push(`${label(o)}${fileNote(file)}:\n${errs.map((e) => `    - ${e}`).join('\n')}`);
      else if (c) output.push(...renderSegment(s, c).desired);
    }
  }
  if (problems.length) throw new CliError(`${inputsNamed(sources)} ${sources.length > 1 ? 'are' : 'is'} invalid:\n  ${problems.join('\n  ')}`);
  if (!output.length) throw new CliError(`${inputsNamed(sources)} ${sources.length > 1 ? 'hold' : 'holds'} no StoreCluster or StoreSegment`);
  return toYaml(output);
}

/**
 * The pod(s) in `sources` as the webhook would admit them. Their StoreClusters come from the
 * inputs or `context` (--cluster-file); without any, inject refuses: it never assumes a cluster's
 * master or metadata server.
 */
export function injectCommand(sources: Source[], context: Source[], defaults: OperatorDefaults, crds: Map<string, CrdInfo>): string {
  const fileNote = noteFor(sources.length + context.length);
  const docs = docsOf(sources);
  const problems: string[] = [];
  const clusters = [...clustersOf([...docs, ...docsOf(context)], defaults, crds, problems, fileNote).values()];
  if (problems.length) throw new CliError(`invalid StoreCluster:\n  ${problems.join('\n  ')}`);
  if (clusters.length === 0) {
    throw new CliError(`no StoreCluster among ${inputsNamed([...sources, ...context])}: the sidecar's master and metadata server come from it (add it with -f or --cluster-file)`);
  }
  const where = inputsNamed([...sources, ...context]);
  const out: unknown[] = [];
  for (const { o } of docs) {
    if (o.kind === 'StoreCluster') continue;
    if (o.kind !== 'Pod') {
      problems.push(`${label(o)}: only Pods can be injected (the webhook mutates pods as they are created)`);
      continue;
    }
    const pod = o as V1Pod;
    const ns = pod.metadata?.namespace ?? defaults.namespace;
    const result = mutatePod(pod, ns, (namespace, name) => {
      const inNs = clusters.filter((c) => c.metadata.namespace === namespace);
      if (name) return inNs.find((c) => c.metadata.name === name) ?? `StoreCluster ${namespace}/${name} not found in ${where}`;
      if (inNs.length === 1) return inNs[0];
      return inNs.length ? `several StoreClusters in namespace ${namespace}; name one with the annotation` : `no StoreCluster in namespace ${namespace} in ${where}`;
    });
    if (result.denied) problems.push(`${label(o)}:\n${result.denied.map((e) => `    - ${e}`).join('\n')}`);
    else out.push(applyPatch(pod, result.patch));
  }
  if (problems.length) throw new CliError(`injection refused:\n  ${problems.join('\n  ')}`);
  if (out.length === 0) throw new CliError(`${inputsNamed(sources)}: no Pod to inject`);
  return toYaml(out);
}
