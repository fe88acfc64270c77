// Validation and defaulting of built-in kinds, the subset of the real API server's rules that
// catches mistakes an operator or chart makes: object names (RFC 1123), label syntax, pod
// containers, workload selectors matching template labels, StatefulSet spec immutability,
// Service ports and cluster IP, PodDisruptionBudget exclusivity, CRD names.

import type { StatusCause } from './api-error.js';
import { deepEqual, isPlainObject } from './json-patch.js';
import { parseLabelSelector } from './selector.js';

type Obj = Record<string, any>;

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** Kinds whose names must be DNS-1123 labels rather than subdomains. */
const LABEL_NAMED = new Set(['Namespace', 'Service']);
/** Kinds whose names are only path segments (RBAC allows `system:` names). */
const PATH_NAMED = new Set(['Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']);

export function validateName(kind: string, name: string, field = 'metadata.name'): StatusCause[] {
  if (PATH_NAMED.has(kind)) {
    if (name === '.' || name === '..' || /[/%]/.test(name)) {
      return [{ reason: 'FieldValueInvalid', field, message: `Invalid value: "${name}": may not contain '/' or '%'` }];
    }
    return [];
  }
  if (LABEL_NAMED.has(kind)) {
    if (name.length > 63 || !DNS1123_LABEL.test(name)) {
      return [
        {
          reason: 'FieldValueInvalid',
          field,
          message: `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
        },
      ];
    }
    return [];
  }
  if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) {
    return [
      {
        reason: 'FieldValueInvalid',
        field,
        message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
      },
    ];
  }
  return [];
}

function validateLabelMap(labels: unknown, field: string): StatusCause[] {
  if (labels === undefined || labels === null) return [];
  if (!isPlainObject(labels)) return [{ reason: 'FieldValueTypeInvalid', field, message: 'Invalid value: must be a map of strings' }];
  const out: StatusCause[] = [];
  for (const [k, v] of Object.entries(labels)) {
    const name = k.includes('/') ? k.slice(k.indexOf('/') + 1) : k;
    const prefix = k.includes('/') ? k.slice(0, k.indexOf('/')) : '';
    if (name.length > 63 || !QUALIFIED_NAME.test(name) || (prefix && !DNS1123_SUBDOMAIN.test(prefix))) {
      out.push({
        reason: 'FieldValueInvalid',
        field,
        message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
      });
    }
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) {
      out.push({
        reason: 'FieldValueInvalid',
        field: `${field}`,
        message: `Invalid value: ${JSON.stringify(v)}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
      });
    }
  }
  return out;
}

const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** Labels, annotations (strings, 256 KiB in total) and ownerReferences (complete, one controller). */
export function validateMetadata(obj: Obj): StatusCause[] {
  const out = validateLabelMap(obj.metadata?.labels, 'metadata.labels');
  const ann = obj.metadata?.annotations;
  if (ann !== undefined && ann !== null && (!isPlainObject(ann) || Object.values(ann).some((v) => typeof v !== 'string'))) {
    out.push({ reason: 'FieldValueTypeInvalid', field: 'metadata.annotations', message: 'Invalid value: annotations must be a map of strings' });
  } else if (isPlainObject(ann)) {
    const size = Object.entries(ann).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(String(v)), 0);
    if (size > MAX_ANNOTATIONS_BYTES)
      out.push({ reason: 'FieldValueTooLong', field: 'metadata.annotations', message: `Too long: may not be more than ${MAX_ANNOTATIONS_BYTES} bytes` });
  }
  const refs = obj.metadata?.ownerReferences;
  if (Array.isArray(refs)) {
    refs.forEach((r: Obj, i: number) => {
      for (const f of ['apiVersion', 'kind', 'name', 'uid']) {
        if (!r?.[f]) out.push({ reason: 'FieldValueRequired', field: `metadata.ownerReferences[${i}].${f}`, message: 'Required value' });
      }
    });
    const controllers = refs.filter((r: Obj) => r?.controller === true);
    if (controllers.length > 1) {
      out.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.ownerReferences',
        message: `Invalid value: ${JSON.stringify(controllers)}: Only one reference can have Controller set to true`,
      });
    }
  }
  return out;
}

const PORT_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/**
 * Pod specs (also inside workload templates): containers present with name and image, names
 * unique across init and app containers, volumeMounts naming a declared volume, port names of
 * at most 15 characters, restartPolicy only on init containers (native sidecars).
 */
