// A dummy client's first read of an object in same-host memory, without the real client: the dummy
// asks the master itself (GetReplicaList / BatchGetReplicaList on a master channel of its own,
// opened at the first such read and authenticated with the cluster secret it already has) and, for
// a complete MEMORY replica whose every slice lies with an engine of this host, keeps the location
// in the local-read cache under the lease the master just granted and copies the bytes the way a
// repeated read does (dummy-local-reads.ts: grant, bounds, incarnation, CRC-32C when recorded, the
// lease still holding when the copy ended). One round trip to the master, as the embedded client.
//
// The real client says where its master is (Hello master_address, only to same-host dummies that
// asked for local reads). Anything else goes through the real client as before, which stays
// correct: a DISK/file replica, slices on another host, a read the copy refuses, an error status
// (not found included: the real client gives the error), and a master that cannot be reached,
// refuses our secret or does not serve (UNAVAILABLE_IN_CURRENT_STATUS: not the leader, or not yet).
// After such a failure no lookup is made here for a while, and the real client is asked again
// where the master is (with HA the leader moves). A master connection that ends drops every
// cached location: the leases it granted may be gone.
import { ErrorCode } from '../common/error-code.js';
import { keyProblem } from '../common/key-rules.js';
import { masterMethodByName, type MethodInfo } from '../common/master-proto.js';
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import type { BatchGetReplicaListResponse__Output } from '../proto/gen/store/BatchGetReplicaListResponse.js';
import type { LocalReplica__Output } from '../proto/gen/store/LocalReplica.js';
import type { ExistKeyResponse__Output } from '../proto/gen/store/ExistKeyResponse.js';
import type { BatchExistKeyResponse__Output } from '../proto/gen/store/BatchExistKeyResponse.js';
import type { LocalReads } from './dummy-local-reads.js';
import type { LocalEntry, ReadStamp } from './local-read-cache.js';
import { localReplica, sameHostAs } from './local-replica.js';
import { MasterChannel } from './master-channel.js';
import { MasterAuthError } from './master-channel-errors.js';
import { orderReplicas } from './transfer-plan.js';

const GET_REPLICA_LIST = masterMethodByName.get('GetReplicaList') as MethodInfo;
const BATCH_GET_REPLICA_LIST = masterMethodByName.get('BatchGetReplicaList') as MethodInfo;
const EXIST_KEY = masterMethodByName.get('ExistKey') as MethodInfo;
const BATCH_EXIST_KEY = masterMethodByName.get('BatchExistKey') as MethodInfo;
/** Keys per BatchGetReplicaList (the master's request bound is far above; larger batches go through the real client). */
const MAX_BATCH_KEYS = 16_384;
/** After the master failed us, first reads go through the real client for this long. */
const RETRY_AFTER_MS = 1000;
/** After the master refused our secret: this long. */
const AUTH_RETRY_AFTER_MS = 60_000;
/** A lookup not answered by then is given up (the read goes through the real client). */
const CALL_TIMEOUT_MS = 5000;

export interface DirectReadsDeps {
  local: LocalReads;
  /** The cluster secret (null: none; the master must then run unauthenticated). */
  secret: Buffer | null;
  /** Monotonic milliseconds. */
  now: () => number;
  /** Asks the real client again where the master is; it answers through configure(). */
  refresh(): Promise<void>;
  log(level: 'info' | 'warn' | 'error', message: string): void;
}

export interface DirectReadStats {
  /** First reads served here after our own master lookup (counted in the local reads' hits too). */
  direct: number;
  /** First reads tried here that went through the real client after all. */
  directFallbacks: number;
}

type Got = number | undefined;

/** A dummy holds no segment: no replica is its own. */
const notOwn = (): boolean => false;

