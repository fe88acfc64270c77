// The dummy client: a StoreClient for a process that holds no cluster memory (an inference
// worker). It forwards every call to a real client (store_service, usually the injected sidecar)
// over the KVD1 channel: a Unix socket in the shared directory when there is one, else TCP. Values
// live in shared regions: files in STORE_SHM_DIR that the real client maps once and reads and
// writes directly, so a value put from allocBuffer() memory, or read into it, is never copied in
// either process. Memory that is not in a region is staged through a lease of one (one copy here).
// When the real client cannot see our files (another host), values travel inside the messages.
//
// A repeated read on the same host costs no message: the real client says where the bytes of an
// object it read lie, and while its read lease holds we copy them ourselves (dummy-local-reads.ts).
// A first read costs none either when the object lies in same-host memory: we ask the master
// ourselves, at the address the real client gave (dummy-direct-reads.ts).
//
// A restart of the real client is survived: calls in flight fail with UnavailableError, the next
// call reconnects (within its deadline) and registers the regions again.
import { splitHostPort, type HostPort } from '../common/host-port.js';
import { randomUUID } from 'node:crypto';
import { existsSync, unlinkSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { ErrorCode } from '../common/error-code.js';
import { keyProblem } from '../common/key-rules.js';
import { clientMethod } from '../common/client-proto.js';
import type { MethodInfo } from '../common/service-proto.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { OffsetAllocator } from '../common/offset-allocator.js';
import { BufferPool, type BufferLease, type PoolRegion } from './buffer-pool.js';
import type { BatchGetIntoResult, BatchGetResult, BatchWriteResult, PutConfig, Value } from './data-path.js';
import { InvalidParamsError, remoteStoreError, StoreError, UnauthenticatedError, UnavailableError } from './errors.js';
import { MasterChannel, type MasterChannelOptions } from './master-channel.js';
import { MasterAuthError } from './master-channel-errors.js';
import { clientSecret } from '../common/cluster-secret.js';
import { loadNative, type MappedRegion, type NativePort } from './native-port.js';
import type { StoreClient } from './store-client.js';
import { taskInfoOf, type TaskInfo } from './task-info.js';
import type { TaskInfo__Output } from '../proto/gen/store/TaskInfo.js';
import type { LocalReplica__Output } from '../proto/gen/store/LocalReplica.js';
import { DEFAULT_LOCAL_READ_ENTRIES, LocalReads, type LocalReadStats } from './dummy-local-reads.js';
import { DirectReads, type DirectReadStats } from './dummy-direct-reads.js';
import { DirectPuts, type DirectPutStats } from './dummy-direct-puts.js';

const MAGIC = Buffer.from('KVD1', 'latin1');
/** Prefix the real client requires of region file names. */
const REGION_PREFIX = 'kvstore-region-';
/** Gets of at most this many bytes come back inside the reply; larger ones are read into a lease. */
const INLINE_GET_BYTES = 64 * 1024;
const MiB = 1024 * 1024;

export interface DummyClientOptions {
  /** host:port of the real client's service (default STORE_SIDECAR_ADDRESS). */
  address?: string;
  /** Its Unix socket (default <shmDir>/kvstore-<port>.sock when that exists). */
  socketPath?: string;
  /** Shared directory for region files (default STORE_SHM_DIR, else /dev/shm). */
  shmDir?: string;
  /** Bytes of the first shared region (default STORE_DUMMY_BUFFER_SIZE, else 256 MiB). */
  bufferSize?: number;
  /** Lease caps of the shared-memory pool, as the embedded client's. */
  bufferPool?: { maxRegions?: number; maxBytes?: number; acquireTimeoutMs?: number; overflow?: boolean };
  /** Deadline of every call, reconnection included (default 30 s). */
  requestTimeoutMs?: number;
  /**
   * Read same-host memory ourselves while a read lease the real client reported holds (default
   * true; STORE_DUMMY_LOCAL_READS=0 turns it off): a repeated read then costs no message.
   */
  localReads?: boolean;
  /**
   * With local reads: look up a first read at the master ourselves and copy same-host memory
   * (default true; STORE_DUMMY_DIRECT_READS=0 turns it off): a first read then costs one master
   * round trip and no message to the real client.
   */
  directReads?: boolean;
  /**
   * With direct reads: put objects into same-host memory ourselves when the real client allows it
   * (default true; STORE_DUMMY_DIRECT_PUTS=0 turns it off): a put then costs one master round
   * trip and one copy, no message to the real client (dummy-direct-puts.ts).
   */
  directPuts?: boolean;
  /** Objects whose location is kept for that (default 65,536; the oldest go). */
  localReadEntries?: number;
  /** Name shown in the real client's logs. */
  clientName?: string;
  /**
   * The cluster secret's file, proven to the store service on every connection (default
   * STORE_CLUSTER_SECRET_FILE; none: the service must run with --allow_unauthenticated).
   */
  clusterSecretFile?: string;
  env?: Record<string, string | undefined>;
  log?: (level: 'info' | 'warn' | 'error', message: string) => void;
}

/**
 * A file in the shared directory, mapped here; the real client maps it too. A shared lock on it is
 * held while it lives: the real client deletes region files nobody holds a lock on (their owner
 * died without deleting them).
 */
interface SharedRegion {
  readonly name: string;
  readonly path: string;
  readonly mapped: MappedRegion;
  readonly lock: { release(): void };
}

interface Connection {
  readonly channel: MasterChannel;
  readonly instanceId: string;
  readonly maxInline: number;
  /** Region id on this connection, per region (registered lazily). */
  readonly ids: Map<SharedRegion, Promise<number>>;
  /** The ids registered already, for calls that need no await to name a span (span()). */
  known?: Map<SharedRegion, number>;
  /** False when the real client cannot map our files: values go inside the messages. */
  shared: boolean;
}

type Reply = { status_code: number; error: string; [k: string]: unknown };
type Span = { region_id: number; offset: number; length: number };

const m = (name: string): MethodInfo => clientMethod(name);
const GET_INTO = m('GetInto');

function defaultLog(level: 'info' | 'warn' | 'error', message: string): void {
  if (level !== 'info') process.stderr.write(`[dummy-client] ${level.toUpperCase()} ${message}\n`);
}

function parseSizeEnv(v: string | undefined, fallback: number): number {
  if (!v) return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidParamsError(`STORE_DUMMY_BUFFER_SIZE must be a positive number of bytes, got ${v}`);
  return n;
}

/** Region files of clients not closed yet: deleted if the process exits first. */
const liveFiles = new Set<string>();
let exitHookInstalled = false;
function trackFile(path: string): void {
  liveFiles.add(path);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const p of liveFiles) removeFile(p);
  });
}

