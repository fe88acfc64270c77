// The resource types the test API server serves: the built-in kinds the project's operator and
// charts use, plus one type per served version of every CustomResourceDefinition once it exists.
// Lookups go by (group, version, plural), by kind, and by short name, as discovery presents them.

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  /** Versions of the same resource that share storage (CRD versions); the first is the storage one. */
  versions: string[];
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  verbs: string[];
  /** Whether a `/status` subresource exists; then main-resource writes ignore `.status`. */
  hasStatus: boolean;
  /** Whether spec changes bump metadata.generation. */
  hasGeneration: boolean;
  /** The openAPIV3Schema of this version (CRDs only). */
  schema?: Record<string, unknown>;
  printerColumns: PrinterColumn[];
  /** Paths of the `/scale` subresource, when the type has one. */
  scale?: ScalePaths;
  /** Extra field-selector paths (a CRD version's selectableFields). */
  selectableFields: string[];
  /** true for CRD-defined types: they take merge and json patches only (no strategic merge). */
  custom: boolean;
}

const ALL_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

import { WORKLOAD_SCALE, type ScalePaths } from './scale-subresource.js';

interface BuiltinSpec {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  hasStatus?: boolean;
  hasGeneration?: boolean;
  printerColumns?: PrinterColumn[];
  scale?: boolean;
}

const BUILTINS: BuiltinSpec[] = [
  {
    group: '',
    version: 'v1',
    plural: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    shortNames: ['ns'],
    hasStatus: true,
    printerColumns: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }],
  },
  {
    group: '',
    version: 'v1',
    plural: 'pods',
    kind: 'Pod',
    namespaced: true,
    shortNames: ['po'],
    categories: ['all'],
    hasStatus: true,
    printerColumns: [
      { name: 'Status', type: 'string', jsonPath: '.status.phase' },
      { name: 'Node', type: 'string', jsonPath: '.spec.nodeName', priority: 1 },
    ],
  },
  {
    group: '',
    version: 'v1',
    plural: 'services',
    kind: 'Service',
    namespaced: true,
    shortNames: ['svc'],
    categories: ['all'],
    hasStatus: true,
    printerColumns: [
      { name: 'Type', type: 'string', jsonPath: '.spec.type' },
      { name: 'Cluster-IP', type: 'string', jsonPath: '.spec.clusterIP' },
    ],
  },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true, shortNames: ['cm'] },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true, printerColumns: [{ name: 'Type', type: 'string', jsonPath: '.type' }] },
  { group: '', version: 'v1', plural: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true, shortNames: ['sa'] },
  {
    group: '',
    version: 'v1',
    plural: 'events',
    kind: 'Event',
    namespaced: true,
    shortNames: ['ev'],
    printerColumns: [
      { name: 'Type', type: 'string', jsonPath: '.type' },
      { name: 'Reason', type: 'string', jsonPath: '.reason' },
      { name: 'Message', type: 'string', jsonPath: '.message' },
    ],
  },
  { group: '', version: 'v1', plural: 'endpoints', kind: 'Endpoints', namespaced: true, shortNames: ['ep'] },
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false, shortNames: ['no'], hasStatus: true },
  { group: '', version: 'v1', plural: 'persistentvolumeclaims', kind: 'PersistentVolumeClaim', namespaced: true, shortNames: ['pvc'], hasStatus: true },
  {
    group: 'apps',
    version: 'v1',
    plural: 'deployments',
    kind: 'Deployment',
    namespaced: true,
    shortNames: ['deploy'],
    categories: ['all'],
    hasStatus: true,
    hasGeneration: true,
    scale: true,
    printerColumns: [
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
      { name: 'Available', type: 'integer', jsonPath: '.status.availableReplicas' },
    ],
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'statefulsets',
    kind: 'StatefulSet',
    namespaced: true,
    shortNames: ['sts'],
    categories: ['all'],
    hasStatus: true,
    hasGeneration: true,
    scale: true,
    printerColumns: [
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas' },
    ],
  },
  { group: 'apps', version: 'v1', plural: 'daemonsets', kind: 'DaemonSet', namespaced: true, shortNames: ['ds'], categories: ['all'], hasStatus: true, hasGeneration: true },
  {
    group: 'apps',
    version: 'v1',
    plural: 'replicasets',
    kind: 'ReplicaSet',
    namespaced: true,
    shortNames: ['rs'],
    categories: ['all'],
    hasStatus: true,
    hasGeneration: true,
    scale: true,
  },
  { group: 'policy', version: 'v1', plural: 'poddisruptionbudgets', kind: 'PodDisruptionBudget', namespaced: true, shortNames: ['pdb'], hasStatus: true, hasGeneration: true },
  { group: 'networking.k8s.io', version: 'v1', plural: 'networkpolicies', kind: 'NetworkPolicy', namespaced: true, shortNames: ['netpol'] },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', kind: 'Role', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'rolebindings', kind: 'RoleBinding', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles', kind: 'ClusterRole', namespaced: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', kind: 'ClusterRoleBinding', namespaced: false },
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    plural: 'leases',
    kind: 'Lease',
    namespaced: true,
    printerColumns: [{ name: 'Holder', type: 'string', jsonPath: '.spec.holderIdentity' }],
  },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    plural: 'mutatingwebhookconfigurations',
    kind: 'MutatingWebhookConfiguration',
    namespaced: false,
    categories: ['api-extensions'],
  },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    plural: 'validatingwebhookconfigurations',
    kind: 'ValidatingWebhookConfiguration',
    namespaced: false,
    categories: ['api-extensions'],
  },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    plural: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    categories: ['api-extensions'],
    hasStatus: true,
    hasGeneration: true,
    printerColumns: [{ name: 'Created At', type: 'string', jsonPath: '.metadata.creationTimestamp' }],
  },
];

