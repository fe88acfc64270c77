// Election backend on Redis (ioredis): the leader key /<cluster_id>/master/leader is taken with
// SET NX PX; its value carries a fencing token from INCR on /<cluster_id>/master/fencing_token
// and the leader's address, as JSON {"address":"host:port","token":N}. Renewal and release run
// Lua scripts that act only while the value is still exactly ours, so a deposed leader can
// neither extend nor delete its successor's key. Records (putRecord) are keys under
// /<cluster_id>/master/records/ (SET with PX for a TTL), read with SCAN and MGET.
import { Redis, type RedisOptions } from 'ioredis';
import { leaderKey, recordsPrefix, type AcquireResult, type ElectionBackend } from './election-backend.js';

const CALL_TIMEOUT_MS = 2000;

const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const LEADER_SET_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[2], ARGV[2]) return 1 else return 0 end`;
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export interface RedisLeaderRecord {
  address: string;
  token: number;
}

/** Parses the leader key's value; a bare `host:port` (written by hand) is accepted too. */
export function parseRedisLeaderValue(v: string): RedisLeaderRecord | undefined {
  try {
    const o = JSON.parse(v) as Partial<RedisLeaderRecord>;
    if (o && typeof o.address === 'string') return { address: o.address, token: Number(o.token ?? 0) };
  } catch {
    if (/^\S+:\d+$/.test(v)) return { address: v, token: 0 };
  }
  return undefined;
}

/** `redis://[user:password@]host:port[/db]` -> ioredis options; a clear error for anything else. */
export function redisOptionsFromUrl(connstring: string): RedisOptions {
  let u: URL;
  try {
    u = new URL(connstring);
  } catch {
    throw new Error(`--ha_backend_connstring=${connstring}: not a URL (expected redis://<host>:<port>)`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new Error(`--ha_backend_connstring=${connstring}: scheme must be redis:// (got ${u.protocol}//)`);
  const path = u.pathname.replace(/^\/+/, '');
  return {
    host: u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
    port: u.port ? Number(u.port) : 6379,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: /^\d+$/.test(path) ? Number(path) : 0,
    tls: u.protocol === 'rediss:' ? {} : undefined,
  };
}

export class RedisBackend implements ElectionBackend {
  readonly description: string;
  private readonly redis: Redis;
  private readonly key: string;
  private readonly tokenKey: string;
  private readonly prefix: string;
  /** The exact value we wrote; renew/release compare against it. */
  private mine: string | undefined;

  constructor(connstring: string, clusterId: string) {
    const opts = redisOptionsFromUrl(connstring);
    this.key = leaderKey(clusterId);
    this.tokenKey = `/${clusterId}/master/fencing_token`;
    this.prefix = recordsPrefix(clusterId);
    this.redis = new Redis({
      ...opts,
      lazyConnect: false,
      // Commands wait for the (re)connection at most commandTimeout; the election retries on its own schedule.
      enableOfflineQueue: true,
      maxRetriesPerRequest: 0,
      connectTimeout: CALL_TIMEOUT_MS,
      commandTimeout: CALL_TIMEOUT_MS,
      retryStrategy: (times) => Math.min(times * 100, 1000),
    });
    this.redis.on('error', () => undefined); // reported through the failing commands
    this.description = `redis ${opts.host}:${opts.port} key ${this.key}`;
  }

  /** The fencing token of our current term (undefined when not holding the key). */
  get fencingToken(): number | undefined {
    return this.mine ? parseRedisLeaderValue(this.mine)?.token : undefined;
  }

  async tryAcquire(address: string, ttlMs: number): Promise<AcquireResult> {
    const current = await this.redis.get(this.key);
    if (current !== null) return { acquired: false, leader: parseRedisLeaderValue(current)?.address };
    const token = await this.redis.incr(this.tokenKey);
    const value = JSON.stringify({ address, token });
    const ok = await this.redis.set(this.key, value, 'PX', Math.ceil(ttlMs), 'NX');
    if (ok === 'OK') {
      this.mine = value;
      return { acquired: true };
    }
    const now = await this.redis.get(this.key);
    return { acquired: false, leader: now === null ? undefined : parseRedisLeaderValue(now)?.address };
  }

  async renew(_address: string, ttlMs: number): Promise<boolean> {
    if (!this.mine) return false;
    const r = (await this.redis.eval(RENEW_SCRIPT, 1, this.key, this.mine, String(Math.ceil(ttlMs)))) as number;
    if (r === 1) return true;
    this.mine = undefined;
    return false;
  }

  async release(_address: string): Promise<void> {
    const mine = this.mine;
    this.mine = undefined;
    if (mine) await this.redis.eval(RELEASE_SCRIPT, 1, this.key, mine);
  }

  async readLeader(): Promise<string | undefined> {
    const v = await this.redis.get(this.key);
    return v === null ? undefined : parseRedisLeaderValue(v)?.address;
  }

  async putRecord(name: string, value: string, ttlMs?: number): Promise<void> {
    if (ttlMs === undefined) await this.redis.set(this.prefix + name, value);
    else await this.redis.set(this.prefix + name, value, 'PX', Math.max(1, Math.ceil(ttlMs)));
  }

  async putLeaderRecord(name: string, value: string): Promise<void> {
    const mine = this.mine;
    if (!mine) throw new Error('not the leader: record not written');
    const r = (await this.redis.eval(LEADER_SET_SCRIPT, 2, this.key, this.prefix + name, mine, value)) as number;
    if (r !== 1) throw new Error('the leader key is no longer ours: record not written');
  }

  async readRecords(): Promise<Map<string, string>> {
    const pattern = this.prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`) + '*';
    const keys = new Set<string>();
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 100);
      for (const k of batch) keys.add(k);
      cursor = next;
    } while (cursor !== '0');
    const out = new Map<string, string>();
    if (keys.size === 0) return out;
    const list = [...keys];
    const values = await this.redis.mget(...list);
    list.forEach((k, i) => {
      const v = values[i];
      if (v !== null && v !== undefined) out.set(k.slice(this.prefix.length), v);
    });
    return out;
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