export class DummyClient implements StoreClient {
  private conn: Connection | undefined;
  private connecting: Promise<Connection> | undefined;
  private readonly regions: SharedRegion[] = [];
  private pool!: BufferPool;
  private closed = false;
  /** Our own reads of same-host memory; undefined when turned off. */
  private local: LocalReads | undefined;
  /** First reads looked up at the master here; undefined when turned off. */
  private direct: DirectReads | undefined;
  /** Puts written into same-host memory here; undefined when turned off. */
  private puts: DirectPuts | undefined;
  private readonly timeoutMs: number;
  private readonly log: NonNullable<DummyClientOptions['log']>;
  private secret: Buffer | null = null;

  private constructor(
    private readonly native: NativePort,
    readonly address: string,
    readonly socketPath: string,
    readonly shmDir: string,
    private readonly opts: DummyClientOptions,
  ) {
    this.timeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.log = opts.log ?? defaultLog;
  }

  /** Connects to the real client named by the options or the environment the webhook sets. */
  static async connect(opts: DummyClientOptions = {}): Promise<DummyClient> {
    const env = opts.env ?? process.env;
    const address = opts.address ?? env.STORE_SIDECAR_ADDRESS ?? '';
    const shmDir = opts.shmDir ?? env.STORE_SHM_DIR ?? '/dev/shm';
    const port = splitHostPort(address)?.port;
    const socketPath = opts.socketPath ?? (port ? join(shmDir, `kvstore-${port}.sock`) : '');
    if (!address && !socketPath) throw new InvalidParamsError('DummyClient: no real client address (set STORE_SIDECAR_ADDRESS or pass address/socketPath)');
    const size = opts.bufferSize ?? parseSizeEnv(env.STORE_DUMMY_BUFFER_SIZE, 256 * MiB);
    if (!Number.isSafeInteger(size) || size <= 0) throw new InvalidParamsError(`DummyClient: bufferSize must be a positive integer, got ${size}`);
    let secret: Buffer | undefined;
    try {
      secret = clientSecret(opts.clusterSecretFile, { ...process.env, ...opts.env });
    } catch (e) {
      throw new InvalidParamsError(`DummyClient: ${(e as Error).message}`, { cause: e });
    }
    const client = new DummyClient(await loadNative(), address, socketPath, shmDir, opts);
    client.secret = secret ?? null;
    if (opts.localReads ?? !/^(0|false|no|off)$/i.test(env.STORE_DUMMY_LOCAL_READS ?? '')) {
      client.local = new LocalReads({
        native: client.native,
        secret: client.secret,
        maxEntries: opts.localReadEntries ?? DEFAULT_LOCAL_READ_ENTRIES,
        now: () => performance.now(),
        addressIn: (view) => {
          const at = client.locate(view);
          return at && at.region.mapped.address + at.offset;
        },
        stage: (size) => client.pool.tryAcquire(size) ?? undefined,
      });
      if (opts.directReads ?? !/^(0|false|no|off)$/i.test(env.STORE_DUMMY_DIRECT_READS ?? '')) {
        client.direct = new DirectReads({
          local: client.local,
          secret: client.secret,
          now: () => performance.now(),
          refresh: () => client.askMaster(),
          log: client.log,
        });
        if (opts.directPuts ?? !/^(0|false|no|off)$/i.test(env.STORE_DUMMY_DIRECT_PUTS ?? '')) {
          const local = client.local;
          client.puts = new DirectPuts({
            reads: client.direct,
            engine: () => local.writer(),
            addressIn: (view) => {
              const at = client.locate(view);
              return at && at.region.mapped.address + at.offset;
            },
            stage: (size) => Promise.resolve(client.pool.tryAcquire(size) ?? client.pool.acquire(size)),
            now: () => performance.now(),
          });
        }
      }
    }
    const primary = client.newRegion(size);
    const po = opts.bufferPool ?? {};
    client.pool = new BufferPool({
      primary: client.poolRegion(primary, false),
      allocator: new OffsetAllocator('dummy-buffer', 0, primary.mapped.size),
      mapOverflow: po.overflow === false ? undefined : (n) => client.poolRegion(client.newRegion(n), true),
      maxRegions: po.maxRegions,
      maxBytes: po.maxBytes,
      acquireTimeoutMs: po.acquireTimeoutMs,
    });
    try {
      await client.connection(performance.now() + client.timeoutMs);
    } catch (e) {
      await client.close();
      throw e;
    }
    return client;
  }

