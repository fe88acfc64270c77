// A dummy client's Put of an object into same-host memory, without the real client: the dummy asks
// the master for the placement itself (PutStart / BatchPutStart on the master channel of its
// first reads, dummy-direct-reads.ts), and when every replica lies in memory served by an engine of
// this host it writes the bytes with the engine of its local reads (dummy-local-reads.ts: shm
// grants, the handle's incarnation and the write's generation checked as for any writer, the
// CRC-32C computed during the copy when the real client records them) and ends the put
// (PutEnd / BatchPutEnd). One round trip to the master and one copy, as the embedded client; the
// hop to the real client and its wake-ups are gone.
//
// The real client allows it in its Hello reply (`direct_puts`, with `checksums`): not while its
// Puts also write the file tier (that copy is made by the real client). A placement that is not
// all this host's memory (another host, a disk replica) is revoked at once (naming no segment:
// nothing failed) and the put goes through the real client; puts with that preferred segment (or
// none) then go through the real client for a while, so a cluster whose memory lies elsewhere
// pays one extra round trip per MISS_PAUSE_MS. A copy that fails is revoked the same way; the real
// client, which can reach every host, then writes the object (and names a segment it cannot reach
// itself). A master that fails us pauses lookups and puts alike (DirectReads). A refusal of the
// placement (OBJECT_ALREADY_EXISTS, NO_AVAILABLE_HANDLE, bad parameters) is the embedded client's
// error. Upserts always go through the real client.
import { ErrorCode } from '../common/error-code.js';
import { masterMethodByName, type MethodInfo } from '../common/master-proto.js';
import type { PutStartRequest } from '../proto/gen/store/PutStartRequest.js';
import type { PutStartResponse__Output } from '../proto/gen/store/PutStartResponse.js';
import type { BatchPutStartResponse__Output } from '../proto/gen/store/BatchPutStartResponse.js';
import type { BatchKeysResponse__Output } from '../proto/gen/store/BatchKeysResponse.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import type { BufferLease } from './buffer-pool.js';
import type { DirectReads } from './dummy-direct-reads.js';
import type { EngineTransferOp, TransferEnginePort } from './native-port.js';
import { check, checkKey, handleOp, putStartRequest, type BatchWriteResult, type PutConfig } from './path-core.js';
import { StoreError, UnavailableError } from './errors.js';

const method = (name: string): MethodInfo => masterMethodByName.get(name) as MethodInfo;
const PUT_START = method('PutStart');
const PUT_END = method('PutEnd');
const PUT_REVOKE = method('PutRevoke');
const BATCH_PUT_START = method('BatchPutStart');
const BATCH_PUT_END = method('BatchPutEnd');
const BATCH_PUT_REVOKE = method('BatchPutRevoke');
/** After a placement in memory we cannot write (another host, a disk), puts with that preferred segment go through the real client this long. */
const MISS_PAUSE_MS = 5000;

export interface DirectPutsDeps {
  /** The master channel, where the master is, this host's engines, and the pause after a failure. */
  reads: DirectReads;
  /** The engine that writes (that of the local reads; our shared regions are registered with it). */
  engine(): TransferEnginePort;
  /** The address of `view` when it lies in one of our shared regions, else undefined. */
  addressIn(view: Uint8Array): number | undefined;
  /** Shared memory of `size` bytes (a value outside our regions is staged there first). */
  stage(size: number): Promise<BufferLease>;
  /** Monotonic milliseconds. */
  now: () => number;
}

export interface DirectPutStats {
  /** Objects put here (placement asked of the master, bytes written by our engine). */
  directPuts: number;
  /** Objects tried here that went through the real client after all. */
  directPutFallbacks: number;
}

interface Item {
  key: string;
  slices: Uint8Array[];
  config?: PutConfig;
}

/** An item whose placement we can write: its index and replicas. */
interface Planned {
  i: number;
  replicas: ReplicaInfo__Output[];
}

export class DirectPuts {
  served = 0;
  fallbacks = 0;
  /** Whether the real client allows it (Hello direct_puts), and the checksum setting it writes with. */
  private allowed = false;
  private checksums = false;
  /** preferred_segment ('' : none) -> no direct put before this time (its last placement was not ours to write). */
  private readonly missUntil = new Map<string, number>();

  constructor(private readonly d: DirectPutsDeps) {}

  get stats(): DirectPutStats {
    return { directPuts: this.served, directPutFallbacks: this.fallbacks };
  }