export class DirectReads {
  served = 0;
  fallbacks = 0;
  /** The master's host:port as the real client last said ('' : not given: no lookups here). */
  private address = '';
  private sameHost: (endpoint: string) => boolean = () => false;
  private channel: MasterChannel | undefined;
  private connecting: Promise<MasterChannel> | undefined;
  /** No lookup here before this time (after a failure). */
  private offUntil = 0;
  /** The real client must be asked where the master is before the next lookup. */
  private stale = false;
  private refreshing: Promise<void> | undefined;
  /** A failure was logged and nothing has worked since (one warning per outage). */
  private failing = false;
  private closed = false;

  constructor(private readonly d: DirectReadsDeps) {}

  get stats(): DirectReadStats {
    return { direct: this.served, directFallbacks: this.fallbacks };
  }

  /** What the real client's Hello said: the master's address ('' : none) and its own engine (this host's IP). */
  configure(masterAddress: string, realEndpoint: string): void {
    this.sameHost = sameHostAs(realEndpoint);
    this.stale = false;
    if (masterAddress === this.address) return;
    this.address = masterAddress;
    this.offUntil = 0;
    this.dropChannel();
  }

  /** Whether a first read may be looked up here now (else it goes through the real client). */
  get usable(): boolean {
    if (this.address === '' || this.closed || this.d.now() < this.offUntil) return false;
    if (!this.stale) return true;
    this.refreshing ??= this.d
      .refresh()
      .catch((e: Error) => {
        this.offUntil = this.d.now() + RETRY_AFTER_MS;
        this.d.log('info', `asking the real client where the master is failed: ${e.message}`);
      })
      .finally(() => (this.refreshing = undefined));
    return false;
  }

  /**
   * Reads `key` into `target` here: its size, else `otherwise()` (the read through the real
   * client). Not an async function: at 64 in flight every promise hop is CPU, so the copy runs in
   * the lookup reply's own continuation.
   */
  read(key: string, target: Uint8Array, otherwise: () => Promise<number>): Promise<number> {
    const ch = this.channel;
    if (ch) return this.readOn(ch, key, target, otherwise);
    return this.open().then((c) => (c ? this.readOn(c, key, target, otherwise) : this.fellBack(otherwise)));
  }

  private readOn(ch: MasterChannel, key: string, target: Uint8Array, otherwise: () => Promise<number>): Promise<number> {
    const t = this.d.local.begin();
    return ch.call<GetReplicaListResponse__Output>(GET_REPLICA_LIST, { key }).then(
      (res) => {
        const e = this.keep(key, t, res);
        const r = e === undefined || target.byteLength < e.size ? undefined : this.d.local.read(key, target, e);
        if (typeof r === 'number') return this.count(r)!;
        if (r === undefined) return this.fellBack(otherwise);
        return r.then((n) => (n === undefined ? this.fellBack(otherwise) : this.count(n)!));
      },
      (e: unknown) => {
        this.failed(e);
        return this.fellBack(otherwise);
      },
    );
  }

  private fellBack(otherwise: () => Promise<number>): Promise<number> {
    this.fallbacks++;
    return otherwise();
  }

  /** The object's bytes read here, or undefined (read it through the real client). */
  async get(key: string): Promise<Buffer | undefined> {
    const e = await this.locate(key);
    if (e === undefined) return void this.count(undefined);
    const out = Buffer.allocUnsafe(e.size);
    return this.count(await this.d.local.read(key, out, e)) === undefined ? undefined : out;
  }

  /** Reads each item here when it can (one lookup for all): per item its size, or undefined (through the real client). */
  async readMany(items: readonly { key: string; target: Uint8Array }[]): Promise<Got[]> {
    const found = await this.locateMany(items.map((it) => it.key));
    const out = new Array<Got>(items.length);
    const waits: Promise<void>[] = [];
    for (let i = 0; i < items.length; i++) {
      const e = found?.[i];
      const { key, target } = items[i];
      const r = e === undefined || target.byteLength < e.size ? undefined : this.d.local.read(key, target, e);
      if (r === undefined || typeof r === 'number') out[i] = this.count(r);
      else waits.push(r.then((n) => void (out[i] = this.count(n))));
    }
    if (waits.length > 0) await Promise.all(waits);
    return out;
  }

