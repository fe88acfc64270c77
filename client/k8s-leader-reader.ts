// Reads the HA master leader's address from the Kubernetes Lease the masters elect on
// (master_server_address `k8s://[namespace/]lease-name`, docs/ha.md "Clients"). The address is the
// Lease annotation store.kvcache.io/leader-address, believed while the holder's claim stands by
// the same observation the masters use (common/lease-claim.ts): a Lease released (no holder), or
// seen unchanged for its leaseDurationSeconds on this process's clock, names no leader. A reader
// kept across polls (watchLeader) therefore sees a dead leader's claim run out; a one-shot read
// believes any named holder (as an etcd key is believed until its TTL removes it). Credentials:
// @kubernetes/client-node's default loading (KUBECONFIG, ~/.kube/config, else the pod's service
// account), imported only when a k8s:// address is used (it is large, and an optional dependency
// of the package: without it a k8s:// address fails with INVALID_PARAMS naming it).
import { delimiter } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { ErrorCode } from '../common/error-code.js';
import { LEADER_ADDRESS_ANNOTATION } from '../master/ha/lease-ref.js';
import { StoreError } from './errors.js';

type Env = Record<string, string | undefined>;

export interface K8sLeaseAddress {
  /** Undefined: POD_NAMESPACE, else the kubeconfig context's namespace, else `default`. */
  namespace?: string;
  leaseName: string;
}

export interface LeaderReader {
  read(): Promise<string | undefined>;
  close(): void;
  /** For messages: where the leader is read from. */
  readonly description: string;
}

const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LEASE_NAME = /^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/;

/** `[namespace/]lease-name` (the part after k8s://) -> parts; throws Error with the reason. */
export function parseK8sLeaseAddress(rest: string): K8sLeaseAddress {
  const parts = rest.split('/');
  if (parts.length > 2 || parts.some((p) => p === '')) throw new Error('expected k8s://[namespace/]lease-name');
  const leaseName = parts[parts.length - 1];
  const namespace = parts.length === 2 ? parts[0] : undefined;
  if (namespace !== undefined && (!NAMESPACE.test(namespace) || namespace.length > 63)) throw new Error(`namespace "${namespace}" is not a lowercase DNS label`);
  if (!LEASE_NAME.test(leaseName) || leaseName.length > 253) throw new Error(`lease name "${leaseName}" is not a lowercase DNS name`);
  return { namespace, leaseName };
}

/** The client's Kubernetes credentials: the env's KUBECONFIG (its first file) when given, else the default loading. */
function loadKubeConfig(KubeConfigClass: typeof KubeConfig, env: Env): KubeConfig {
  const kc = new KubeConfigClass();
  const file = env === process.env ? undefined : env.KUBECONFIG?.split(delimiter).find((f) => f !== '');
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}

/** A reader of the Lease `a` (created lazily: the first read loads the credentials). */
export function openK8sLeaderReader(a: K8sLeaseAddress, env: Env, monoNow: () => number = () => performance.now()): LeaderReader {
  const where = `k8s Lease ${a.namespace ?? '(default namespace)'}/${a.leaseName}`;
  let ready: Promise<{ read: () => Promise<string | undefined> }> | undefined;
  const open = async () => {
    const [{ KubeConfig: KC }, { K8sLease }] = await Promise.all([import('@kubernetes/client-node'), import('../common/k8s-lease.js')]).catch((e: unknown) => {
      // An optional dependency of the package (package.json): an application may have left it out.
      if ((e as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && /@kubernetes\/client-node/.test(String(e)))
        throw new StoreError(ErrorCode.INVALID_PARAMS, 'a k8s:// master address needs the optional package @kubernetes/client-node (npm install @kubernetes/client-node)', {
          cause: e,
        });
      throw e;
    });
    const kubeConfig = loadKubeConfig(KC, env);
    const namespace = a.namespace ?? (env.POD_NAMESPACE || kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace || 'default');
    // A reader never writes: an identity no master uses, so every holder is judged by observation.
    const lease = new K8sLease({
      namespace,
      name: a.leaseName,
      identity: `leader-discovery/${process.pid}/${Math.random().toString(36).slice(2)}`,
      kubeConfig,
      monoNow,
      wallNow: Date.now,
    });
    return {
      read: async () => {
        const { lease: l, claim } = await lease.readClaim();
        if (claim.do !== 'wait') return undefined; // no Lease, released, or its claim ran out
        return l?.metadata?.annotations?.[LEADER_ADDRESS_ANNOTATION] || undefined;
      },
    };
  };
  return {
    description: where,
    read: async () => {
      ready ??= open();
      ready.catch(() => (ready = undefined)); // a failed load is tried again on the next read
      return (await ready).read();
    },
    close: () => undefined, // @kubernetes/client-node holds no connection to close
  };
}