  /** What the real client's Hello said. */
  configure(allowed: boolean, checksums: boolean): void {
    this.allowed = allowed;
    this.checksums = checksums;
  }

  /** Whether a put with `config` may be made here now (else it goes through the real client). */
  usable(config: PutConfig | undefined): boolean {
    if (!this.allowed || !this.d.reads.usable) return false;
    const until = this.missUntil.get(config?.preferred_segment ?? '');
    return until === undefined || this.d.now() >= until;
  }

  /** Puts `key` here: true when stored, false when it must go through the real client; throws the master's refusal. */
  async put(key: string, slices: Uint8Array[], config: PutConfig | undefined): Promise<boolean> {
    const what = `put ${JSON.stringify(key)}`;
    checkKey(key, what);
    const ch = await this.d.reads.masterChannel();
    if (!ch) return this.fellBack(1);
    const req = putStartRequest(key, slices, config, what);
    let started: PutStartResponse__Output;
    try {
      started = await ch.call<PutStartResponse__Output>(PUT_START, req);
    } catch (e) {
      this.d.reads.masterFailed(e);
      return this.fellBack(1);
    }
    if (started.status_code === ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS) {
      this.d.reads.masterRefused(started.status_code);
      return this.fellBack(1);
    }
    check(started.status_code, `${what}: start refused`);
    const written = this.ours(started.replica_list, slices, config) ? await this.write([{ slices, replicas: started.replica_list }]) : undefined;
    if (!written) {
      await ch.call(PUT_REVOKE, { key, failed_segments: [] }).catch(() => undefined);
      return this.fellBack(1);
    }
    let ended: { status_code: number };
    try {
      ended = await ch.call<{ status_code: number }>(PUT_END, { key, slice_checksums: written[0] });
    } catch (e) {
      // whether the master ended it is unknown, as for the embedded client
      this.d.reads.masterFailed(e);
      throw new UnavailableError(`${what}: end: ${(e as Error).message}`, { cause: e });
    }
    check(ended.status_code, `${what}: end refused`);
    this.served++;
    return true;
  }

  /**
   * Puts the items here where it can: per item its result, or undefined (put it through the real
   * client). The master's refusals of single items are their errors, as in the embedded client.
   */
  async putBatch(items: readonly Item[]): Promise<(BatchWriteResult | undefined)[]> {
    const out = new Array<BatchWriteResult | undefined>(items.length);
    const ch = await this.d.reads.masterChannel();
    if (!ch) return this.allBack(out);
    let reqs: PutStartRequest[];
    try {
      reqs = items.map((it) => putStartRequest(it.key, it.slices, it.config, `put ${JSON.stringify(it.key)}`));
    } catch {
      return this.allBack(out); // a bad config: the real client says what is wrong, per item
    }
    let started: BatchPutStartResponse__Output;
    try {
      started = await ch.call<BatchPutStartResponse__Output>(BATCH_PUT_START, { requests: reqs });
    } catch (e) {
      this.d.reads.masterFailed(e);
      return this.allBack(out);
    }
    if (started.status_code !== ErrorCode.OK || started.results.length !== items.length) {
      this.d.reads.masterRefused(started.status_code);
      return this.allBack(out);
    }
    const planned: Planned[] = [];
    const revoke: string[] = [];
    started.results.forEach((r, i) => {
      const key = items[i].key;
      if (r.status_code !== ErrorCode.OK) out[i] = { key, error: StoreError.forItem(r.status_code, `put ${JSON.stringify(key)}: start refused`) };
      else if (this.ours(r.replica_list, items[i].slices, items[i].config)) planned.push({ i, replicas: r.replica_list });
      else revoke.push(key);
    });
    let ended: BatchKeysResponse__Output | undefined;
    if (planned.length > 0) {
      const written = await this.write(planned.map((p) => ({ slices: items[p.i].slices, replicas: p.replicas })));
      if (!written) for (const p of planned) revoke.push(items[p.i].key);
      else {
        try {
          ended = await ch.call<BatchKeysResponse__Output>(BATCH_PUT_END, { keys: planned.map((p) => items[p.i].key), checksums: written.map((crc32c) => ({ crc32c })) });
        } catch (e) {
          // whether the master ended them is unknown, as for the embedded client
          this.d.reads.masterFailed(e);
          for (const p of planned)
            out[p.i] = { key: items[p.i].key, error: new UnavailableError(`put ${JSON.stringify(items[p.i].key)}: end: ${(e as Error).message}`, { cause: e }) };
        }
      }
    }
    if (revoke.length > 0) await ch.call(BATCH_PUT_REVOKE, { keys: revoke, failed_segments: [] }).catch(() => undefined);
    if (ended) {
      const byKey = new Map(ended.results.map((r) => [r.key, r.status_code]));
      for (const p of planned) {
        const key = items[p.i].key;
        const code = ended.status_code !== ErrorCode.OK ? ended.status_code : (byKey.get(key) ?? ErrorCode.OK);
        out[p.i] = code === ErrorCode.OK ? { key } : { key, error: StoreError.forItem(code, `put ${JSON.stringify(key)}: end refused`) };
        if (code === ErrorCode.OK) this.served++;
      }
    }
    for (const r of out) if (r === undefined) this.fallbacks++;
    return out;
  }

