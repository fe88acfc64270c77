// Validation of StoreCluster and StoreSegment objects: first what the API server itself checks,
// from the CRDs in crds/ (schema and their x-kubernetes-validations CEL rules, crd-schema.ts), then
// what the CRDs do not state and only the operator knows: rendered names fit in 63 characters,
// ports do not clash, extraFlags do not override the flags the operator manages, quantities are
// sane (huge-page multiples need quantity arithmetic the CEL library lacks). Every validator
// returns every error it finds, each naming its field, so one round trip shows all that is wrong;
// a field the CRD check already faults is not faulted twice.
import { checkCustomResource, shippedCrds } from './crd-schema.js';
import type { DefaultedStoreCluster, DefaultedStoreSegment } from './defaults.js';
import { parseQuantity } from './quantity.js';

const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
/** The longest suffix the operator appends to a StoreCluster name ("-master-metadata"). */
const LONGEST_CLUSTER_SUFFIX = '-master-metadata'.length;
const MANAGED_FLAGS = new Set(['rpc_port', 'metrics_port', 'enable_ha', 'ha_backend_type', 'ha_backend_connstring', 'etcd_endpoints', 'cluster_id', 'config_path']);

export class ValidationError extends Error {
  constructor(
    readonly object: string,
    readonly errors: string[],
  ) {
    super(`${object} is invalid:\n${errors.map((e) => `  - ${e}`).join('\n')}`);
    this.name = 'ValidationError';
  }
}

function checkName(name: string, kind: string, maxLen: number, errors: string[]): void {
  if (!name) errors.push('metadata.name: required');
  else if (!DNS1035.test(name))
    errors.push(`metadata.name: "${name}" must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter) because ${kind} names become Service names`);
  else if (name.length > maxLen) errors.push(`metadata.name: "${name}" is ${name.length} characters; at most ${maxLen} so the derived object names fit in 63`);
}

function checkQuantity(field: string, q: number | string | undefined, min: number, errors: string[]): number | undefined {
  if (q === undefined) return undefined;
  try {
    const bytes = parseQuantity(q);
    if (bytes < min) errors.push(`${field}: ${q} is below the minimum of ${min} bytes`);
    return bytes;
  } catch (e) {
    errors.push(`${field}: ${(e as Error).message}`);
    return undefined;
  }
}

/** The CRD's errors, then the operator's own on fields the CRD check left alone. */
function merge(crdErrors: string[], own: string[]): string[] {
  const faulted = new Set(crdErrors.map((e) => e.slice(0, e.indexOf(':'))));
  return [...crdErrors, ...own.filter((e) => !faulted.has(e.slice(0, e.indexOf(':'))))];
}

export function validateStoreCluster(sc: DefaultedStoreCluster): string[] {
  const errors: string[] = [];
  const { master, metadataServer: md, sidecar } = sc.spec;
  checkName(sc.metadata.name, 'StoreCluster', 63 - LONGEST_CLUSTER_SUFFIX, errors);
  const ports: [string, number][] = [
    ['spec.master.rpcPort', master.rpcPort],
    ['spec.master.metricsPort', master.metricsPort],
  ];
  if (md.type === 'http') ports.push(['spec.metadataServer.port', md.port]);
  for (let i = 0; i < ports.length; i++)
    for (let j = i + 1; j < ports.length; j++) if (ports[i][1] === ports[j][1]) errors.push(`${ports[j][0]}: ${ports[j][1]} is already used by ${ports[i][0]}`);
  if (sidecar.httpPort === sidecar.rpcPort) errors.push(`spec.sidecar.rpcPort: ${sidecar.rpcPort} is already used by spec.sidecar.httpPort`);
  for (const key of Object.keys(master.extraFlags ?? {})) {
    if (!/^[a-z][a-z0-9_]*$/.test(key)) errors.push(`spec.master.extraFlags: "${key}" is not a flag name (lower_snake_case, without dashes)`);
    else if (MANAGED_FLAGS.has(key)) errors.push(`spec.master.extraFlags: "${key}" is set by the operator from the typed fields; set those instead`);
  }
  checkQuantity('spec.sidecar.globalSegmentSize', sidecar.globalSegmentSize, 0, errors);
  checkQuantity('spec.sidecar.localBufferSize', sidecar.localBufferSize, 0, errors);
  return merge(checkCustomResource(sc, shippedCrds().get('StoreCluster')!), errors);
}

const HUGE_PAGE_BYTES: Record<string, number> = { '2Mi': 2 ** 21, '1Gi': 2 ** 30 };

export function validateStoreSegment(ss: DefaultedStoreSegment): string[] {
  const errors: string[] = [];
  const { memory } = ss.spec;
  checkName(ss.metadata.name, 'StoreSegment', 52, errors);
  const size = checkQuantity('spec.size', ss.spec.size, 1, errors);
  const page = HUGE_PAGE_BYTES[memory.hugePageSize ?? '2Mi'];
  if (memory.kind === 'hugepage' && page !== undefined && size !== undefined && size % page !== 0) {
    errors.push(`spec.size: ${ss.spec.size} is not a whole number of ${memory.hugePageSize ?? '2Mi'} huge pages`);
  }
  return merge(checkCustomResource(ss, shippedCrds().get('StoreSegment')!), errors);
}