  /** Like readMany, into new Buffers of the objects' sizes. */
  async getMany(keys: readonly string[]): Promise<(Buffer | undefined)[]> {
    const found = await this.locateMany(keys);
    const out = new Array<Buffer | undefined>(keys.length);
    const waits: Promise<void>[] = [];
    for (let i = 0; i < keys.length; i++) {
      const e = found?.[i];
      if (e === undefined) {
        this.count(undefined);
        continue;
      }
      const buf = Buffer.allocUnsafe(e.size);
      const r = this.d.local.read(keys[i], buf, e);
      if (r === undefined || typeof r === 'number') out[i] = this.count(r) === undefined ? undefined : buf;
      else waits.push(r.then((n) => void (out[i] = this.count(n) === undefined ? undefined : buf)));
    }
    if (waits.length > 0) await Promise.all(waits);
    return out;
  }

  private count(n: Got): Got {
    if (n === undefined) this.fallbacks++;
    else this.served++;
    return n;
  }

  /** Looks `key` up at the master and keeps where it lies: the entry kept, or undefined. */
  private async locate(key: string): Promise<LocalEntry | undefined> {
    const t = this.d.local.begin();
    const res = await this.ask<GetReplicaListResponse__Output>(GET_REPLICA_LIST, { key });
    return res && this.keep(key, t, res);
  }

  /** locate() for many keys in one call: per key its entry or undefined; undefined for all. */
  private async locateMany(keys: readonly string[]): Promise<(LocalEntry | undefined)[] | undefined> {
    if (keys.length > MAX_BATCH_KEYS) return undefined;
    const t = this.d.local.begin();
    const res = await this.ask<BatchGetReplicaListResponse__Output>(BATCH_GET_REPLICA_LIST, { keys: [...keys] });
    if (res === undefined) return undefined;
    if (res.status_code !== ErrorCode.OK || res.results.length !== keys.length) return void this.refused(res.status_code);
    return keys.map((key, i) => this.keep(key, t, res.results[i]));
  }

  /**
   * One call to the master on our channel (opened if need be): its reply, or undefined when there
   * is no channel or the call failed (lookups then pause). The read stamp of a lookup is taken
   * before it: opening the channel first only makes the stamp earlier, which is conservative.
   */
  private async ask<T>(method: MethodInfo, req: object): Promise<T | undefined> {
    const ch = this.channel ?? (await this.open());
    if (!ch) return undefined;
    try {
      return await ch.call<T>(method, req);
    } catch (e) {
      return this.failed(e);
    }
  }

  /**
   * Keeps the location of the first complete replica of `res` that lies in this host's memory
   * (local-read cache, under the lease granted to a request sent at `t`): the entry kept, or
   * undefined when there is none or the cache did not keep it.
   */
  private keep(key: string, t: ReadStamp, res: GetReplicaListResponse__Output): LocalEntry | undefined {
    if (res.status_code !== ErrorCode.OK) return this.refused(res.status_code);
    this.failing = false;
    const ttl = Number(res.lease_ttl_ms);
    if (!(ttl > 0)) return undefined;
    const sums = res.slice_checksums ?? [];
    for (const replica of orderReplicas(res.replica_list, notOwn)) {
      const local = localReplica({ replica, sums, leaseLeftMs: ttl }, this.sameHost);
      if (local === undefined) continue;
      this.d.local.end(key, t, local as LocalReplica__Output);
      return this.d.local.cache.lookup(key);
    }
    return undefined;
  }

  /**
   * Whether `key` exists, asked of the master here (the real client would ask it the same), or
   * undefined: ask the real client (no channel, a failure, or a status it deals with, e.g. a bad key).
   */
  async exists(key: string): Promise<boolean | undefined> {
    if (keyProblem(key) !== undefined) return undefined; // the real client names what is wrong
    const res = await this.ask<ExistKeyResponse__Output>(EXIST_KEY, { key });
    if (res === undefined) return undefined;
    if (res.status_code === ErrorCode.OBJECT_NOT_FOUND) return false;
    if (res.status_code !== ErrorCode.OK) return this.refused(res.status_code);
    this.failing = false;
    return res.exists;
  }