function singularOf(kind: string): string {
  return kind.toLowerCase();
}

export function builtinTypes(): ResourceType[] {
  return BUILTINS.map((b) => ({
    group: b.group,
    version: b.version,
    versions: [b.version],
    plural: b.plural,
    singular: singularOf(b.kind),
    kind: b.kind,
    listKind: `${b.kind}List`,
    namespaced: b.namespaced,
    shortNames: b.shortNames ?? [],
    categories: b.categories ?? [],
    verbs: ALL_VERBS,
    hasStatus: b.hasStatus ?? false,
    hasGeneration: b.hasGeneration ?? false,
    printerColumns: b.printerColumns ?? [],
    scale: b.scale ? WORKLOAD_SCALE : undefined,
    selectableFields: [],
    custom: false,
  }));
}

type Obj = Record<string, any>;

/** The resource types a CustomResourceDefinition object defines, one per served version. */
export function typesFromCrd(crd: Obj): ResourceType[] {
  const spec = crd.spec ?? {};
  const names = spec.names ?? {};
  const versions: Obj[] = (spec.versions ?? []).filter((v: Obj) => v.served !== false);
  const storage = (spec.versions ?? []).find((v: Obj) => v.storage) ?? versions[0];
  const ordered = [storage?.name, ...versions.map((v) => v.name).filter((n: string) => n !== storage?.name)].filter(Boolean);
  return versions.map((v) => ({
    group: spec.group,
    version: v.name,
    versions: ordered,
    plural: names.plural,
    singular: names.singular ?? String(names.kind).toLowerCase(),
    kind: names.kind,
    listKind: names.listKind ?? `${names.kind}List`,
    namespaced: spec.scope !== 'Cluster',
    shortNames: names.shortNames ?? [],
    categories: names.categories ?? [],
    verbs: ALL_VERBS,
    hasStatus: Boolean(v.subresources && 'status' in v.subresources),
    hasGeneration: true,
    schema: v.schema?.openAPIV3Schema,
    printerColumns: v.additionalPrinterColumns ?? [],
    scale: v.subresources?.scale,
    selectableFields: (v.selectableFields ?? []).map((f: Obj) => String(f.jsonPath).replace(/^\./, '')),
    custom: true,
  }));
}

/** The mutable set of served resource types. */
export class ResourceRegistry {
  private readonly types = new Map<string, ResourceType>();
  private readonly byCrd = new Map<string, string[]>();

  constructor() {
    for (const t of builtinTypes()) this.add(t);
  }

  private static key(group: string, version: string, plural: string): string {
    return `${group}/${version}/${plural}`;
  }

  private add(t: ResourceType): string {
    const k = ResourceRegistry.key(t.group, t.version, t.plural);
    this.types.set(k, t);
    return k;
  }

  get(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.get(ResourceRegistry.key(group, version, plural));
  }

  all(): ResourceType[] {
    return [...this.types.values()];
  }

  /** Finds the type serving a given apiVersion and kind (for bodies and owner references). */
  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
    return this.all().find((t) => t.group === group && t.version === version && t.kind === kind);
  }

  /** Registers (or re-registers, on update) the types of a CRD, keyed by the CRD's name. */
  setCrd(crdName: string, types: ResourceType[]): void {
    this.removeCrd(crdName);
    this.byCrd.set(
      crdName,
      types.map((t) => this.add(t)),
    );
  }

  removeCrd(crdName: string): void {
    for (const k of this.byCrd.get(crdName) ?? []) this.types.delete(k);
    this.byCrd.delete(crdName);
  }

  groups(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const t of this.types.values()) {
      if (!t.group) continue;
      const vs = out.get(t.group) ?? [];
      if (!vs.includes(t.version)) vs.push(t.version);
      out.set(t.group, vs);
    }
    return out;
  }
}
