// HA mode of store_master (--enable_ha): picks the backend from the flags, works out the address
// clients must reach (--rpc_address / --rpc_interface, or POD_IP when bound to a wildcard),
// and ties the election to the LeaderGate: elected -> fresh core with a new view_version,
// deposed -> stop serving at once. With a followed image (a standby), each acquire attempt is
// checked first (campaign-guard.ts), and a term serves only once `beforeServing` recorded it.
// Also the `store_master_is_leader` gauge and summary lines.
import { joinHostPort } from '../../common/host-port.js';
import { clockWith } from '../../common/clock.js';
import { hostname } from 'node:os';
import client from 'prom-client';
import { FlagError } from '../../common/flags.js';
import type { MethodInfo } from '../../common/master-proto.js';
import type { MasterFlags } from '../master-flags.js';
import { DEFAULT_TIMINGS, timingsForLease, type ElectionTimings } from './election.js';
import type { ElectionBackend } from './election-backend.js';
import { EtcdBackend, parseEtcdEndpoints } from './etcd-backend.js';
import { LazyBackend } from './lazy-backend.js';
import { parseLeaseRef } from './lease-ref.js';
import { CampaignGuard, type FollowedImage } from './campaign-guard.js';
import { LeaderElector, type ElectorLog } from './leader-elector.js';
import { LeaderGate, type ServingCore } from './leader-gate.js';
import { RedisBackend } from './redis-backend.js';
import { encodeInSync, INSYNC_RECORD, type InSyncRecord } from './standby-ranking.js';

type HaFlags = Pick<MasterFlags, 'ha_backend_type' | 'ha_backend_connstring' | 'etcd_endpoints' | 'cluster_id'> & Partial<Pick<MasterFlags, 'ha_lease_ms'>>;
type Env = Record<string, string | undefined>;

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]', '']);

/** The host clients are told to reach: the bind host, or POD_IP when bound to a wildcard. */
export function advertisedHost(bindHost: string, env: Env): string {
  if (!WILDCARDS.has(bindHost)) return bindHost;
  if (env.POD_IP) return env.POD_IP;
  throw new FlagError(
    '--rpc_address',
    `--rpc_address=${bindHost || '(empty)'} cannot be advertised in HA mode: clients must reach the leader; give --rpc_address=<reachable IP> or --rpc_interface=<nic> (or set POD_IP)`,
  );
}

/** holderIdentity for the k8s backend: the pod name, else hostname plus pid (unique per host). */
export function haIdentity(env: Env): string {
  return env.POD_NAME || `${hostname()}_${process.pid}`;
}