function validatePodSpec(spec: Obj | undefined, field: string): StatusCause[] {
  const out: StatusCause[] = [];
  if (!spec || !Array.isArray(spec.containers) || spec.containers.length === 0) {
    return [{ reason: 'FieldValueRequired', field: `${field}.containers`, message: 'Required value' }];
  }
  const volumes = new Set(((spec.volumes ?? []) as Obj[]).map((v) => v?.name));
  const seen = new Set<string>();
  const check = (c: Obj, f: string, init: boolean) => {
    if (!c?.name) out.push({ reason: 'FieldValueRequired', field: `${f}.name`, message: 'Required value' });
    else if (seen.has(c.name)) out.push({ reason: 'FieldValueDuplicate', field: `${f}.name`, message: `Duplicate value: "${c.name}"` });
    else seen.add(c.name);
    if (!c?.image) out.push({ reason: 'FieldValueRequired', field: `${f}.image`, message: 'Required value' });
    ((c?.volumeMounts ?? []) as Obj[]).forEach((m, j) => {
      if (!volumes.has(m?.name)) out.push({ reason: 'FieldValueNotFound', field: `${f}.volumeMounts[${j}].name`, message: `Not found: "${m?.name}"` });
    });
    ((c?.ports ?? []) as Obj[]).forEach((pt, j) => {
      if (pt?.name !== undefined && (String(pt.name).length > 15 || !PORT_NAME.test(String(pt.name)))) {
        out.push({
          reason: 'FieldValueInvalid',
          field: `${f}.ports[${j}].name`,
          message: `Invalid value: ${JSON.stringify(pt.name)}: must be no more than 15 characters of lower case alphanumerics or '-'`,
        });
      }
      if (!Number.isInteger(pt?.containerPort) || pt.containerPort < 1 || pt.containerPort > 65535) {
        out.push({
          reason: 'FieldValueInvalid',
          field: `${f}.ports[${j}].containerPort`,
          message: `Invalid value: ${JSON.stringify(pt?.containerPort)}: must be between 1 and 65535, inclusive`,
        });
      }
    });
    if (c?.restartPolicy !== undefined && (!init || c.restartPolicy !== 'Always')) {
      out.push({
        reason: 'FieldValueForbidden',
        field: `${f}.restartPolicy`,
        message: init ? `Unsupported value: ${JSON.stringify(c.restartPolicy)}: supported values: "Always"` : 'Forbidden: may not be set for non-init containers',
      });
    }
  };
  ((spec.initContainers ?? []) as Obj[]).forEach((c, i) => check(c, `${field}.initContainers[${i}]`, true));
  (spec.containers as Obj[]).forEach((c, i) => check(c, `${field}.containers[${i}]`, false));
  return out;
}

function validateWorkload(obj: Obj): StatusCause[] {
  const spec = obj.spec ?? {};
  const out: StatusCause[] = [];
  if (!isPlainObject(spec.selector)) {
    out.push({ reason: 'FieldValueRequired', field: 'spec.selector', message: 'Required value' });
  } else {
    const ml = spec.selector.matchLabels ?? {};
    const sel = parseLabelSelector(
      Object.entries(ml)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    );
    if (!sel(spec.template?.metadata?.labels ?? {})) {
      out.push({ reason: 'FieldValueInvalid', field: 'spec.template.metadata.labels', message: 'Invalid value: `selector` does not match template `labels`' });
    }
  }
  if (spec.replicas !== undefined && (!Number.isInteger(spec.replicas) || spec.replicas < 0)) {
    out.push({ reason: 'FieldValueInvalid', field: 'spec.replicas', message: `Invalid value: ${spec.replicas}: must be greater than or equal to 0` });
  }
  out.push(...validatePodSpec(spec.template?.spec, 'spec.template.spec'));
  return out;
}

const STS_MUTABLE = ['replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy', 'minReadySeconds'];

