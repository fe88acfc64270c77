// Election backend on etcd (etcd3 package): the leader owns an etcd lease and the key
// /<cluster_id>/master/leader, created only when absent (transaction on create revision 0) and
// attached to that lease, holding the leader's `host:port`. Renewal = one lease keepalive; an
// expired lease (keepalive TTL 0) means leadership is lost; release = revoking the lease, which
// deletes the key at once. Records (putRecord) live under /<cluster_id>/master/records/; those with
// a TTL share one etcd lease of this process, kept alive by each write (granted again once expired).
import { Etcd3, EtcdLeaseInvalidError, type Lease } from 'etcd3';
import { leaderKey, recordsPrefix, type AcquireResult, type ElectionBackend } from './election-backend.js';

/** Per-call deadline so a stuck endpoint cannot hold the election past its renew deadline. */
const CALL_DEADLINE_MS = 2000;

/** `h:p;h:p` (or with http:// prefixes, or commas) -> ['http://h:p', ...]. */
export function parseEtcdEndpoints(s: string): string[] {
  const hosts = s
    .split(/[;,]/)
    .map((h) => h.trim())
    .filter((h) => h !== '')
    .map((h) => (/^https?:\/\//.test(h) ? h : `http://${h}`));
  if (hosts.length === 0) throw new Error(`no etcd endpoint in "${s}" (expected host:port;host:port)`);
  return hosts;
}

export class EtcdBackend implements ElectionBackend {
  readonly description: string;
  private readonly client: Etcd3;
  private readonly key: string;
  private lease: Lease | undefined;
  private readonly prefix: string;
  /** The lease of the records written with a TTL, and that TTL in seconds. */
  private recordLease: { lease: Lease; ttl: number } | undefined;

  constructor(endpoints: string[], clusterId: string) {
    this.key = leaderKey(clusterId);
    this.prefix = recordsPrefix(clusterId);
    this.client = new Etcd3({
      hosts: endpoints,
      dialTimeout: CALL_DEADLINE_MS,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + CALL_DEADLINE_MS }),
    });
    this.description = `etcd ${endpoints.join(',')} key ${this.key}`;
  }

  async tryAcquire(address: string, ttlMs: number): Promise<AcquireResult> {
    await this.dropLease();
    // A cheap read first: while someone leads, followers create no lease at all.
    const current = await this.client.get(this.key).string();
    if (current !== null) return { acquired: false, leader: current };
    const lease = this.client.lease(Math.max(1, Math.ceil(ttlMs / 1000)), { autoKeepAlive: false });
    lease.on('lost', () => undefined); // loss is observed through renew(); keep the emitter quiet
    let id: string;
    try {
      id = await lease.grant();
    } catch (e) {
      lease.release();
      throw e;
    }
    const res = await this.client.if(this.key, 'Create', '==', 0).then(this.client.put(this.key).value(address).lease(id)).else(this.client.get(this.key)).commit();
    if (res.succeeded) {
      this.lease = lease;
      return { acquired: true };
    }
    await lease.revoke().catch(() => undefined);
    const kv = res.responses[0]?.response_range?.kvs?.[0];
    return { acquired: false, leader: kv ? kv.value.toString() : undefined };
  }

  async renew(_address: string, _ttlMs: number): Promise<boolean> {
    const lease = this.lease;
    if (!lease || lease.revoked()) return false;
    try {
      await lease.keepaliveOnce();
      // The lease lives, but the key must also still be ours (an operator may have deleted it,
      // letting another master create it on its own lease).
      const kv = (await this.client.get(this.key).exec()).kvs[0];
      if (!kv || String(kv.lease) !== String(await lease.grant())) {
        await this.dropLease();
        return false;
      }
      return true;
    } catch (e) {
      if (e instanceof EtcdLeaseInvalidError) {
        this.lease = undefined;
        return false;
      }
      throw e;
    }
  }

  async release(_address: string): Promise<void> {
    await this.dropLease();
  }

  async readLeader(): Promise<string | undefined> {
    const v = await this.client.get(this.key).string();
    return v ?? undefined;
  }

  async putRecord(name: string, value: string, ttlMs?: number): Promise<void> {
    const key = this.prefix + name;
    if (ttlMs === undefined) {
      await this.client.put(key).value(value);
      return;
    }
    const ttl = Math.max(1, Math.ceil(ttlMs / 1000));
    let held = this.recordLease;
    if (held !== undefined && held.ttl === ttl) {
      try {
        const r = await held.lease.keepaliveOnce();
        if (!(Number(r.TTL) > 0)) held = undefined;
      } catch {
        held = undefined;
      }
    } else held = undefined;
    if (held === undefined) {
      this.recordLease?.lease.release();
      const lease = this.client.lease(ttl, { autoKeepAlive: false });
      lease.on('lost', () => undefined);
      this.recordLease = undefined;
      await lease.grant();
      held = { lease, ttl };
      this.recordLease = held;
    }
    await held.lease.put(key).value(value);
  }

  async putLeaderRecord(name: string, value: string): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.revoked()) throw new Error('not the leader: record not written');
    const id = await lease.grant();
    const res = await this.client
      .if(this.key, 'Lease', '==', id)
      .then(this.client.put(this.prefix + name).value(value))
      .commit();
    if (!res.succeeded) throw new Error('the leader key is no longer ours: record not written');
  }

  async readRecords(): Promise<Map<string, string>> {
    const all = await this.client.getAll().prefix(this.prefix).strings();
    return new Map(Object.entries(all).map(([k, v]) => [k.slice(this.prefix.length), v]));
  }

  async close(): Promise<void> {
    this.recordLease?.lease.release();
    this.client.close();
  }

  private async dropLease(): Promise<void> {
    const lease = this.lease;
    this.lease = undefined;
    if (lease && !lease.revoked()) await lease.revoke().catch(() => undefined);
  }
}
