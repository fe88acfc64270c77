// The real client's ClientService (proto/store_client.proto): one async handler per RPC, run
// against this process's Client for one dummy client's session. Region forms name spans of the
// dummy's shared regions (the Client reads and writes them directly: they are attached to its
// transfer engine); inline forms carry values in the messages (staged in the Client's local
// buffer). Failures become `status_code` + `error` (the Client's message), never a thrown error.
import { ErrorCode } from '../common/error-code.js';
import type { ReplicateConfig__Output } from '../proto/gen/store/ReplicateConfig.js';
import type { PutFromRequest__Output } from '../proto/gen/store/PutFromRequest.js';
import type { PutRequest__Output } from '../proto/gen/store/PutRequest.js';
import type { GetIntoRequest__Output } from '../proto/gen/store/GetIntoRequest.js';
import type { PutConfig } from '../client/data-path.js';
import type { StoreClient } from '../client/store-client.js';
import { InvalidParamsError, StoreError } from '../client/errors.js';
import type { DummySession } from './dummy-session.js';
import type { TaskInfo__Output } from '../proto/gen/store/TaskInfo.js';
import type { ReadObserver, ReadSource } from '../client/read-path.js';
import type { LocalReplica } from '../proto/gen/store/LocalReplica.js';
import { localReplica, sameHostAs } from '../client/local-replica.js';

/** What the service needs of the real client (client/client.ts implements it). */
export interface RealClient extends Omit<StoreClient, 'allocBuffer' | 'close' | 'getInto' | 'getIntoBatch'> {
  readonly clientId: string;
  readonly endpoint: string;
  readonly mountedSegments: readonly { name: string }[];
  /** host:port of the master in use (the leader in HA mode); '' when there is none yet. */
  readonly masterAddress: string;
  /** Whether it records every slice's CRC-32C at PutEnd (a dummy writing itself does likewise). */
  readonly recordsChecksums: boolean;
  /** Whether its Puts also write the file tier (a copy only it makes: dummies then put through it). */
  readonly putsWriteFiles: boolean;
  /** As StoreClient's; `observe` is told which replica the bytes came from (for LocalReplica). */
  getInto(key: string, target: Uint8Array, observe?: ReadObserver): Promise<number>;
  getIntoBatch(items: readonly { key: string; target: Uint8Array }[], observe?: (i: number, source: ReadSource) => void): ReturnType<StoreClient['getIntoBatch']>;
  getBounded(key: string, maxBytes: number, observe?: ReadObserver): Promise<{ size: number; value?: Buffer }>;
  queryTaskRaw(taskId: number): Promise<{ task: TaskInfo__Output; nowMs: number }>;
}

export interface ClientServiceOptions {
  /** Changes whenever this process restarts: dummy clients re-register their regions then. */
  instanceId: string;
  /** Largest value an inline form carries (Put value, Get reply). */
  maxInlineBytes: number;
  shmDir: string;
}

type Reply = { status_code: number; error?: string; [field: string]: unknown };
type Handler = (req: never, session: DummySession) => Promise<Reply>;

const OK = { status_code: ErrorCode.OK };

/** Spans as fresh plain objects of one shape (the decoder's objects differ by message). */
function spanList(spans: readonly { region_id: number; offset: number; length: number }[]): { region_id: number; offset: number; length: number }[] {
  return spans.map((s) => ({ region_id: s.region_id, offset: Number(s.offset), length: Number(s.length) }));
}

/** status_code + error of a failure. */
export function failure(e: unknown): Reply {
  if (e instanceof StoreError) return { status_code: e.code, error: e.message };
  return { status_code: ErrorCode.INTERNAL_ERROR, error: (e as Error)?.message ?? String(e) };
}

function itemResult(r: { error?: StoreError }, size = 0, local?: LocalReplica): { status_code: number; error: string; size: number; local?: LocalReplica } {
  if (r.error) return { status_code: r.error.code, error: r.error.message, size: 0 };
  return local ? { status_code: ErrorCode.OK, error: '', size, local } : { status_code: ErrorCode.OK, error: '', size };
}