/** Builds the backend the flags ask for, with a clear error for a missing or malformed connection. */
export function createBackend(f: HaFlags, env: Env, monoNow: () => number, log: (l: string) => void): ElectionBackend {
  switch (f.ha_backend_type) {
    case 'etcd': {
      const list = f.etcd_endpoints !== '' ? f.etcd_endpoints : f.ha_backend_connstring.replace(/^etcd:\/\//, '');
      if (list === '') throw new FlagError('--etcd_endpoints', 'flag --etcd_endpoints (host:port;host:port) is required with --enable_ha and --ha_backend_type=etcd');
      return new EtcdBackend(parseEtcdEndpoints(list), f.cluster_id);
    }
    case 'redis':
      if (f.ha_backend_connstring === '')
        throw new FlagError('--ha_backend_connstring', 'flag --ha_backend_connstring (redis://<host>:<port>) is required with --ha_backend_type=redis');
      try {
        return new RedisBackend(f.ha_backend_connstring, f.cluster_id);
      } catch (e) {
        throw new FlagError('--ha_backend_connstring', (e as Error).message);
      }
    case 'k8s': {
      if (f.ha_backend_connstring === '')
        throw new FlagError('--ha_backend_connstring', 'flag --ha_backend_connstring (<namespace>/<lease-name>) is required with --ha_backend_type=k8s');
      let ref: { namespace: string; leaseName: string };
      try {
        ref = parseLeaseRef(f.ha_backend_connstring);
      } catch (e) {
        throw new FlagError('--ha_backend_connstring', (e as Error).message);
      }
      const pod = env.POD_NAME ? { name: env.POD_NAME, namespace: env.POD_NAMESPACE || ref.namespace } : undefined;
      if (!pod) log('HA: POD_NAME is not set: the leader label store.kvcache.io/leader will not be put on any pod');
      const identity = haIdentity(env);
      return new LazyBackend(`k8s Lease ${ref.namespace}/${ref.leaseName} as ${identity}`, async () => {
        const { K8sBackend } = await import('./k8s-backend.js');
        return new K8sBackend({ ...ref, identity, pod, monoNow, wallNow: () => Date.now(), log });
      });
    }
  }
}

export interface HaMasterOptions {
  flags: HaFlags;
  bindHost: string;
  env: Env;
  methods: readonly MethodInfo[];
  makeCore: (viewVersion: number) => ServingCore;
  clock: () => number;
  log: ElectorLog;
  timings?: ElectionTimings;
  /** For tests: a backend instead of the one the flags describe. */
  backend?: ElectionBackend;
  /** Called after each change of role (a term began: true; it ended: false). */
  roleChanged?: (leading: boolean) => void;
  /** The image this master follows as a standby: it publishes where it stands and is ranked before campaigning. */
  standby?: FollowedImage;
  /** Runs when a term begins, before any RPC is served (failure: tried again while the term lasts). */
  beforeServing?: (viewVersion: number) => Promise<void>;
}

/** A term not recorded yet is tried again this often. */
const BEFORE_SERVING_RETRY_MS = 200;

export class HaMaster {
  readonly gate: LeaderGate;
  private readonly backend: ElectionBackend;
  private readonly host: string;
  private elector: LeaderElector | undefined;
  private guard: CampaignGuard | undefined;
  private address = '';

  constructor(private readonly o: HaMasterOptions) {
    this.host = advertisedHost(o.bindHost, o.env);
    this.backend = o.backend ?? createBackend(o.flags, o.env, o.clock, (l) => o.log.warn(l));
    this.gate = new LeaderGate(o.methods, o.makeCore, (now) => this.elector?.isServing(now) ?? false);
  }

  get role(): 'leader' | 'follower' {
    return this.gate.leading ? 'leader' : 'follower';
  }

  /** Starts campaigning once the RPC port is known. */
  start(rpcPort: number): void {
    this.address = joinHostPort(this.host, rpcPort);
    // A restarted container may still carry the label from a previous life.
    this.backend.onDeposed?.().catch((e: Error) => this.o.log.warn(`HA: clearing a stale leader label failed: ${e.message}`));
    const timings = this.o.timings ?? (this.o.flags.ha_lease_ms ? timingsForLease(this.o.flags.ha_lease_ms) : DEFAULT_TIMINGS);
    // A standby's record outlives two leases: a live standby's position is still there when the
    // leader's lease runs out, even after a pause of its own.
    const guard = this.o.standby ? new CampaignGuard(this.backend, () => this.address, this.o.standby, 2 * timings.leaseDurationMs, this.o.log, this.o.clock) : undefined;
    this.guard = guard;
    this.elector = new LeaderElector(
      this.backend,
      this.address,
      timings,
      clockWith(this.o.clock),
      this.o.log,
      {
        elected: (term) => {
          const before = this.o.beforeServing;
          const v = this.gate.lead(Date.now(), before !== undefined);
          const serving = (): void => this.o.log.info(`HA: elected leader (term ${term} of this process) at ${this.address}; serving with view_version=${v}`);
          if (before) this.open(before, v, serving);
          else serving();
          this.o.roleChanged?.(true);
        },
        deposed: (reason) => {
          this.gate.follow();
          this.o.log.warn(`HA: no longer leader (${reason}); every RPC now answers UNAVAILABLE_IN_CURRENT_STATUS`);
          this.o.roleChanged?.(false);
        },
      },
      guard ? () => guard.check() : undefined,
    );
    this.elector.start();
  }

  /** Serves term `v` once `before` succeeded (tried again while the term lasts). */
  private open(before: (v: number) => Promise<void>, v: number, serving: () => void): void {
    before(v).then(
      () => {
        if (!this.gate.isHeld || this.gate.viewVersion !== v) return;
        this.gate.open(v);
        serving();
      },
      (e: Error) => {
        if (!this.gate.leading || this.gate.viewVersion !== v) return;
        this.o.log.warn(`HA: recording term ${v} in ${this.backend.description} failed (${e.message}): not serving yet; trying again`);
        setTimeout(() => this.gate.isHeld && this.gate.viewVersion === v && this.open(before, v, serving), BEFORE_SERVING_RETRY_MS).unref();
      },
    );
  }

  /** Writes the leader's in-sync record (replication-leader.ts). */
  recordInSync(r: InSyncRecord): Promise<void> {
    return this.backend.putLeaderRecord(INSYNC_RECORD, encodeInSync(r));
  }

  /**
   * This standby's stream from the leader ended: the leader is likely gone, so its position is
   * published now (best effort) and the election looks for the record's expiry more often.
   */
  streamEnded(): void {
    this.guard?.publish(true).then(
      () => this.o.log.info('HA: standby position published after the stream ended'),
      (e: Error) => this.o.log.warn(`HA: publishing the standby position failed: ${e.message}`),
    );
    this.elector?.hurry();
  }

  /** This master's advertised host:port ('' before start). */
  get advertisedAddress(): string {
    return this.address;
  }

  /** The leader's host:port as the election last saw it (undefined: unknown). */
  get knownLeader(): string | undefined {
    return this.elector?.election.knownLeader || undefined;
  }

  async stop(): Promise<void> {
    await this.elector?.stop();
  }

  /** `store_master_is_leader` (1 leader, 0 follower) in the master's registry. */
  registerMetrics(registry: client.Registry): void {
    const self = this;
    new client.Gauge({
      name: 'store_master_is_leader',
      help: '1 while this master is the HA leader and serves RPCs, 0 while it follows',
      registers: [registry],
      collect() {
        this.set(self.gate.leading ? 1 : 0);
      },
    });
  }

  /** Lines for /metrics/summary. */
  info(): Record<string, string | number> {
    return {
      ha_backend: this.backend.description,
      ha_role: this.role,
      ha_advertised_address: this.address,
      ha_leader: this.elector?.election.knownLeader ?? '(unknown)',
    };
  }
}
