// The write path: Put and Upsert, single and batched: start (the master places the replicas) ->
// stage the value unless it is registered memory -> one transfer batch of WRITEs to every replica
// -> end; a failure revokes, naming the segments the engine could not reach, and is placed once
// more elsewhere. Own-segment pieces are a memcpy.
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import type { PutStartRequest } from '../proto/gen/store/PutStartRequest.js';
import type { BatchKeysResponse__Output } from '../proto/gen/store/BatchKeysResponse.js';
import { ErrorCode } from '../common/error-code.js';
import type { BufferLease } from './buffer-pool.js';
import type { StagedValue } from './file-tier.js';
import { InvalidParamsError, StoreError } from './errors.js';
import { replicaPieces, type Piece, type TransferOp } from './transfer-plan.js';
import {
  asBuffer,
  check,
  checkKey,
  LARGE_VALUE_BYTES,
  slicesOf,
  transferFailure,
  putStartRequest,
  type BatchWriteResult,
  type PathCore,
  type PutConfig,
  type Value,
} from './path-core.js';

export interface WriteRpcs {
  verb: 'put' | 'upsert';
  start(req: PutStartRequest): Promise<{ status_code: number; replica_list: ReplicaInfo__Output[] }>;
  /** `checksums`: the CRC-32C of each slice ([]: none recorded). */
  end(key: string, checksums: number[]): Promise<{ status_code: number }>;
  /** `failed`: segments the writer could not reach (the master avoids them for a while). */
  revoke(key: string, failed: string[]): Promise<{ status_code: number }>;
  batchStart(reqs: PutStartRequest[]): Promise<{ status_code: number; results: { status_code: number; replica_list: ReplicaInfo__Output[] }[] }>;
  batchEnd(keys: string[], checksums: number[][]): Promise<BatchKeysResponse__Output>;
  batchRevoke(keys: string[], failed: string[]): Promise<BatchKeysResponse__Output>;
}

/** A write that failed for an unreachable segment is tried this many times in all. */
export const WRITE_ATTEMPTS = 2;

/**
 * The segments of `replicas` whose engines a failed transfer could not reach: the peers the
 * engine names in its rejection (native/transfer-engine.ts), mapped to their segment names.
 */
export function unreachableSegments(e: unknown, replicas: readonly ReplicaInfo__Output[]): string[] {
  let err = e as { endpoints?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; err && depth < 4 && !Array.isArray(err.endpoints); depth++) err = err.cause as typeof err;
  const endpoints = err && Array.isArray(err.endpoints) ? new Set(err.endpoints as string[]) : undefined;
  if (!endpoints || endpoints.size === 0) return [];
  const names = new Set<string>();
  for (const r of replicas) for (const h of r.handles) if (endpoints.has(h.te_endpoint)) names.add(h.segment_name);
  return [...names];
}

export class WritePath {
  constructor(private readonly core: PathCore) {}

  private readonly putRpcs: WriteRpcs = {
    verb: 'put',
    start: (req) => this.core.d.rpc('PutStart', () => this.core.d.master.putStart(req)),
    end: (key, checksums) => this.core.d.rpc('PutEnd', () => this.core.d.master.putEnd({ key, slice_checksums: checksums })),
    revoke: (key, failed) => this.core.d.rpc('PutRevoke', () => this.core.d.master.putRevoke({ key, failed_segments: failed })),
    batchStart: (requests) => this.core.d.rpc('BatchPutStart', () => this.core.d.master.batchPutStart({ requests })),
    batchEnd: (keys, checksums) => this.core.d.rpc('BatchPutEnd', () => this.core.d.master.batchPutEnd({ keys, checksums: checksums.map((crc32c) => ({ crc32c })) })),
    batchRevoke: (keys, failed) => this.core.d.rpc('BatchPutRevoke', () => this.core.d.master.batchPutRevoke({ keys, failed_segments: failed })),
  };