  /** Paths of this client's shared region files. */
  get regionPaths(): string[] {
    return this.regions.map((r) => r.path);
  }

  /** Whether values move through shared memory (false: inside the messages). */
  get sharedMemory(): boolean {
    return this.conn?.shared ?? true;
  }

  /**
   * Reads served from same-host memory here, and those that fell back to the real client; of the
   * first reads, those looked up at the master here (direct, within hits) and those that went
   * through the real client after all.
   */
  get localReadStats(): LocalReadStats & DirectReadStats {
    return { ...(this.local?.stats ?? { hits: 0, fallbacks: 0, entries: 0 }), ...(this.direct?.stats ?? { direct: 0, directFallbacks: 0 }) };
  }

  /** Objects put into same-host memory here (no message to the real client), and those tried here that went through it. */
  get directPutStats(): DirectPutStats {
    return this.puts?.stats ?? { directPuts: 0, directPutFallbacks: 0 };
  }

  // ------------------------------------------------------------------ regions

  private newRegion(size: number): SharedRegion {
    const name = `${REGION_PREFIX}${process.pid}-${randomUUID()}`;
    const path = join(this.shmDir, name);
    let mapped: MappedRegion;
    try {
      mapped = this.native.mapMemory({ kind: 'file', path, size, create: true });
    } catch (e) {
      throw new UnavailableError(`DummyClient: cannot create shared region ${path} of ${size} bytes: ${(e as Error).message}`, { cause: e });
    }
    let lock: { release(): void };
    try {
      lock = this.native.lockShared(path);
    } catch (e) {
      mapped.release();
      removeFile(path);
      throw new UnavailableError(`DummyClient: cannot lock shared region ${path}: ${(e as Error).message}`, { cause: e });
    }
    const r: SharedRegion = { name, path, mapped, lock };
    this.local?.addRegion(mapped.address, mapped.size);
    trackFile(path);
    this.regions.push(r);
    return r;
  }

  private poolRegion(r: SharedRegion, overflow: boolean): PoolRegion {
    return {
      address: r.mapped.address,
      size: r.mapped.size,
      view: (o, n) => r.mapped.view(o, n),
      release: () => {
        if (overflow) void this.dropRegion(r);
      },
    };
  }

  /** Unregisters (best effort), unmaps and deletes an overflow region. */
  private async dropRegion(r: SharedRegion): Promise<void> {
    const i = this.regions.indexOf(r);
    if (i >= 0) this.regions.splice(i, 1);
    const c = this.conn;
    const id = c?.ids.get(r);
    if (c && id) {
      c.ids.delete(r);
      c.known?.delete(r);
      try {
        await this.call(c, m('UnregisterRegion'), { region_id: await id });
      } catch {
        // the connection went away: the real client released it then
      }
    }
    await this.local?.removeRegion(r.mapped.address);
    r.mapped.release();
    removeFile(r.path);
    r.lock.release();
  }

  /** The region holding all of `view`, and the offset of its first byte there. */
  private locate(view: Uint8Array): { region: SharedRegion; offset: number } | undefined {
    if (view.byteLength === 0) return undefined;
    const a = this.native.addressOf(view);
    for (const r of this.regions) {
      if (a >= r.mapped.address && a + view.byteLength <= r.mapped.address + r.mapped.size) return { region: r, offset: a - r.mapped.address };
    }
    return undefined;
  }

  /** The span of `view` on connection `c` (registering its region there first), or undefined. */
  private span(c: Connection, view: Uint8Array): Span | Promise<Span | undefined> | undefined {
    if (!c.shared) return undefined;
    const at = this.locate(view);
    return at && this.spanAt(c, at, view.byteLength);
  }

  /**
   * The span at `at` on connection `c`: at once when its region is registered there (the usual
   * case: no promise, so a small call costs no extra turn of the microtask queue), else after
   * registering it.
   */
  private spanAt(c: Connection, at: { region: SharedRegion; offset: number }, length: number): Span | Promise<Span> {
    const known = c.known?.get(at.region);
    if (known !== undefined) return { region_id: known, offset: at.offset, length };
    let id = c.ids.get(at.region);
    if (!id) {
      const region = at.region;
      id = this.call(c, m('RegisterRegion'), { name: region.name, size: region.mapped.size, offset: 0 }).then((r) => {
        const n = r.region_id as number;
        if (c.ids.get(region) === id) (c.known ??= new Map()).set(region, n);
        return n;
      });
      c.ids.set(region, id);
      id.catch(() => c.ids.delete(region));
    }
    return id.then((region_id) => ({ region_id, offset: at.offset, length }));
  }

