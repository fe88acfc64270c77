// Finds the HA master leader for a client. master_server_address is either a plain `host:port`
// (returned as is), `etcd://h:p;h:p[/cluster]` or `redis://h:p[/cluster]`: the leader key
// /<cluster>/master/leader written by the elected master (master/ha/) is read and its
// `host:port` returned (the cluster id comes from the path, else MC_STORE_CLUSTER_ID, else
// 'store_cluster', the master's --cluster_id default); or `k8s://[namespace/]lease-name`: the
// leader Lease the masters elect on (k8s-leader-reader.ts). watchLeader polls and reports
// changes, faster while the caller says its master is unreachable.
import { splitHostPort } from '../common/host-port.js';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { ErrorCode } from '../common/error-code.js';
import { leaderKey } from '../master/ha/election-backend.js';
import { parseRedisLeaderValue } from '../master/ha/redis-backend.js';
import { StoreError } from './errors.js';
import { openK8sLeaderReader, parseK8sLeaseAddress, type LeaderReader } from './k8s-leader-reader.js';

export const DEFAULT_CLUSTER_ID = 'store_cluster';
const CALL_TIMEOUT_MS = 2000;
const DEFAULT_POLL_MS = 500;
const DEFAULT_HURRY_POLL_MS = 100;

type Env = Record<string, string | undefined>;

export type MasterAddress =
  | { kind: 'direct'; address: string }
  | { kind: 'etcd'; endpoints: string[]; clusterId: string }
  | { kind: 'redis'; host: string; port: number; clusterId: string }
  /** namespace undefined: POD_NAMESPACE, else the kubeconfig context's, else `default`. */
  | { kind: 'k8s'; namespace?: string; leaseName: string };

function invalid(addr: string, why: string): StoreError {
  return new StoreError(ErrorCode.INVALID_PARAMS, `master_server_address "${addr}": ${why}`);
}

/** Parses master_server_address; throws StoreError(INVALID_PARAMS) with the reason. */
export function parseMasterAddress(addr: string, env: Env = process.env): MasterAddress {
  const a = addr.trim();
  const envCluster = env.MC_STORE_CLUSTER_ID || DEFAULT_CLUSTER_ID;
  if (/^k8s:\/\//i.test(a)) {
    try {
      return { kind: 'k8s', ...parseK8sLeaseAddress(a.slice('k8s://'.length)) };
    } catch (e) {
      throw invalid(addr, (e as Error).message);
    }
  }
  const m = /^(etcd|redis):\/\/([^/]*)(?:\/(.*))?$/.exec(a);
  if (!m) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(a)) throw invalid(addr, 'unknown scheme (expected host:port, etcd://h:p;h:p, redis://h:p or k8s://[namespace/]lease-name)');
    if (!splitHostPort(a)) throw invalid(addr, 'expected host:port');
    return { kind: 'direct', address: a };
  }
  const clusterId = m[3] ? decodeURIComponent(m[3]) : envCluster;
  const hosts = m[2]
    .split(/[;,]/)
    .map((h) => h.trim())
    .filter((h) => h !== '');
  if (hosts.length === 0) throw invalid(addr, `no ${m[1]} endpoint`);
  for (const h of hosts) if (!splitHostPort(h)) throw invalid(addr, `endpoint "${h}" is not host:port`);
  if (m[1] === 'etcd') return { kind: 'etcd', endpoints: hosts.map((h) => `http://${h}`), clusterId };
  if (hosts.length > 1) throw invalid(addr, 'redis:// takes one host:port');
  return { kind: 'redis', ...splitHostPort(hosts[0])!, clusterId };
}

type Discovered = Exclude<MasterAddress, { kind: 'direct' }>;

/** A reusable reader of the leader record. */
function openReader(a: Discovered, env: Env): LeaderReader {
  if (a.kind === 'k8s') return openK8sLeaderReader(a, env);
  const key = leaderKey(a.clusterId);
  const description = a.kind === 'etcd' ? `etcd ${a.endpoints.join(',')} key ${key}` : `redis ${a.host}:${a.port} key ${key}`;
  if (a.kind === 'etcd') {
    const etcd = new Etcd3({ hosts: a.endpoints, dialTimeout: CALL_TIMEOUT_MS, defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + CALL_TIMEOUT_MS }) });
    return {
      description,
      read: async () => (await etcd.get(key).string()) ?? undefined,
      close: () => etcd.close(),
    };
  }
  const redis = new Redis({
    host: a.host,
    port: a.port,
    connectTimeout: CALL_TIMEOUT_MS,
    commandTimeout: CALL_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    retryStrategy: (n) => Math.min(n * 100, 1000),
  });
  redis.on('error', () => undefined); // surfaced by the failing command
  return {
    description,
    read: async () => {
      const v = await redis.get(key);
      return v === null ? undefined : parseRedisLeaderValue(v)?.address;
    },
    close: () => redis.disconnect(),
  };
}

/**
 * The leader's `host:port` for master_server_address. Plain `host:port` returns itself. Throws
 * StoreError UNAVAILABLE_IN_CURRENT_STATUS when no leader is elected or the backend is unreachable.
 */
export async function resolveMasterAddress(addr: string, env: Env = process.env): Promise<string> {
  const a = parseMasterAddress(addr, env);
  if (a.kind === 'direct') return a.address;
  const reader = openReader(a, env);
  try {
    const leader = await reader.read();
    if (!leader) throw new StoreError(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, `no master leader elected yet (${reader.description} names none)`);
    return leader;
  } catch (e) {
    if (e instanceof StoreError) throw e;
    throw new StoreError(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, `cannot read the master leader from ${reader.description}: ${(e as Error).message}`, { cause: e });
  } finally {
    reader.close();
  }
}

export interface WatchOptions {
  env?: Env;
  /** Poll period in ms (default 500). */
  intervalMs?: number;
  /**
   * Asked before each wait: true while the caller cannot reach the leader it was given (its
   * master connection fails), so the next leader is looked for every `hurryIntervalMs`.
   */
  hurry?: () => boolean;
  /** Poll period while `hurry()` says so (default 100 ms). */
  hurryIntervalMs?: number;
  /** Read failures (the previous leader stays reported meanwhile). */
  onError?: (e: Error) => void;
}

/**
 * Calls onChange with the leader's `host:port` now and whenever it changes (undefined while no
 * leader is elected). Returns stop(). A plain host:port reports itself once.
 */
export function watchLeader(addr: string, onChange: (leader: string | undefined) => void, opts: WatchOptions = {}): () => void {
  const a = parseMasterAddress(addr, opts.env ?? process.env);
  if (a.kind === 'direct') {
    queueMicrotask(() => onChange(a.address));
    return () => undefined;
  }
  const reader = openReader(a, opts.env ?? process.env);
  let stopped = false;
  let first = true;
  let last: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const poll = async (): Promise<void> => {
    try {
      const leader = await reader.read();
      if (!stopped && (first || leader !== last)) {
        first = false;
        last = leader;
        onChange(leader);
      }
    } catch (e) {
      if (!stopped) opts.onError?.(e as Error);
    }
    if (!stopped) timer = setTimeout(() => void poll(), opts.hurry?.() ? (opts.hurryIntervalMs ?? DEFAULT_HURRY_POLL_MS) : (opts.intervalMs ?? DEFAULT_POLL_MS));
  };
  void poll();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    reader.close();
  };
}