/** Validates a built-in object; `old` is the stored object on update. */
export function validateBuiltin(kind: string, obj: Obj, old: Obj | undefined): StatusCause[] {
  const out = validateMetadata(obj);
  const spec = obj.spec ?? {};
  switch (kind) {
    case 'Pod':
      out.push(...validatePodSpec(obj.spec, 'spec'));
      break;
    case 'Deployment':
    case 'ReplicaSet':
    case 'DaemonSet':
      out.push(...validateWorkload(obj));
      break;
    case 'StatefulSet':
      out.push(...validateWorkload(obj));
      if (old) {
        const strip = (s: Obj) => Object.fromEntries(Object.entries(s ?? {}).filter(([k]) => !STS_MUTABLE.includes(k)));
        if (!deepEqual(strip(spec), strip(old.spec))) {
          out.push({
            reason: 'FieldValueForbidden',
            field: 'spec',
            message:
              "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
          });
        }
      }
      break;
    case 'Service': {
      const ports: Obj[] = spec.ports ?? [];
      ports.forEach((p, i) => {
        if (!Number.isInteger(p?.port) || p.port < 1 || p.port > 65535) {
          out.push({ reason: 'FieldValueInvalid', field: `spec.ports[${i}].port`, message: `Invalid value: ${JSON.stringify(p?.port)}: must be between 1 and 65535, inclusive` });
        }
        if (ports.length > 1 && !p?.name) out.push({ reason: 'FieldValueRequired', field: `spec.ports[${i}].name`, message: 'Required value' });
      });
      if (old && old.spec?.clusterIP && spec.clusterIP !== old.spec.clusterIP) {
        out.push({ reason: 'FieldValueInvalid', field: 'spec.clusterIPs[0]', message: `Invalid value: ${JSON.stringify(spec.clusterIP)}: may not change once set` });
      }
      break;
    }
    case 'PodDisruptionBudget':
      if (spec.minAvailable !== undefined && spec.maxUnavailable !== undefined) {
        out.push({ reason: 'FieldValueInvalid', field: 'spec', message: `Invalid value: ${JSON.stringify(spec)}: minAvailable and maxUnavailable cannot be both set` });
      }
      break;
    case 'CustomResourceDefinition':
      out.push(...validateCrd(obj));
      break;
  }
  return out;
}

function validateCrd(obj: Obj): StatusCause[] {
  const out: StatusCause[] = [];
  const spec = obj.spec ?? {};
  const names = spec.names ?? {};
  if (!spec.group) out.push({ reason: 'FieldValueRequired', field: 'spec.group', message: 'Required value' });
  if (!names.plural) out.push({ reason: 'FieldValueRequired', field: 'spec.names.plural', message: 'Required value' });
  if (!names.kind) out.push({ reason: 'FieldValueRequired', field: 'spec.names.kind', message: 'Required value' });
  if (spec.scope !== 'Namespaced' && spec.scope !== 'Cluster') {
    out.push({ reason: 'FieldValueNotSupported', field: 'spec.scope', message: `Unsupported value: ${JSON.stringify(spec.scope)}: supported values: "Cluster", "Namespaced"` });
  }
  if (names.plural && spec.group && obj.metadata?.name !== `${names.plural}.${spec.group}`) {
    out.push({ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: ${JSON.stringify(obj.metadata?.name)}: must be spec.names.plural+"."+spec.group` });
  }
  const versions: Obj[] = spec.versions ?? [];
  if (versions.length === 0) out.push({ reason: 'FieldValueRequired', field: 'spec.versions', message: 'Required value' });
  if (versions.length > 0 && versions.filter((v) => v.storage).length !== 1) {
    out.push({ reason: 'FieldValueInvalid', field: 'spec.versions', message: 'Invalid value: must have exactly one version marked as storage version' });
  }
  versions.forEach((v, i) => {
    const s = v.schema?.openAPIV3Schema;
    if (!isPlainObject(s)) out.push({ reason: 'FieldValueRequired', field: `spec.versions[${i}].schema.openAPIV3Schema`, message: 'Required value: schemas are required' });
    else if (s.type !== 'object')
      out.push({
        reason: 'FieldValueInvalid',
        field: `spec.versions[${i}].schema.openAPIV3Schema.type`,
        message: `Invalid value: ${JSON.stringify(s.type)}: must be object at the root`,
      });
  });
  return out;
}

/** Server-side defaults the real API server fills in (Secret type, Services); `allocateIp` hands out cluster IPs. */
export function defaultBuiltin(kind: string, obj: Obj, old: Obj | undefined, allocateIp: () => string): void {
  if (kind === 'Secret') obj.type ??= 'Opaque';
  if (kind !== 'Service') return;
  const spec = (obj.spec ??= {});
  spec.type ??= 'ClusterIP';
  spec.sessionAffinity ??= 'None';
  if (!spec.clusterIP && old?.spec?.clusterIP) spec.clusterIP = old.spec.clusterIP;
  if (!spec.clusterIP && spec.type !== 'ExternalName') {
    spec.clusterIP = allocateIp();
  }
  if (spec.clusterIP && !spec.clusterIPs) spec.clusterIPs = [spec.clusterIP];
  for (const p of spec.ports ?? []) {
    if (!isPlainObject(p)) continue;
    p.protocol ??= 'TCP';
    p.targetPort ??= p.port;
  }
}