/** The proto's ReplicateConfig as the Client's PutConfig (absent: defaults). */
function putConfig(c: ReplicateConfig__Output | null | undefined): PutConfig | undefined {
  if (!c) return undefined;
  return { replica_num: c.replica_num || 1, with_soft_pin: c.with_soft_pin, with_hard_pin: c.with_hard_pin, preferred_segment: c.preferred_segment };
}

export class ClientService {
  /** Whether an engine endpoint shares this host (LocalReplica is only given for those). */
  private readonly sameHost: (endpoint: string) => boolean;

  constructor(
    private readonly client: RealClient,
    private readonly opts: ClientServiceOptions,
  ) {
    this.sameHost = sameHostAs(client.endpoint);
  }

  /** An observer that keeps the LocalReplica of the read it sees (for sessions that asked). */
  private describe(s: DummySession): { observe?: ReadObserver; local: () => LocalReplica | undefined } {
    if (!s.localReads) return { local: () => undefined };
    let local: LocalReplica | undefined;
    return { observe: (src) => void (local = localReplica(src, this.sameHost)), local: () => local };
  }

  /** Handlers by the proto's camelCase method name (the dispatcher looks them up by MethodInfo.call). */
  readonly handlers: Record<string, Handler> = {
    hello: async (req: { client_name: string; local_reads?: boolean }, s) => {
      if (typeof req.client_name === 'string') s.clientName = req.client_name.slice(0, 200).replace(/[\u0000-\u001f\u007f]/g, '?');
      s.localReads = s.sameHost && req.local_reads === true;
      const reply = this.helloReply();
      // a same-host dummy reading memory itself may look up its first reads at the master too,
      // and write objects into same-host memory itself unless Puts also make a file-tier copy
      const master = s.localReads ? this.client.masterAddress : '';
      if (!master) return reply;
      return { ...reply, master_address: master, direct_puts: !this.client.putsWriteFiles, checksums: this.client.recordsChecksums };
    },

    registerRegion: async (req: { name: string; size: number; offset: number }, s) => ({ ...OK, region_id: s.register(req.name, Number(req.size), Number(req.offset)) }),

    unregisterRegion: async (req: { region_id: number }, s) => {
      await s.unregister(req.region_id);
      return OK;
    },

    putFrom: (req: PutFromRequest__Output, s) => this.writeFrom(req, s, 'put'),
    upsertFrom: (req: PutFromRequest__Output, s) => this.writeFrom(req, s, 'upsert'),
    batchPutFrom: (req: { items: PutFromRequest__Output[] }, s) => this.batchWriteFrom(req.items, s, 'put'),
    batchUpsertFrom: (req: { items: PutFromRequest__Output[] }, s) => this.batchWriteFrom(req.items, s, 'upsert'),

    getInto: (req: GetIntoRequest__Output, s) => {
      if (!req.target) throw new InvalidParamsError('getInto: a target span is required');
      const { views, done } = s.use(spanList([req.target]), () => `getInto ${JSON.stringify(req.key)}`);
      // settles in the read's own continuation: no async frame of its own
      let local: LocalReplica | undefined;
      const observe = s.localReads ? (src: ReadSource) => void (local = localReplica(src, this.sameHost)) : undefined;
      return this.client.getInto(req.key, views[0], observe).then(
        (size) => {
          done();
          return local ? { status_code: ErrorCode.OK, size, local } : { status_code: ErrorCode.OK, size };
        },
        (e: unknown) => {
          done();
          throw e;
        },
      );
    },

    batchGetInto: async (req: { items: GetIntoRequest__Output[] }, s) => {
      const spans = req.items.map((it) => {
        if (!it.target) throw new InvalidParamsError(`getInto ${JSON.stringify(it.key)}: a target span is required`);
        return it.target;
      });
      const { views, done } = s.use(spanList(spans), () => `batch getInto of ${req.items.length} keys`);
      try {
        let locals: (LocalReplica | undefined)[] | undefined;
        const observe = s.localReads ? (i: number, src: ReadSource) => void ((locals ??= [])[i] = localReplica(src, this.sameHost)) : undefined;
        const results = await this.client.getIntoBatch(
          req.items.map((it, i) => ({ key: it.key, target: views[i] })),
          observe,
        );
        return { ...OK, results: results.map((r, i) => itemResult(r, r.size ?? 0, locals?.[i])) };
      } finally {
        done();
      }
    },

    put: (req: PutRequest__Output) => this.writeInline(req, 'put'),
    upsert: (req: PutRequest__Output) => this.writeInline(req, 'upsert'),
    batchPut: (req: { items: PutRequest__Output[] }) => this.batchWriteInline(req.items, 'put'),
    batchUpsert: (req: { items: PutRequest__Output[] }) => this.batchWriteInline(req.items, 'upsert'),

    get: async (req: { key: string; max_inline: number }, s) => {
      const max = Math.min(Number(req.max_inline) || this.opts.maxInlineBytes, this.opts.maxInlineBytes);
      const d = this.describe(s);
      const r = await this.client.getBounded(req.key, max, d.observe);
      const local = d.local();
      return local ? { ...OK, size: r.size, value: r.value ?? Buffer.alloc(0), local } : { ...OK, size: r.size, value: r.value ?? Buffer.alloc(0) };
    },

    batchGet: async (req: { keys: string[] }) => {
      const results = await this.client.getBatch(req.keys);
      let total = 0;
      for (const r of results) total += r.value?.length ?? 0;
      if (total > this.opts.maxInlineBytes) {
        throw new InvalidParamsError(
          `batch get of ${req.keys.length} keys: ${total} bytes exceed the ${this.opts.maxInlineBytes}-byte inline limit; read them into a shared region (BatchGetInto)`,
        );
      }
      return {
        ...OK,
        results: results.map((r) =>
          r.error ? { status_code: r.error.code, error: r.error.message, value: Buffer.alloc(0), size: 0 } : { ...OK, error: '', value: r.value!, size: r.value!.length },
        ),
      };
    },

    isExist: async (req: { key: string }) => ({ ...OK, exists: await this.client.isExist(req.key) }),
    batchIsExist: async (req: { keys: string[] }) => ({ ...OK, exists: await this.client.batchIsExist(req.keys) }),
    getSize: async (req: { key: string }) => ({ ...OK, size: await this.client.getSize(req.key) }),
    remove: async (req: { key: string; force: boolean }) => {
      await this.client.remove(req.key, req.force);
      return OK;
    },
    removeByRegex: async (req: { key_regex: string }) => ({ ...OK, count: await this.client.removeByRegex(req.key_regex) }),
    queryByRegex: async (req: { key_regex: string }) => {
      const found = await this.client.queryByRegex(req.key_regex);
      return { ...OK, object_map: Object.fromEntries([...found].map(([k, v]) => [k, { replica_list: v }])) };
    },
    removeAll: async () => ({ ...OK, count: await this.client.removeAll() }),
    batchQueryIp: async (req: { client_ids: string[] }) => {
      const found = await this.client.batchQueryIp(req.client_ids.length > 0 ? req.client_ids : undefined);
      return { ...OK, client_ip_map: Object.fromEntries([...found].map(([k, v]) => [k, { ip_addresses: v }])) };
    },
    batchReplicaClear: async (req: { object_keys: string[]; segment_name: string }) => ({
      ...OK,
      cleared_keys: await this.client.batchReplicaClear(req.object_keys, req.segment_name),
    }),
    // Tasks are the master's: forwarded as they are (the reply keeps the master's clock, now_ms).
    createCopyTask: async (req: { key: string; targets: string[] }) => ({ ...OK, task_id: await this.client.createCopyTask(req.key, req.targets) }),
    createMoveTask: async (req: { key: string; source: string; target: string }) => ({ ...OK, task_id: await this.client.createMoveTask(req.key, req.source, req.target) }),
    queryTask: async (req: { task_id: number }) => {
      const { task, nowMs } = await this.client.queryTaskRaw(Number(req.task_id));
      return { ...OK, task, now_ms: nowMs };
    },
  };

