// Where the `store` CLI finds the store: the master's RPC address (flag, else STORE_MASTER_ADDRESS,
// which the sidecar webhook sets; host:port or the HA forms etcd://... / redis://..., resolved to
// the leader by client/leader-discovery.ts), the master's HTTP admin address (flag, else
// STORE_MASTER_HTTP_ADDRESS, else derived: the master publishes only its RPC address, so the
// leader's host with the master's default --metrics_port, 9003) and a store service's REST
// address, and the metadata service of put/get's embedded client. Pure but for the leader lookup. client/leader-discovery.ts (etcd3 and ioredis: about
// 250 ms of module loading) is imported only for an address that needs it.
import { joinHostPort, splitHostPort } from '../common/host-port.js';
import { StoreError } from '../client/errors.js';
import { UnreachableError, UsageError } from './cli-errors.js';
import type { GlobalOptions } from './args.js';

type Env = Record<string, string | undefined>;

/** The master's default --metrics_port (docs/master.md), used when the HTTP address is derived. */
export const DEFAULT_MASTER_HTTP_PORT = 9003;
/** The store service's default --port: where an injected sidecar serves its REST API. */
export const DEFAULT_SERVICE_URL = 'http://127.0.0.1:8080';

export const ENV = {
  master: 'STORE_MASTER_ADDRESS',
  masterHttp: 'STORE_MASTER_HTTP_ADDRESS',
  metadata: 'STORE_METADATA_SERVER',
  service: 'STORE_SERVICE_HTTP_ADDRESS',
} as const;

/** A plain host:port (no scheme): no leader lookup, so no HA client libraries to load. */
function plainHostPort(a: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:\/\//i.test(a.trim()) && splitHostPort(a.trim()) !== undefined;
}

/** The master address as given (not resolved); a UsageError when there is none or it is malformed. */
export async function masterAddress(g: GlobalOptions, env: Env): Promise<string> {
  const a = g.master || env[ENV.master]; // an empty variable is unset
  if (!a) throw new UsageError(`no master address: give --master host:port (or etcd://..., redis://..., k8s://...) or set ${ENV.master}`);
  if (plainHostPort(a)) return a;
  const { parseMasterAddress } = await import('../client/leader-discovery.js');
  try {
    parseMasterAddress(a, env);
  } catch (e) {
    throw new UsageError(`--master: ${(e as Error).message}`);
  }
  return a;
}

/** The leader's host:port for the master address (itself for host:port). */
export async function resolveMaster(g: GlobalOptions, env: Env): Promise<string> {
  const a = await masterAddress(g, env);
  if (plainHostPort(a)) return a.trim();
  const { resolveMasterAddress } = await import('../client/leader-discovery.js');
  try {
    return await resolveMasterAddress(a, env);
  } catch (e) {
    if (e instanceof StoreError) throw new UnreachableError(e.message, { cause: e });
    throw e;
  }
}

/** An http:// base URL (no trailing slash) from "http://h:p", "h:p" or "http://h:p/". */
export function httpBase(what: string, text: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new UsageError(`${what} "${text}": not an http://host:port address`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`${what} "${text}": expected http://host:port`);
  if (!url.hostname) throw new UsageError(`${what} "${text}": no host`);
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}`;
}

/**
 * The master's HTTP admin base URL: --master-http, else STORE_MASTER_HTTP_ADDRESS, else the
 * (leader's) RPC host on port 9003. `leader` is asked only when the address must be derived.
 */
export async function masterHttp(g: GlobalOptions, env: Env, leader: () => Promise<string> = () => resolveMaster(g, env)): Promise<string> {
  if (g.masterHttp) return httpBase('--master-http', g.masterHttp);
  const fromEnv = env[ENV.masterHttp];
  if (fromEnv) return httpBase(ENV.masterHttp, fromEnv);
  return derivedMasterHttp(await leader());
}

/** http://<host of the RPC address>:9003; a wildcard host is dialled on loopback. */
export function derivedMasterHttp(rpcAddress: string): string {
  const hp = splitHostPort(rpcAddress);
  if (!hp) throw new UsageError(`cannot derive the master's HTTP address from "${rpcAddress}": give --master-http`);
  const host = hp.host === '0.0.0.0' || hp.host === '::' ? '127.0.0.1' : hp.host;
  return `http://${joinHostPort(host, DEFAULT_MASTER_HTTP_PORT)}`;
}

/** metadata_server of the embedded client: --metadata, else STORE_METADATA_SERVER, else P2PHANDSHAKE. */
export async function metadataServer(g: GlobalOptions, env: Env): Promise<string> {
  const m = g.metadata || env[ENV.metadata] || 'P2PHANDSHAKE'; // an empty variable is unset
  const { metadataServerProblem } = await import('../client/setup-config.js');
  const problem = metadataServerProblem(m);
  if (problem) throw new UsageError(`--metadata: ${problem}`);
  return m;
}

/** The store service's REST base URL: --service, else STORE_SERVICE_HTTP_ADDRESS, else http://127.0.0.1:8080. */
export function serviceUrl(flag: string | undefined, env: Env): string {
  if (flag) return httpBase('--service', flag);
  const fromEnv = env[ENV.service];
  return fromEnv ? httpBase(ENV.service, fromEnv) : DEFAULT_SERVICE_URL;
}