  /**
   * Whether every replica of a placement is memory of this host's engines, a handle per slice and
   * large enough (else: a pause for its preferred segment).
   */
  private ours(replicas: readonly ReplicaInfo__Output[], slices: readonly Uint8Array[], config: PutConfig | undefined): boolean {
    const sameHost = this.d.reads.sameHostEndpoint;
    for (const r of replicas) {
      const fine =
        r.replica_type === ReplicaType.MEMORY &&
        r.handles.length === slices.length &&
        r.handles.every((h, j) => h.te_endpoint !== '' && Number(h.size) >= slices[j].byteLength && sameHost(h.te_endpoint));
      if (!fine) {
        this.missUntil.set(config?.preferred_segment ?? '', this.d.now() + MISS_PAUSE_MS);
        return false;
      }
    }
    return replicas.length > 0;
  }

  /**
   * Writes each object's slices to all its replicas in one engine batch: per object the CRC-32C
   * of each slice ([] when checksums are off), or undefined when it failed (then the real client
   * writes them: it reaches every host and names a segment it cannot reach).
   */
  private write(objects: readonly { slices: Uint8Array[]; replicas: ReplicaInfo__Output[] }[]): Promise<number[][] | undefined> {
    return this.copy(objects).catch(() => undefined);
  }

  private async copy(objects: readonly { slices: Uint8Array[]; replicas: ReplicaInfo__Output[] }[]): Promise<number[][] | undefined> {
    const engine = this.d.engine();
    // values outside our shared regions are staged in one lease
    let staged = 0;
    const sources = objects.map((o) =>
      o.slices.map((s) => {
        const a = this.d.addressIn(s);
        if (a === undefined) staged += s.byteLength;
        return a;
      }),
    );
    let lease: BufferLease | undefined;
    try {
      if (staged > 0) {
        lease = await this.d.stage(staged);
        const base = this.d.addressIn(lease.buffer);
        if (base === undefined) return undefined;
        let at = 0;
        objects.forEach((o, k) =>
          o.slices.forEach((s, j) => {
            if (sources[k][j] !== undefined) return;
            lease!.buffer.set(s, at);
            sources[k][j] = base + at;
            at += s.byteLength;
          }),
        );
      }
      const ops: EngineTransferOp[] = [];
      /** Per object and slice: the op whose CRC is the slice's. */
      const sumOf: number[][] = objects.map((o) => o.slices.map(() => -1));
      objects.forEach((o, k) => {
        for (const r of o.replicas) {
          r.handles.forEach((h, j) => {
            const length = o.slices[j].byteLength;
            if (length === 0) return;
            const op = handleOp('write', h, h.te_endpoint, sources[k][j]!, length);
            if (this.checksums && sumOf[k][j] === -1) {
              op.checksum = true; // computed as the bytes are copied
              sumOf[k][j] = ops.length;
            }
            ops.push(op);
          });
        }
      });
      const crcs = await engine.transfer(ops);
      if (!this.checksums) return objects.map(() => []);
      if (!crcs) return undefined;
      return sumOf.map((slices) => slices.map((op) => (op === -1 ? 0 : crcs[op])));
    } finally {
      lease?.release();
    }
  }

  private fellBack(n: number): false {
    this.fallbacks += n;
    return false;
  }

  private allBack(out: (BatchWriteResult | undefined)[]): (BatchWriteResult | undefined)[] {
    this.fallbacks += out.length;
    return out;
  }
}