  private helloReply(): Reply {
    return {
      ...OK,
      instance_id: this.opts.instanceId,
      client_id: this.client.clientId,
      te_endpoint: this.client.endpoint,
      max_inline_bytes: this.opts.maxInlineBytes,
      shm_dir: this.opts.shmDir,
      segments: this.client.mountedSegments.map((s) => s.name),
    };
  }

  /** Runs handler `call` for `req`; every failure becomes a reply. */
  async invoke(call: string, req: object, session: DummySession): Promise<Reply> {
    const h = this.handlers[call];
    if (!h) return { status_code: ErrorCode.NOT_IMPLEMENTED, error: `ClientService.${call} is not served by this store service` };
    try {
      return await h(req as never, session);
    } catch (e) {
      return failure(e);
    }
  }

  private async writeFrom(req: PutFromRequest__Output, s: DummySession, verb: 'put' | 'upsert'): Promise<Reply> {
    if (req.slices.length === 0) throw new InvalidParamsError(`${verb} ${JSON.stringify(req.key)}: no value spans`);
    const { views, done } = s.use(spanList(req.slices), () => `${verb} ${JSON.stringify(req.key)}`);
    try {
      const value = views.length === 1 ? views[0] : views;
      await (verb === 'put' ? this.client.put(req.key, value, putConfig(req.config)) : this.client.upsert(req.key, value, putConfig(req.config)));
      return OK;
    } finally {
      done();
    }
  }