  private readonly upsertRpcs: WriteRpcs = {
    verb: 'upsert',
    start: (req) => this.core.d.rpc('UpsertStart', () => this.core.d.master.upsertStart(req)),
    end: (key, checksums) => this.core.d.rpc('UpsertEnd', () => this.core.d.master.upsertEnd({ key, slice_checksums: checksums })),
    revoke: (key, failed) => this.core.d.rpc('UpsertRevoke', () => this.core.d.master.upsertRevoke({ key, failed_segments: failed })),
    batchStart: (requests) => this.core.d.rpc('BatchUpsertStart', () => this.core.d.master.batchUpsertStart({ requests })),
    batchEnd: (keys, checksums) => this.core.d.rpc('BatchUpsertEnd', () => this.core.d.master.batchUpsertEnd({ keys, checksums: checksums.map((crc32c) => ({ crc32c })) })),
    batchRevoke: (keys, failed) => this.core.d.rpc('BatchUpsertRevoke', () => this.core.d.master.batchUpsertRevoke({ keys, failed_segments: failed })),
  };

  put(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writeOne(this.putRpcs, key, value, config);
  }

  upsert(key: string, value: Value, config?: PutConfig): Promise<void> {
    return this.writeOne(this.upsertRpcs, key, value, config);
  }

  putBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writeBatch(this.putRpcs, items);
  }

  upsertBatch(items: readonly { key: string; value: Value; config?: PutConfig }[]): Promise<BatchWriteResult[]> {
    return this.writeBatch(this.upsertRpcs, items);
  }

  private async writeOne(rpcs: WriteRpcs, key: string, value: Value, config?: PutConfig): Promise<void> {
    const what = `${rpcs.verb} ${JSON.stringify(key)}`;
    this.core.pool(what);
    checkKey(key, what);
    const slices = slicesOf(value, what);
    const req = putStartRequest(key, slices, config, what);
    for (let attempt = 1; ; attempt++) {
      const res = await rpcs.start(req);
      check(res.status_code, `${what}: start refused`);
      let sums: number[][];
      try {
        sums = await this.writeReplicas([{ replicas: res.replica_list, slices }], what);
      } catch (e) {
        // The space returns to the master, told which segments we could not reach; the original error matters.
        const unreachable = unreachableSegments(e, res.replica_list);
        await rpcs.revoke(key, unreachable).catch(() => {});
        // Once more elsewhere: the master now avoids the segments we could not reach.
        if (attempt < WRITE_ATTEMPTS && unreachable.length > 0) continue;
        throw e;
      }
      // The file tier's copy (spec rule 4), a Put's or an Upsert's: staged now, written after the
      // end, asynchronously. Its checksums go with the end when the write recorded none
      // (file-tier.ts says why: the master keeps only the current value's file).
      const staged = await this.core.d.files?.stage(key, slices);
      let ended;
      try {
        ended = await rpcs.end(key, sums[0].length > 0 || !staged ? sums[0] : staged.checksums);
      } catch (e) {
        staged?.cancel();
        throw e;
      }
      if (ended.status_code !== ErrorCode.OK) staged?.cancel();
      check(ended.status_code, `${what}: end refused`);
      staged?.commit();
      return;
    }
  }

  /**
   * Writes every object's slices to all its replicas: own-segment pieces by memcpy, the rest in
   * one engine batch from registered memory (the caller's, when it is registered, else one lease).
   */
  /**
   * Writes every object's slices to all its replicas: own-segment pieces by memcpy, the rest in
   * one engine batch from registered memory (the caller's, when it is registered, else one lease).
   * Returns, per object, the CRC-32C of each slice ([] when checksums are off), each computed where
   * the bytes are moved anyway: the copy into staging or an own segment, or the engine's WRITE
   * (path-core.ts Checksummer).
   */
  private async writeReplicas(objects: { replicas: ReplicaInfo__Output[]; slices: Uint8Array[] }[], what: string): Promise<number[][]> {
    const crc = this.core.checksums;
    const plans: { slices: Uint8Array[]; pieces: { p: Piece; slice: number }[]; sums: number[] }[] = [];
    for (const o of objects) {
      if (o.replicas.length === 0) throw new StoreError(ErrorCode.INTERNAL_ERROR, `${what}: the master granted no replica`);
      const lengths = o.slices.map((x) => x.byteLength);
      const pieces: { p: Piece; slice: number }[] = [];
      for (const r of o.replicas) replicaPieces(r, this.core.isOwn, lengths).forEach((p, i) => pieces.push({ p, slice: i }));
      plans.push({ slices: o.slices, pieces, sums: crc ? o.slices.map(() => -1) : [] });
    }
    // Stage the slices that remote pieces read from and that are not registered already (large
    // ones are registered in place for this write instead: a multi-MiB staging copy costs more).
    const sources = new Map<Uint8Array, number>();
    /** CRC of each source staged (computed by the copy into staging). */
    const stagedSums = new Map<Uint8Array, number>();
    const borrowed: number[] = [];
    let stageBytes = 0;
    let lease: BufferLease | undefined;
    try {
      for (const o of plans) {
        for (const { p, slice } of o.pieces) {
          if (p.local || sources.has(o.slices[slice])) continue;
          const src = o.slices[slice];
          let reg = this.core.registeredAddress(src);
          if (reg === undefined && src.byteLength >= LARGE_VALUE_BYTES) {
            reg = this.core.borrow(src);
            if (reg !== undefined) borrowed.push(reg);
          }
          sources.set(src, reg ?? -1 - stageBytes);
          if (reg === undefined) stageBytes += src.byteLength;
        }
      }
      if (stageBytes > 0) {
        const pool = this.core.pool(what);
        lease = pool.tryAcquire(stageBytes) ?? (await pool.acquire(stageBytes));
        const base = lease.address;
        const buf = lease.buffer;
        for (const [src, a] of sources) {
          if (a >= 0) continue;
          const off = -1 - a;
          if (crc) stagedSums.set(src, crc.copy(buf.subarray(off, off + src.byteLength), src));
          else asBuffer(src).copy(buf, off);
          sources.set(src, base + off);
        }
      }
      const ops: TransferOp[] = [];
      /** Per op that asked for a checksum: which object and slice it is the CRC of. */
      const asked: { op: number; plan: number; slice: number }[] = [];
      const meter = this.core.d.meter;
      for (let k = 0; k < plans.length; k++) {
        const o = plans[k];
        if (this.core.needsLookup(o.pieces.map((x) => x.p))) await this.core.resolveEndpoints(o.pieces.map((x) => x.p));
        for (const { p, slice } of o.pieces) {
          const src = o.slices[slice];
          if (p.local) {
            const dst = this.core.segmentView(p.handle, p.length);
            if (crc) o.sums[slice] = crc.copy(dst, src);
            else asBuffer(src).copy(dst);
            meter?.transfer('memcpy', 'write', p.length);
          } else if (p.length > 0) {
            const op = this.core.op('write', p, sources.get(src)!);
            if (crc && o.sums[slice] === -1) {
              const staged = stagedSums.get(src);
              if (staged !== undefined) o.sums[slice] = staged;
              else {
                op.checksum = true; // the engine computes it as it sends the bytes
                o.sums[slice] = -2;
                asked.push({ op: ops.length, plan: k, slice });
              }
            }
            ops.push(op);
          }
        }
      }
      if (ops.length > 0) {
        let got: Uint32Array | undefined | void;
        try {
          got = await this.core.d.engine.transfer(ops);
        } catch (e) {
          throw transferFailure(e, `${what}: write`);
        }
        if (meter) for (const op of ops) meter.transfer('engine', 'write', op.length);
        for (const a of asked) {
          // An engine that computes no checksums: one pass over the source here instead.
          plans[a.plan].sums[a.slice] = got ? got[a.op] : crc!.of(plans[a.plan].slices[a.slice]);
        }
      }
      if (crc) for (const o of plans) o.sums.forEach((v, j) => v < 0 && (o.sums[j] = crc.of(o.slices[j]))); // a slice with no piece of its own (empty)
      return plans.map((o) => o.sums);
    } finally {
      lease?.release();
      // The caller gets its buffer back only when no chunk can still touch it.
      // (giveBack rejects only for a malformed address; it must not mask the write's own error.)
      await Promise.all(borrowed.map((a) => this.core.giveBack(a).catch(() => {})));
    }
  }

  private async writeBatch(rpcs: WriteRpcs, items: readonly { key: string; value: Value; config?: PutConfig }[], attempt = 1): Promise<BatchWriteResult[]> {
    const what = `batch ${rpcs.verb} of ${items.length} keys`;
    this.core.pool(what);
    if (items.length === 0) return [];
    const results: BatchWriteResult[] = items.map((it) => ({ key: it.key }));
    const prepared: { i: number; slices: Uint8Array[]; req: PutStartRequest }[] = [];
    const seen = new Set<string>();
    items.forEach((it, i) => {
      try {
        const w = `${rpcs.verb} ${JSON.stringify(it.key)}`;
        checkKey(it.key, w);
        if (seen.has(it.key)) throw new InvalidParamsError(`${w}: the key appears twice in the batch`);
        seen.add(it.key);
        const slices = slicesOf(it.value, w);
        prepared.push({ i, slices, req: putStartRequest(it.key, slices, it.config, w) });
      } catch (e) {
        results[i].error = e as StoreError;
      }
    });
    if (prepared.length === 0) return results;
    const started = await rpcs.batchStart(prepared.map((p) => p.req));
    if (started.status_code !== ErrorCode.OK) {
      const err = StoreError.fromCode(started.status_code, `${what}: start refused`);
      for (const p of prepared) results[p.i].error = err;
      return results;
    }
    const granted = prepared.flatMap((p, k) => {
      const r = started.results[k];
      if (!r || r.status_code !== ErrorCode.OK) {
        results[p.i].error = StoreError.forItem(r?.status_code ?? ErrorCode.INTERNAL_ERROR, `${rpcs.verb} ${JSON.stringify(p.req.key)}: start refused`);
        return [];
      }
      return [{ ...p, replicas: r.replica_list }];
    });
    if (granted.length === 0) return results;
    const failed = new Set<number>();
    /** The slices' checksums of each object written, by its index in `items`. */
    const sums = new Map<number, number[]>();
    try {
      const all = await this.writeReplicas(granted, what);
      granted.forEach((g, k) => sums.set(g.i, all[k]));
    } catch {
      // Find which objects failed: retry each on its own (their space is still reserved).
      for (const g of granted) {
        try {
          sums.set(g.i, (await this.writeReplicas([g], `${rpcs.verb} ${JSON.stringify(g.req.key)}`))[0]);
        } catch (e) {
          failed.add(g.i);
          results[g.i].error = e instanceof StoreError ? e : transferFailure(e, `${rpcs.verb} ${JSON.stringify(g.req.key)}`);
        }
      }
    }
    const done = granted.filter((g) => !failed.has(g.i));
    const revoke = granted.filter((g) => failed.has(g.i));
    const unreachable = new Set<string>();
    for (const g of revoke) for (const seg of unreachableSegments(results[g.i].error, g.replicas)) unreachable.add(seg);
    if (revoke.length > 0)
      await rpcs
        .batchRevoke(
          revoke.map((g) => g.req.key!),
          [...unreachable],
        )
        .catch(() => undefined);
    // Objects that failed for an unreachable segment get one more try elsewhere.
    const again = attempt < WRITE_ATTEMPTS ? revoke.filter((g) => unreachableSegments(results[g.i].error, g.replicas).length > 0) : [];
    if (again.length > 0) {
      const retried = await this.writeBatch(
        rpcs,
        again.map((g) => items[g.i]),
        attempt + 1,
      );
      again.forEach((g, k) => (results[g.i] = retried[k]!));
    }
    if (done.length > 0) {
      // The file tier's copies, staged before the end as for a single write (writeOne).
      const staged = new Map<number, StagedValue>();
      const files = this.core.d.files;
      if (files) {
        for (const g of done) {
          const v = await files.stage(g.req.key!, g.slices);
          if (v) staged.set(g.i, v);
        }
      }
      let ended;
      try {
        ended = await rpcs.batchEnd(
          done.map((g) => g.req.key!),
          done.map((g) => {
            const own = sums.get(g.i)!;
            return own.length > 0 ? own : (staged.get(g.i)?.checksums ?? own);
          }),
        );
      } catch (e) {
        for (const v of staged.values()) v.cancel();
        throw e;
      }
      const byKey = new Map(ended.results.map((r) => [r.key, r.status_code]));
      for (const g of done) {
        const code = ended.status_code !== ErrorCode.OK ? ended.status_code : (byKey.get(g.req.key!) ?? ErrorCode.OK);
        if (code !== ErrorCode.OK) {
          staged.get(g.i)?.cancel();
          results[g.i].error = StoreError.fromCode(code, `${rpcs.verb} ${JSON.stringify(g.req.key)}: end refused`);
        } else staged.get(g.i)?.commit();
      }
    }
    return results;
  }
}
