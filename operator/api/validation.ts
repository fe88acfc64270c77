// Pure validation of StoreCluster and StoreSegment specs beyond what the CRD schema can say
// (rendered names fit, ports do not clash, sizes are sane). Every validator returns every error
// it finds, each naming the field, so one round trip shows the user all that is wrong.
import type { DefaultedStoreCluster, DefaultedStoreSegment } from './defaults.js';
import { parseQuantity } from './quantity.js';

const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
/** The longest suffix the operator appends to a StoreCluster name ("-master-metadata"). */
const LONGEST_CLUSTER_SUFFIX = '-master-metadata'.length;
const MANAGED_FLAGS = new Set(['rpc_port', 'metrics_port', 'enable_ha', 'ha_backend_type', 'ha_backend_connstring', 'etcd_endpoints', 'cluster_id', 'config_path']);
const DURATION = /^[0-9]+(ms|s|m|h)$/;

export class ValidationError extends Error {
  constructor(readonly object: string, readonly errors: string[]) {
    super(`${object} is invalid:\n${errors.map((e) => `  - ${e}`).join('\n')}`);
    this.name = 'ValidationError';
  }
}

function checkName(name: string, kind: string, maxLen: number, errors: string[]): void {
  if (!name) errors.push('metadata.name: required');
  else if (!DNS1035.test(name)) errors.push(`metadata.name: "${name}" must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter) because ${kind} names become Service names`);
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

export function validateStoreCluster(sc: DefaultedStoreCluster): string[] {
  const errors: string[] = [];
  const { master, metadataServer: md, sidecar } = sc.spec;
  checkName(sc.metadata.name, 'StoreCluster', 63 - LONGEST_CLUSTER_SUFFIX, errors);
  if (!Number.isInteger(master.replicas) || master.replicas < 1 || master.replicas > 7) errors.push(`spec.master.replicas: ${master.replicas} must be an integer from 1 to 7`);
  if (master.replicas > 1 && !master.haBackend) errors.push('spec.master.haBackend: required when master.replicas > 1 (e.g. {type: k8s})');
  if (master.haBackend && master.haBackend.type !== 'k8s' && !master.haBackend.connstring) errors.push(`spec.master.haBackend.connstring: required for the ${master.haBackend.type} backend`);
  if (md.type === 'http' && master.replicas > 1) errors.push("spec.metadataServer.type: 'http' is embedded in the master and has no HA; use p2p, etcd or redis when master.replicas > 1");
  if ((md.type === 'etcd' || md.type === 'redis') && !md.address) errors.push(`spec.metadataServer.address: required for the ${md.type} type`);
  const ports: [string, number][] = [['spec.master.rpcPort', master.rpcPort], ['spec.master.metricsPort', master.metricsPort]];
  if (md.type === 'http') ports.push(['spec.metadataServer.port', md.port]);
  for (const [f, p] of ports) if (!Number.isInteger(p) || p < 1 || p > 65535) errors.push(`${f}: ${p} is not a port (1-65535)`);
  for (let i = 0; i < ports.length; i++)
    for (let j = i + 1; j < ports.length; j++)
      if (ports[i][1] === ports[j][1]) errors.push(`${ports[j][0]}: ${ports[j][1]} is already used by ${ports[i][0]}`);
  if (sidecar.httpPort === sidecar.rpcPort) errors.push(`spec.sidecar.rpcPort: ${sidecar.rpcPort} is already used by spec.sidecar.httpPort`);
  for (const [f, v] of [['defaultKvLeaseTtl', master.defaultKvLeaseTtl], ['clientTtl', master.clientTtl]] as const)
    if (v !== undefined && !DURATION.test(v)) errors.push(`spec.master.${f}: "${v}" is not a duration like 5000ms, 5s, 30m or 1h`);
  for (const [f, v] of [['evictionRatio', master.evictionRatio], ['evictionHighWatermarkRatio', master.evictionHighWatermarkRatio]] as const)
    if (v !== undefined && !(v >= 0 && v <= 1)) errors.push(`spec.master.${f}: ${v} must be between 0 and 1`);
  for (const key of Object.keys(master.extraFlags ?? {})) {
    if (!/^[a-z][a-z0-9_]*$/.test(key)) errors.push(`spec.master.extraFlags: "${key}" is not a flag name (lower_snake_case, without dashes)`);
    else if (MANAGED_FLAGS.has(key)) errors.push(`spec.master.extraFlags: "${key}" is set by the operator from the typed fields; set those instead`);
  }
  checkQuantity('spec.sidecar.globalSegmentSize', sidecar.globalSegmentSize, 0, errors);
  checkQuantity('spec.sidecar.localBufferSize', sidecar.localBufferSize, 0, errors);
  return errors;
}

const HUGE_PAGE_BYTES = { '2Mi': 2 ** 21, '1Gi': 2 ** 30 } as const;

export function validateStoreSegment(ss: DefaultedStoreSegment): string[] {
  const errors: string[] = [];
  const { memory } = ss.spec;
  checkName(ss.metadata.name, 'StoreSegment', 52, errors);
  if (!ss.spec.cluster) errors.push('spec.cluster: required (the name of a StoreCluster in the same namespace)');
  if (!Number.isInteger(ss.spec.replicas) || ss.spec.replicas < 0) errors.push(`spec.replicas: ${ss.spec.replicas} must be a non-negative integer`);
  if (ss.spec.size === undefined) errors.push('spec.size: required (bytes each pod contributes, e.g. 64Gi)');
  const size = checkQuantity('spec.size', ss.spec.size, 1, errors);
  if (memory.kind === 'hugepage') {
    const page = HUGE_PAGE_BYTES[memory.hugePageSize ?? '2Mi'];
    if (page === undefined) errors.push(`spec.memory.hugePageSize: "${memory.hugePageSize}" must be 2Mi or 1Gi`);
    else if (size !== undefined && size % page !== 0) errors.push(`spec.memory: size ${ss.spec.size} is not a whole number of ${memory.hugePageSize} huge pages`);
  } else if (memory.hugePageSize !== undefined) errors.push('spec.memory.hugePageSize: applies only to memory.kind hugepage');
  if (memory.kind === 'dax') {
    if (!memory.devicePath) errors.push('spec.memory.devicePath: required when memory.kind is dax (e.g. /dev/dax0.0)');
    else if (!/^\/dev\/dax[0-9]+\.[0-9]+$/.test(memory.devicePath)) errors.push(`spec.memory.devicePath: "${memory.devicePath}" is not a DAX device path like /dev/dax0.0`);
  } else if (memory.devicePath !== undefined) errors.push('spec.memory.devicePath: applies only to memory.kind dax');
  if (!['shm', 'hugepage', 'dax'].includes(memory.kind)) errors.push(`spec.memory.kind: "${memory.kind}" must be shm, hugepage or dax`);
  return errors;
}