  private async batchWriteFrom(items: PutFromRequest__Output[], s: DummySession, verb: 'put' | 'upsert'): Promise<Reply> {
    const spans = items.flatMap((it) => spanList(it.slices));
    for (const it of items) if (it.slices.length === 0) throw new InvalidParamsError(`${verb} ${JSON.stringify(it.key)}: no value spans`);
    const { views, done } = s.use(spans, () => `batch ${verb} of ${items.length} keys`);
    try {
      let at = 0;
      const batch = items.map((it) => {
        const v = views.slice(at, at + it.slices.length);
        at += it.slices.length;
        return { key: it.key, value: v.length === 1 ? v[0] : v, config: putConfig(it.config) };
      });
      const results = await (verb === 'put' ? this.client.putBatch(batch) : this.client.upsertBatch(batch));
      return { ...OK, results: results.map((r) => itemResult(r)) };
    } finally {
      done();
    }
  }

  private checkInline(value: Uint8Array, what: string): void {
    if (value.length === 0) throw new InvalidParamsError(`${what}: the value is empty`);
    if (value.length > this.opts.maxInlineBytes) {
      throw new InvalidParamsError(`${what}: ${value.length} bytes exceed the ${this.opts.maxInlineBytes}-byte inline limit; put it from a shared region (PutFrom)`);
    }
  }

  private async writeInline(req: PutRequest__Output, verb: 'put' | 'upsert'): Promise<Reply> {
    this.checkInline(req.value, `${verb} ${JSON.stringify(req.key)}`);
    await (verb === 'put' ? this.client.put(req.key, req.value, putConfig(req.config)) : this.client.upsert(req.key, req.value, putConfig(req.config)));
    return OK;
  }

  private async batchWriteInline(items: PutRequest__Output[], verb: 'put' | 'upsert'): Promise<Reply> {
    for (const it of items) this.checkInline(it.value, `${verb} ${JSON.stringify(it.key)}`);
    const batch = items.map((it) => ({ key: it.key, value: it.value, config: putConfig(it.config) }));
    const results = await (verb === 'put' ? this.client.putBatch(batch) : this.client.upsertBatch(batch));
    return { ...OK, results: results.map((r) => itemResult(r)) };
  }
}