  // ------------------------------------------------------------------ connection

  /** The live connection, connecting (with retries) until `deadline` when there is none. */
  private connection(deadline: number): Promise<Connection> {
    if (this.closed) return Promise.reject(new UnavailableError('DummyClient: closed'));
    if (this.conn && !this.conn.channel.closed) return Promise.resolve(this.conn);
    this.connecting ??= this.reconnect(deadline).finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async reconnect(deadline: number): Promise<Connection> {
    let wait = 50;
    for (let attempt = 1; ; attempt++) {
      try {
        const c = await this.open();
        // a new connection may be to a restarted real client: the leases we knew of are not its
        this.local?.clear();
        this.conn = c;
        c.channel.onClose = () => {
          if (this.conn === c) this.conn = undefined;
          // what this real client told us may not hold for the next one (a restart)
          this.local?.clear();
        };
        return c;
      } catch (e) {
        if (this.closed) throw new UnavailableError('DummyClient: closed');
        // a refused secret stays refused: no retry
        if (e instanceof UnauthenticatedError) throw e;
        if (performance.now() + wait > deadline) {
          throw new UnavailableError(`DummyClient: real client ${this.socketPath || this.address} unreachable after ${attempt} attempt(s): ${(e as Error).message}`, { cause: e });
        }
        if (attempt === 1) this.log('warn', `real client ${this.socketPath || this.address} unreachable (${(e as Error).message}); retrying`);
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 1000);
      }
    }
  }

  /** One connection attempt: socket, Hello, and the first region (to learn whether memory is shared). */
  private async open(): Promise<Connection> {
    const useUnix = this.socketPath !== '' && existsSync(this.socketPath);
    const where = useUnix ? this.socketPath : this.address;
    const socket = await openSocket(useUnix ? { path: this.socketPath } : hostPort(this.address));
    let options: MasterChannelOptions = { requestTimeoutMs: this.timeoutMs, magic: MAGIC, peer: 'store service', secret: this.secret };
    try {
      options = await MasterChannel.authenticate(socket, where, 'dummy-client', options);
    } catch (e) {
      throw new UnauthenticatedError(`DummyClient: ${(e as Error).message}`, { cause: e });
    }
    const channel = new MasterChannel(socket, where, options);
    try {
      const hello = await callRaw(channel, m('Hello'), this.helloRequest(), where);
      this.configureDirect(hello);
      const c: Connection = { channel, instanceId: hello.instance_id as string, maxInline: Number(hello.max_inline_bytes), ids: new Map(), shared: true };
      try {
        await this.span(c, this.regions[0].mapped.view(0, 1));
      } catch (e) {
        if (!(e instanceof StoreError) || e.code !== ErrorCode.INVALID_PARAMS) throw e;
        c.shared = false;
        this.log('warn', `the real client at ${where} cannot map our shared files (${e.message}); values travel inside messages`);
      }
      return c;
    } catch (e) {
      channel.close();
      throw e;
    }
  }

  private helloRequest(): object {
    return { client_name: this.opts.clientName ?? `pid ${process.pid}`, protocol_version: 1, local_reads: this.local !== undefined };
  }

  /** Asks the real client again where the master is (its master failed us or moved: HA). */
  private async askMaster(): Promise<void> {
    const c = await this.connection(performance.now() + this.timeoutMs);
    const hello = await this.call(c, m('Hello'), this.helloRequest());
    this.configureDirect(hello);
  }

  /** What a Hello reply says of first reads and puts made here. */
  private configureDirect(hello: Reply): void {
    this.direct?.configure((hello.master_address as string | undefined) ?? '', hello.te_endpoint as string);
    this.puts?.configure(hello.direct_puts === true, hello.checksums === true);
  }

  /** Sends one call on `c`; a failed status becomes the matching StoreError. */
  private async call(c: Connection, method: MethodInfo, req: object): Promise<Reply> {
    return callRaw(c.channel, method, req, c.channel.address);
  }

  /** Runs `fn` on a live connection within the call deadline (at once when there is one). */
  private async run<T>(fn: (c: Connection) => Promise<T>): Promise<T> {
    const c = this.conn;
    if (c && !this.closed && !c.channel.closed) return fn(c);
    return fn(await this.connection(performance.now() + this.timeoutMs));
  }

  // ------------------------------------------------------------------ writes

  put(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writeOne('PutFrom', 'Put', key, value, config);
  }

  upsert(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writeOne('UpsertFrom', 'Upsert', key, value, config);
  }

  putBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writeBatch('BatchPutFrom', 'BatchPut', items);
  }

  upsertBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writeBatch('BatchUpsertFrom', 'BatchUpsert', items);
  }

  /**
   * The spans of `slices` in shared regions, staging the ones outside into one lease (released by
   * the returned function); undefined when memory is not shared.
   */
  private async spans(c: Connection, slices: Uint8Array[]): Promise<{ spans: object[]; release: () => void } | undefined> {
    if (!c.shared) return undefined;
    const spans: object[] = [];
    // each slice located once (a native call): in a region, or staged
    const where = slices.map((s) => this.locate(s));
    let staged = 0;
    for (let i = 0; i < slices.length; i++) if (!where[i]) staged += slices[i].byteLength;
    const lease = staged > 0 ? (this.pool.tryAcquire(staged) ?? (await this.pool.acquire(staged))) : undefined;
    try {
      let at = 0;
      for (let i = 0; i < slices.length; i++) {
        const s = slices[i];
        let loc = where[i];
        if (!loc) {
          const view = lease!.buffer.subarray(at, at + s.byteLength);
          view.set(s);
          at += s.byteLength;
          loc = this.locate(view)!;
        }
        const span = this.spanAt(c, loc, s.byteLength);
        spans.push('then' in span ? await span : span);
      }
    } catch (e) {
      lease?.release();
      throw e;
    }
    return { spans, release: () => lease?.release() };
  }

  private async writeOne(fromMethod: string, inlineMethod: string, key: string, value: Value, config?: PutConfig): Promise<void> {
    const slices = slicesOf(value, `${inlineMethod.toLowerCase()} ${JSON.stringify(key)}`);
    this.local?.cache.forget(key);
    if (fromMethod === 'PutFrom' && this.puts?.usable(config) && (await this.puts.put(key, slices, config))) return;
    await this.run(async (c) => {
      const s = await this.spans(c, slices);
      if (!s) {
        await this.call(c, m(inlineMethod), { key, value: joined(slices), config: wireConfig(config) });
        return;
      }
      try {
        await this.call(c, m(fromMethod), { key, slices: s.spans, config: wireConfig(config) });
      } finally {
        s.release();
      }
    });
  }

  private async writeBatch(fromMethod: string, inlineMethod: string, items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    if (items.length === 0) return [];
    const lists = items.map((it) => slicesOf(it.value, `put ${JSON.stringify(it.key)}`));
    if (this.local) for (const it of items) this.local.cache.forget(it.key);
    const puts = this.puts;
    if (fromMethod === 'BatchPutFrom' && puts && items.every((it) => puts.usable(it.config)) && distinctValidKeys(items)) {
      const here = await puts.putBatch(items.map((it, i) => ({ key: it.key, slices: lists[i], config: it.config })));
      const rest = here.flatMap((r, i) => (r ? [] : [i]));
      if (rest.length === 0) return here as BatchWriteResult[];
      const there = await this.writeBatchRemote(
        fromMethod,
        inlineMethod,
        rest.map((i) => items[i]),
        rest.map((i) => lists[i]),
      );
      rest.forEach((i, k) => (here[i] = there[k]));
      return here as BatchWriteResult[];
    }
    return this.writeBatchRemote(fromMethod, inlineMethod, items, lists);
  }

  /** A batch write through the real client. */
  private async writeBatchRemote(
    fromMethod: string,
    inlineMethod: string,
    items: readonly { key: string; value: Value; config?: PutConfig }[],
    lists: Uint8Array[][],
  ): Promise<BatchWriteResult[]> {
    const res = await this.run(async (c) => {
      const s = await this.spans(c, lists.flat());
      if (!s) {
        return this.call(c, m(inlineMethod), { items: items.map((it, i) => ({ key: it.key, value: joined(lists[i]), config: wireConfig(it.config) })) });
      }
      try {
        let at = 0;
        const reqItems = items.map((it, i) => {
          const slices = s.spans.slice(at, at + lists[i].length);
          at += lists[i].length;
          return { key: it.key, slices, config: wireConfig(it.config) };
        });
        return await this.call(c, m(fromMethod), { items: reqItems });
      } finally {
        s.release();
      }
    });
    return items.map((it, i) => {
      const r = (res.results as ItemReply[])[i];
      return r && r.status_code !== ErrorCode.OK ? { key: it.key, error: remoteStoreError(r.status_code, r.error, `put ${JSON.stringify(it.key)}`) } : { key: it.key };
    });
  }

  // ------------------------------------------------------------------ reads

  async get(key: string): Promise<Buffer> {
    const size = this.local?.cache.lookup(key)?.size;
    if (size !== undefined) {
      const out = Buffer.allocUnsafe(size);
      const r = this.local!.read(key, out);
      if ((typeof r === 'number' ? r : await r) !== undefined) return out;
    } else if (this.direct?.usable) {
      const out = await this.direct.get(key);
      if (out) return out;
    }
    return this.run(async (c) => {
      const sent = this.local?.begin();
      const r = await this.call(c, m('Get'), { key, max_inline: c.shared ? INLINE_GET_BYTES : c.maxInline });
      if (sent) this.local!.end(key, sent, r.local as LocalReplica__Output | null);
      const size = Number(r.size);
      if ((r.value as Buffer).length === size) return Buffer.from(r.value as Buffer);
      if (!c.shared) throw new InvalidParamsError(`get ${JSON.stringify(key)}: ${size} bytes exceed the ${c.maxInline}-byte limit of values inside messages`);
      const lease = this.pool.tryAcquire(size) ?? (await this.pool.acquire(size));
      try {
        const got = await this.getIntoSpan(c, key, lease.buffer);
        return Buffer.from(lease.buffer.subarray(0, got));
      } finally {
        lease.release();
      }
    });
  }

  /** Not an async function: a read served here settles in the copy's (or the master lookup's) own continuation. */
  getInto(key: string, target: Uint8Array): Promise<number> {
    if (!(target instanceof Uint8Array)) return Promise.reject(new InvalidParamsError(`get ${JSON.stringify(key)}: the target must be a Buffer/Uint8Array`));
    const local = this.local;
    if (local) {
      const r = local.read(key, target);
      if (typeof r === 'number') return Promise.resolve(r);
      if (r !== undefined) return r.then((n) => n ?? this.getIntoRemote(key, target));
      // no location known: looked up at the master here when we can
      if (this.direct?.usable) return this.direct.read(key, target, () => this.getIntoRemote(key, target));
    }
    return this.getIntoRemote(key, target);
  }

  /** getInto through the real client. */
  private getIntoRemote(key: string, target: Uint8Array): Promise<number> {
    return this.run(async (c) => {
      if (!c.shared) {
        const sent = this.local?.begin();
        const r = await this.call(c, m('Get'), { key, max_inline: Math.min(target.byteLength, c.maxInline) || 1 });
        if (sent) this.local!.end(key, sent, r.local as LocalReplica__Output | null);
        const value = r.value as Buffer;
        if (value.length !== Number(r.size)) throw new InvalidParamsError(`get ${JSON.stringify(key)}: the target holds ${target.byteLength} B, the object is ${Number(r.size)} B`);
        target.set(value);
        return value.length;
      }
      const at = this.locate(target);
      if (at) {
        const span = this.spanAt(c, at, target.byteLength);
        return this.getIntoAt(c, key, 'then' in span ? await span : span);
      }
      const lease = this.pool.tryAcquire(target.byteLength) ?? (await this.pool.acquire(target.byteLength));
      try {
        const got = await this.getIntoSpan(c, key, lease.buffer);
        target.set(lease.buffer.subarray(0, got));
        return got;
      } finally {
        lease.release();
      }
    });
  }

  private async getIntoSpan(c: Connection, key: string, view: Uint8Array): Promise<number> {
    return this.getIntoAt(c, key, await this.span(c, view));
  }

  private async getIntoAt(c: Connection, key: string, target: Span | undefined): Promise<number> {
    // the reply says where the bytes lie: kept for repeated reads (LocalReplica)
    const sent = this.local?.begin();
    const r = await callRaw(c.channel, GET_INTO, { key, target }, c.channel.address);
    if (sent) this.local!.end(key, sent, r.local as LocalReplica__Output | null);
    return Number(r.size);
  }

  async getBatch(keys: readonly string[]): Promise<BatchGetResult[]> {
    if (keys.length === 0) return [];
    const local = this.local;
    let values: (Buffer | undefined)[] | undefined;
    if (local) {
      // as getIntoBatch: known locations read here, unknown keys looked up here, the rest through the real client
      let waits: Promise<void>[] | undefined;
      let unknown: number[] | undefined;
      for (let i = 0; i < keys.length; i++) {
        const size = local.cache.lookup(keys[i])?.size;
        if (size === undefined) {
          (unknown ??= []).push(i);
          continue;
        }
        const buf = Buffer.allocUnsafe(size);
        const r = local.read(keys[i], buf);
        const out = (values ??= new Array<Buffer | undefined>(keys.length));
        if (typeof r === 'number') out[i] = buf;
        else if (r) (waits ??= []).push(r.then((n) => void (n !== undefined && (out[i] = buf))));
      }
      if (unknown && this.direct?.usable) {
        const idx = unknown;
        const got = this.direct.getMany(idx.map((i) => keys[i]));
        const out = (values ??= new Array<Buffer | undefined>(keys.length));
        (waits ??= []).push(got.then((bufs) => idx.forEach((i, k) => bufs[k] && (out[i] = bufs[k]))));
      }
      if (waits) await Promise.all(waits);
    }
    if (!values) return this.getBatchRemote(keys);
    const rest: number[] = [];
    for (let i = 0; i < keys.length; i++) if (!values[i]) rest.push(i);
    const got = rest.length > 0 ? await this.getBatchRemote(rest.map((i) => keys[i])) : [];
    const results: BatchGetResult[] = keys.map((key, i) => ({ key, value: values[i] }));
    rest.forEach((i, k) => (results[i] = got[k]));
    return results;
  }

  private async getBatchRemote(keys: readonly string[]): Promise<BatchGetResult[]> {
    return this.run(async (c) => {
      if (!c.shared) {
        const r = await this.call(c, m('BatchGet'), { keys: [...keys] });
        return keys.map((key, i) => {
          const x = (r.results as (ItemReply & { value: Buffer })[])[i];
          return x.status_code === ErrorCode.OK ? { key, value: Buffer.from(x.value) } : { key, error: remoteStoreError(x.status_code, x.error, `get ${JSON.stringify(key)}`) };
        });
      }
      const sizes = await this.call(c, m('BatchGet'), { keys: [...keys] }).catch(() => undefined);
      if (sizes) {
        return keys.map((key, i) => {
          const x = (sizes.results as (ItemReply & { value: Buffer })[])[i];
          return x.status_code === ErrorCode.OK ? { key, value: Buffer.from(x.value) } : { key, error: remoteStoreError(x.status_code, x.error, `get ${JSON.stringify(key)}`) };
        });
      }
      // Too large to come back inside one reply: read each into a lease of its size.
      return Promise.all(
        keys.map((key) =>
          this.get(key).then(
            (value) => ({ key, value }),
            (error: StoreError) => ({ key, error }),
          ),
        ),
      );
    });
  }

  async getIntoBatch(items: readonly { key: string; target: Uint8Array }[]): Promise<BatchGetIntoResult[]> {
    if (items.length === 0) return [];
    const local = this.local;
    let results: (BatchGetIntoResult | undefined)[] | undefined;
    if (local) {
      // the keys whose location we know are read here; those we know nothing of are looked up at
      // the master here when we can (one call); the rest in one call to the real client
      let waits: Promise<void>[] | undefined;
      let unknown: number[] | undefined;
      for (let i = 0; i < items.length; i++) {
        const { key, target } = items[i];
        if (!(target instanceof Uint8Array)) continue;
        const r = local.read(key, target);
        if (r === undefined) {
          (unknown ??= []).push(i);
          continue;
        }
        const out = (results ??= new Array<BatchGetIntoResult | undefined>(items.length));
        if (typeof r === 'number') out[i] = { key, size: r };
        else (waits ??= []).push(r.then((n) => void (n !== undefined && (out[i] = { key, size: n }))));
      }
      if (unknown && this.direct?.usable) {
        const idx = unknown;
        const got = this.direct.readMany(idx.map((i) => items[i]));
        const out = (results ??= new Array<BatchGetIntoResult | undefined>(items.length));
        (waits ??= []).push(got.then((sizes) => idx.forEach((i, k) => sizes[k] !== undefined && (out[i] = { key: items[i].key, size: sizes[k] }))));
      }
      if (waits) await Promise.all(waits);
    }
    if (!results) return this.getIntoBatchRemote(items);
    const rest: number[] = [];
    for (let i = 0; i < items.length; i++) if (!results[i]) rest.push(i);
    if (rest.length > 0) {
      const got = await this.getIntoBatchRemote(rest.map((i) => items[i]));
      rest.forEach((i, k) => (results[i] = got[k]));
    }
    return results as BatchGetIntoResult[];
  }

  private async getIntoBatchRemote(items: readonly { key: string; target: Uint8Array }[]): Promise<BatchGetIntoResult[]> {
    return this.run(async (c) => {
      if (!c.shared || items.some((it) => !this.locate(it.target))) {
        // Targets outside shared memory: one call per key, each staged.
        return Promise.all(
          items.map((it) =>
            this.getInto(it.key, it.target).then(
              (size) => ({ key: it.key, size }),
              (error: StoreError) => ({ key: it.key, error }),
            ),
          ),
        );
      }
      const reqItems = [];
      for (const it of items) reqItems.push({ key: it.key, target: await this.span(c, it.target) });
      const local = this.local;
      const sent = local?.begin();
      const r = await this.call(c, m('BatchGetInto'), { items: reqItems });
      if (sent) items.forEach((it, i) => local!.end(it.key, sent, (r.results as ItemReply[])[i]?.local));
      return items.map((it, i) => {
        const x = (r.results as ItemReply[])[i];
        return x.status_code === ErrorCode.OK
          ? { key: it.key, size: Number(x.size) }
          : { key: it.key, error: remoteStoreError(x.status_code, x.error, `get ${JSON.stringify(it.key)}`) };
      });
    });
  }

  /** Memory in a shared region: puts from it and gets into it move no byte through this process. */
  allocBuffer(size: number, timeoutMs?: number): Promise<BufferLease> {
    if (this.closed) return Promise.reject(new UnavailableError('DummyClient: closed'));
    return this.pool.acquire(size, timeoutMs);
  }

  // ------------------------------------------------------------------ metadata

  async isExist(key: string): Promise<boolean> {
    if (this.direct?.usable) {
      const here = await this.direct.exists(key); // asked of the master here, as first reads are
      if (here !== undefined) return here;
    }
    return (await this.run((c) => this.call(c, m('IsExist'), { key }))).exists as boolean;
  }

  async batchIsExist(keys: readonly string[]): Promise<boolean[]> {
    if (this.direct?.usable) {
      const here = await this.direct.existMany(keys);
      if (here !== undefined) return here;
    }
    return (await this.run((c) => this.call(c, m('BatchIsExist'), { keys: [...keys] }))).exists as boolean[];
  }

  async getSize(key: string): Promise<number> {
    return Number((await this.run((c) => this.call(c, m('GetSize'), { key }))).size);
  }

  async remove(key: string, force = false): Promise<void> {
    this.local?.cache.forget(key);
    await this.run((c) => this.call(c, m('Remove'), { key, force }));
  }

  async removeByRegex(keyRegex: string): Promise<number> {
    this.local?.clear();
    return Number((await this.run((c) => this.call(c, m('RemoveByRegex'), { key_regex: keyRegex }))).count);
  }

  async queryByRegex(keyRegex: string): Promise<Map<string, ReplicaInfo__Output[]>> {
    const r = await this.run((c) => this.call(c, m('QueryByRegex'), { key_regex: keyRegex }));
    return new Map(Object.entries(r.object_map as Record<string, { replica_list: ReplicaInfo__Output[] }>).map(([k, v]) => [k, v.replica_list]));
  }

  async removeAll(): Promise<number> {
    this.local?.clear();
    return Number((await this.run((c) => this.call(c, m('RemoveAll'), {}))).count);
  }

  async batchQueryIp(clientIds: readonly string[] = []): Promise<Map<string, string[]>> {
    const r = await this.run((c) => this.call(c, m('BatchQueryIp'), { client_ids: [...clientIds] }));
    return new Map(Object.entries(r.client_ip_map as Record<string, { ip_addresses: string[] }>).map(([k, v]) => [k, v.ip_addresses]));
  }

  async batchReplicaClear(objectKeys: readonly string[], segmentName = ''): Promise<string[]> {
    if (this.local) for (const k of objectKeys) this.local.cache.forget(k);
    return (await this.run((c) => this.call(c, m('BatchReplicaClear'), { object_keys: [...objectKeys], segment_name: segmentName }))).cleared_keys as string[];
  }

  async createCopyTask(key: string, targets: readonly string[]): Promise<number> {
    return Number((await this.run((c) => this.call(c, m('CreateCopyTask'), { key, targets: [...targets] }))).task_id);
  }

  async createMoveTask(key: string, source: string, target: string): Promise<number> {
    this.local?.cache.forget(key);
    return Number((await this.run((c) => this.call(c, m('CreateMoveTask'), { key, source, target }))).task_id);
  }

  async queryTask(taskId: number): Promise<TaskInfo> {
    if (!Number.isSafeInteger(taskId) || taskId <= 0) throw new InvalidParamsError(`queryTask: task id must be a positive integer, got ${String(taskId)}`);
    const r = await this.run((c) => this.call(c, m('QueryTask'), { task_id: taskId }));
    return taskInfoOf(r.task as TaskInfo__Output, Number(r.now_ms), Date.now());
  }

  /** Closes the connection (the real client releases our regions), then unmaps and deletes them. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.direct?.close();
    this.pool?.close();
    this.conn?.channel.close();
    this.conn = undefined;
    this.local?.close(); // joins its threads: nothing copies into the regions after this
    for (const r of this.regions.splice(0)) {
      r.mapped.release();
      removeFile(r.path);
      r.lock.release();
    }
  }
}

interface ItemReply {
  status_code: number;
  error: string;
  size: number;
  local?: LocalReplica__Output | null;
}

/** Calls `method`; a transport failure is UnavailableError, a failed status its StoreError. */
async function callRaw(channel: MasterChannel, method: MethodInfo, req: object, where: string): Promise<Reply> {
  let r: Reply;
  try {
    r = await channel.call<Reply>(method, req);
  } catch (e) {
    if (e instanceof TypeError) throw new InvalidParamsError(`${method.name}: ${e.message}`, { cause: e });
    if (e instanceof MasterAuthError) throw new UnauthenticatedError(`${method.name}: store service ${where}: ${e.message}`, { cause: e });
    throw new UnavailableError(`${method.name}: store service ${where}: ${(e as Error).message}`, { cause: e });
  }
  if (r.status_code !== ErrorCode.OK) throw remoteStoreError(r.status_code, r.error, method.name);
  return r;
}