  /** exists() for many keys in one call; undefined: ask the real client for all of them. */
  async existMany(keys: readonly string[]): Promise<boolean[] | undefined> {
    if (keys.length === 0 || keys.length > MAX_BATCH_KEYS || keys.some((k) => keyProblem(k) !== undefined)) return undefined;
    const res = await this.ask<BatchExistKeyResponse__Output>(BATCH_EXIST_KEY, { keys: [...keys] });
    if (res === undefined) return undefined;
    if (res.status_code !== ErrorCode.OK || res.results.length !== keys.length) return this.refused(res.status_code);
    if (res.results.some((r) => r.status_code !== ErrorCode.OK && r.status_code !== ErrorCode.OBJECT_NOT_FOUND)) return undefined;
    this.failing = false;
    return res.results.map((r) => r.status_code === ErrorCode.OK && r.exists);
  }

  // ---------------------------------------------------------------- for direct puts (dummy-direct-puts.ts)

  /** Our master channel (connecting if need be), or undefined (failed: lookups and puts pause). */
  masterChannel(): Promise<MasterChannel | undefined> {
    return this.channel ? Promise.resolve(this.channel) : this.open();
  }

  /** Whether an engine endpoint is on this host (that of the real client's engine). */
  get sameHostEndpoint(): (endpoint: string) => boolean {
    return this.sameHost;
  }

  /** A call on our master channel failed: as a failed lookup (a pause, the real client asked again). */
  masterFailed(e: unknown): void {
    this.failed(e);
  }

  /** The master answered a call with a status the real client deals with. */
  masterRefused(code: number): void {
    this.refused(code);
  }

  /** A status the real client deals with; one saying the master does not serve makes us ask where it is. */
  private refused(code: number): undefined {
    if (code === ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS) {
      this.stale = true;
      this.offUntil = this.d.now() + RETRY_AFTER_MS;
    }
    return undefined;
  }

  private failed(e: unknown): undefined {
    if (e instanceof TypeError) return undefined; // a request that cannot be encoded (a bad key): the real client says what is wrong
    const auth = e instanceof MasterAuthError;
    this.offUntil = this.d.now() + (auth ? AUTH_RETRY_AFTER_MS : RETRY_AFTER_MS);
    this.stale = true;
    if (!this.failing) {
      this.failing = true;
      const next = auth ? 'it refused our cluster secret' : 'reads go through the real client meanwhile';
      this.d.log('warn', `looking up first reads at master ${this.address} failed (${(e as Error).message}); ${next}`);
    }
    this.dropChannel();
    return undefined;
  }

  /** Our master channel, connecting at the first call (undefined: failed; retried later). */
  private open(): Promise<MasterChannel | undefined> {
    const address = this.address;
    this.connecting ??= MasterChannel.connect(address, { secret: this.d.secret, requestTimeoutMs: CALL_TIMEOUT_MS }).finally(() => (this.connecting = undefined));
    return this.connecting.then(
      (ch) => {
        if (this.closed || address !== this.address) {
          ch.close();
          return undefined;
        }
        if (this.channel && !this.channel.closed) {
          if (this.channel !== ch) ch.close();
          return this.channel;
        }
        this.channel = ch;
        ch.onClose = () => {
          if (this.channel === ch) this.channel = undefined;
          // the leases that master granted may be gone with it (a restart, a new leader)
          this.d.local.clear();
        };
        return ch;
      },
      (e: unknown) => this.failed(e),
    );
  }

  private dropChannel(): void {
    const ch = this.channel;
    this.channel = undefined;
    ch?.close();
  }

  close(): void {
    this.closed = true;
    this.dropChannel();
  }
}