function hostPort(address: string): HostPort {
  const hp = splitHostPort(address);
  if (!hp) throw new InvalidParamsError(`DummyClient: invalid real client address "${address}": expected host:port`);
  return hp;
}

function openSocket(where: { path: string } | { host: string; port: number }): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = 'path' in where ? netConnect(where.path) : netConnect({ host: where.host, port: where.port, noDelay: true });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error('connect timed out after 5000 ms'));
    }, 5000);
    s.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    s.once('connect', () => {
      clearTimeout(timer);
      s.removeAllListeners('error');
      resolve(s);
    });
  });
}

function removeFile(path: string): void {
  liveFiles.delete(path);
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function slicesOf(value: Value, what: string): Uint8Array[] {
  const list = value instanceof Uint8Array ? [value] : Array.isArray(value) ? [...value] : null;
  if (!list || list.some((s) => !(s instanceof Uint8Array))) throw new InvalidParamsError(`${what}: the value must be a Buffer/Uint8Array or an array of them`);
  if (list.length === 0 || list.some((s) => s.byteLength === 0)) throw new InvalidParamsError(`${what}: the value or a slice is empty`);
  return list;
}

/** Whether every key of a batch is well-formed and appears once (else the real client says what is wrong, per key). */
function distinctValidKeys(items: readonly { key: string }[]): boolean {
  const seen = new Set<string>();
  for (const it of items) {
    if (seen.has(it.key) || keyProblem(it.key) !== undefined) return false;
    seen.add(it.key);
  }
  return true;
}

function joined(slices: Uint8Array[]): Uint8Array {
  return slices.length === 1 ? slices[0] : Buffer.concat(slices);
}

function wireConfig(c: PutConfig | undefined): object {
  return { replica_num: c?.replica_num ?? 1, with_soft_pin: !!c?.with_soft_pin, with_hard_pin: !!c?.with_hard_pin, preferred_segment: c?.preferred_segment ?? '' };
}
