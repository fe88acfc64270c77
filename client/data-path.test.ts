// The data path's decisions, driven without processes: which replica a Get falls back to, which
// keys of a batch are ended or revoked when part of the transfer fails, and the pure-server rule.
// The master is a scripted in-memory placement and the engine copies between plain Buffers keyed
// by endpoint; the real master and engine are exercised by e2e/data.test.ts.
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplicaCache } from './replica-cache.js';
import { copyWithCrc32c, crc32c } from '../native/index.js';
import { ARENA_RESULT_BYTES, DataPath, LARGE_VALUE_BYTES, type DataPathDeps, type MasterApi, type OwnSegment } from './data-path.js';
import { OffloadFileWriter } from './offload-file-writer.js';
import { BufferPool } from './buffer-pool.js';
import { OffsetAllocator } from '../common/offset-allocator.js';
import { InvalidParamsError, LeaseExpiredError, ObjectNotFoundError, TransferError, UnavailableError } from './errors.js';
import { ErrorCode } from '../common/error-code.js';
import type { EngineTransferOp, MappedRegion, ResultArenaPort, TransferEnginePort } from './native-port.js';
import type { Direction, TransferMeter, TransportKind } from './client-metrics.js';
import { ReplicaStatus } from '../proto/gen/store/ReplicaStatus.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import type { ReplicaCopy__Output } from '../proto/gen/store/ReplicaCopy.js';
import type { PutStartRequest } from '../proto/gen/store/PutStartRequest.js';

const POOL_BASE = 0x10_0000;
const SEG_SIZE = 4 << 20;
const ARENA_BASE = 0x8000_0000;

/** A result arena over one Buffer: bump allocation, `capacity` bytes, no reuse (enough for a test). */
function fakeArena(capacity: number): ResultArenaPort & { memory: Buffer; taken: number } {
  const memory = Buffer.alloc(capacity);
  return {
    close() {},
    address: ARENA_BASE,
    size: capacity,
    memory,
    taken: 0,
    take(length: number) {
      if (this.taken + length > capacity) return undefined;
      const b = memory.subarray(this.taken, this.taken + length);
      this.taken += length;
      return b;
    },
  };
}

/** Remote segments: endpoint -> memory; a dead endpoint refuses every op. */
class MemoryEngine implements TransferEnginePort {
  readonly endpoint = 'me:1';
  readonly segments = new Map<string, Buffer>();
  readonly dead = new Set<string>();
  /** Memory outside the pool the caller may register (large Get results), by address. */
  readonly extra = new Map<number, Buffer>();
  readonly registered = new Set<number>();
  /** Local address of every WRITE op, in order. */
  readonly writesFrom: number[] = [];
  /** Local address of every READ op, in order. */
  readonly readsInto: number[] = [];
  batches = 0;
  constructor(private readonly local: Buffer) {}
  start() {
    return this.endpoint;
  }
  registerRegion(address: number) {
    this.registered.add(address);
    return 1;
  }
  async unregisterRegion(address: number) {
    return this.registered.delete(address);
  }
  /** The buffer and offset behind a local address: a registered extra region, else the pool. */
  private localAt(address: number): [Buffer, number] {
    for (const a of this.registered) if (address >= a && address < a + this.extra.get(a)!.length) return [this.extra.get(a)!, address - a];
    if (address < POOL_BASE || address >= POOL_BASE + this.local.length) {
      throw Object.assign(new Error(`local address ${address} is not registered`), { code: 'ADDRESS_OUT_OF_RANGE' });
    }
    return [this.local, address - POOL_BASE];
  }
  close() {}
  /** No inline reads (InlineMemoryEngine has them): every read goes through transfer(). */
  readInline(_endpoint: string, _remoteAddress: number, _target: Uint8Array): boolean {
    return false;
  }
  readonly fences: { address: number; below: number; revoked?: number[] }[] = [];
  async setFence(address: number, fence: { below: number; revoked?: number[] }): Promise<void> {
    this.fences.push({ address, ...fence });
  }
  async transfer(ops: EngineTransferOp[]): Promise<void> {
    this.batches++;
    for (const op of ops) {
      if (this.dead.has(op.endpoint)) throw Object.assign(new Error(`connect ${op.endpoint} refused`), { code: 'CONNECTION_FAILED', endpoints: [op.endpoint] });
    }
    for (const op of ops) {
      const remote = this.segments.get(op.endpoint)!;
      const [local, l] = this.localAt(op.localAddress);
      if (op.op === 'write') this.writesFrom.push(op.localAddress);
      else this.readsInto.push(op.localAddress);
      if (op.op === 'write') local.copy(remote, op.remoteAddress, l, l + op.length);
      else remote.copy(local, l, op.remoteAddress, op.remoteAddress + op.length);
    }
  }
}

/** Also reads small ranges synchronously into any buffer, as the native engine does for same-host peers. */
class InlineMemoryEngine extends MemoryEngine {
  /** Endpoints whose inline reads are refused (no cached grant, say): transfer() must run. */
  readonly refuseInline = new Set<string>();
  inlineReads = 0;
  override readInline(endpoint: string, remoteAddress: number, target: Uint8Array): boolean {
    if (this.dead.has(endpoint) || this.refuseInline.has(endpoint) || target.byteLength > 64 * 1024) return false;
    const remote = this.segments.get(endpoint)!;
    target.set(remote.subarray(remoteAddress, remoteAddress + target.byteLength));
    this.inlineReads++;
    return true;
  }
}

/** Places each replica of an object on the next segments in turn; records ends and revokes. */
function scriptedMaster(endpoints: string[]) {
  const objects = new Map<string, { replicas: ReplicaInfo__Output[]; complete: boolean; sums?: number[] }>();
  const next = new Map(endpoints.map((e) => [e, 0]));
  let rr = 0;
  const ended: string[] = [];
  const revoked: string[] = [];
  /** Segments a writer reported unreachable (placement skips them, like the master's). */
  const avoided = new Set<string>();
  const start = (req: PutStartRequest) => {
    const key = req.key!;
    if (objects.has(key)) return { status_code: -201, replica_list: [] };
    const replicas: ReplicaInfo__Output[] = [];
    for (let r = 0; r < (req.config?.replica_num ?? 1); r++) {
      let ep = endpoints[rr++ % endpoints.length];
      while (avoided.has(ep) && avoided.size < endpoints.length) ep = endpoints[rr++ % endpoints.length];
      const handles = (req.slice_lengths ?? []).map((len) => {
        const at = next.get(ep)!;
        next.set(ep, at + Number(len));
        return { segment_name: ep, te_endpoint: ep, buffer: at, size: Number(len), status: 0, memory_type: 0 } as const;
      });
      replicas.push({ handles: [...handles], status: ReplicaStatus.COMPLETE } as ReplicaInfo__Output);
    }
    objects.set(key, { replicas, complete: false });
    return { status_code: 0, replica_list: replicas };
  };
  const end = (key: string, sums: number[] = []) => {
    ended.push(key);
    objects.get(key)!.complete = true;
    objects.get(key)!.sums = sums;
    return { status_code: 0 };
  };
  const revoke = (key: string, failed: string[] = []) => {
    for (const f of failed) avoided.add(f);
    revoked.push(key);
    objects.delete(key);
    return { status_code: 0 };
  };
  const list = (key: string) => {
    const o = objects.get(key);
    return o?.complete
      ? { status_code: 0, replica_list: o.replicas, lease_ttl_ms: 5000, slice_checksums: o.sums ?? [] }
      : { status_code: -200, replica_list: [], lease_ttl_ms: 0, slice_checksums: [] };
  };
  const api = {
    putStart: async (r) => start(r),
    batchPutStart: async (r) => ({ status_code: 0, results: r.requests!.map(start) }),
    putEnd: async (r) => end(r.key!, r.slice_checksums ?? []),
    batchPutEnd: async (r) => ({ status_code: 0, results: r.keys!.map((k, i) => ({ key: k, status_code: end(k, r.checksums?.[i]?.crc32c ?? []).status_code })) }),
    putRevoke: async (r) => revoke(r.key!, r.failed_segments ?? []),
    batchPutRevoke: async (r) => ({ status_code: 0, results: r.keys!.map((k) => ({ key: k, status_code: revoke(k, r.failed_segments ?? []).status_code })) }),
    getReplicaList: async (r) => list(r.key!),
    batchGetReplicaList: async (r) => ({ status_code: 0, results: r.keys!.map(list) }),
  } as Partial<MasterApi> as MasterApi;
  return { api, ended, revoked, objects, avoided };
}

/** An own segment over the engine's memory of `endpoint` (so memcpy and engine see the same bytes). */
function ownSegment(engine: MemoryEngine, endpoint: string): OwnSegment {
  const mem = engine.segments.get(endpoint)!;
  const region = { address: 0, size: mem.length, view: (o: number, n: number) => mem.subarray(o, o + n) } as unknown as MappedRegion;
  return { name: endpoint, id: endpoint, region, incarnation: 0 };
}

/** Records every meter call as "kind dir bytes". */
function recordingMeter(): TransferMeter & { calls: string[] } {
  const calls: string[] = [];
  return { calls, transfer: (kind: TransportKind, dir: Direction, bytes: number) => void calls.push(`${kind} ${dir} ${bytes}`) };
}

function setup(
  opts: {
    pool?: boolean;
    arena?: ReturnType<typeof fakeArena>;
    inline?: boolean;
    now?: () => number;
    own?: string[];
    maxRegions?: number;
    meter?: TransferMeter;
    checksums?: boolean;
    mismatches?: string[];
    /** More own segments (an SSD file's) and the deps of copies into them. */
    more?: OwnSegment[];
    files?: Pick<DataPathDeps, 'offloadFiles' | 'fenced'>;
  } = {},
) {
  const local = Buffer.alloc(4 << 20);
  const engine = opts.inline ? new InlineMemoryEngine(local) : new MemoryEngine(local);
  for (const ep of ['a:1', 'b:1', 'c:1']) engine.segments.set(ep, Buffer.alloc(SEG_SIZE));
  const arena = opts.arena;
  if (arena) {
    engine.extra.set(ARENA_BASE, arena.memory);
    engine.registerRegion(ARENA_BASE); // as the client does at setup
  }
  const master = scriptedMaster(['a:1', 'b:1', 'c:1']);
  const pool =
    opts.pool === false
      ? undefined
      : new BufferPool({
          primary: { address: POOL_BASE, size: local.length, view: (o: number, n: number) => local.subarray(o, o + n), release: () => {} },
          allocator: new OffsetAllocator('local', 0, local.length),
          maxRegions: opts.maxRegions,
        });
  const segments = new Map((opts.own ?? []).map((ep) => [ep, ownSegment(engine, ep)]));
  for (const seg of opts.more ?? []) segments.set(seg.name, seg);
  const path = new DataPath({
    master: master.api,
    engine,
    pool,
    segments,
    meter: opts.meter,
    // Small caller buffers sit outside registered memory (staged); large ones and large results
    // get a fake address the engine can resolve once they are registered.
    addressOf: (v) => {
      if (arena && v.buffer === arena.memory.buffer) return ARENA_BASE + v.byteOffset - arena.memory.byteOffset;
      const known = [...engine.extra].find(([, b]) => b === v)?.[0];
      if (known !== undefined || v.byteLength < LARGE_VALUE_BYTES) return known ?? -1;
      const a = 0x4000_0000 * (engine.extra.size + 1);
      engine.extra.set(a, v as Buffer);
      return a;
    },
    resultArena: arena,
    localMemcpy: true,
    now: opts.now ?? (() => 0),
    lookupEndpoint: async () => null,
    rpc: (_what, call) => call(),
    checksums: opts.checksums ? { of: (d) => crc32c(d), copy: (dst, src) => copyWithCrc32c(dst, src) } : undefined,
    onChecksumMismatch: (key, segment) => opts.mismatches?.push(`${key}@${segment}`),
    ...opts.files,
  });
  return { path, engine, master, pool, segments };
}

describe('data path', () => {
  it('writes every replica in one transfer batch and reads the value back', async () => {
    const { path, engine } = setup();
    const value = Buffer.from('hello, replicas');
    await path.put('k', value, { replica_num: 3 });
    expect(engine.batches).toBe(1);
    for (const ep of ['a:1', 'b:1', 'c:1']) expect(engine.segments.get(ep)!.subarray(0, value.length).toString()).toBe('hello, replicas');
    expect((await path.get('k')).toString()).toBe('hello, replicas');
  });

  it('a Get skips a replica whose store is unreachable and fails only when all are', async () => {
    const { path, engine } = setup();
    await path.put('k', Buffer.from('survives'), { replica_num: 2 });
    engine.dead.add('a:1');
    expect((await path.get('k')).toString()).toBe('survives');
    engine.dead.add('b:1');
    const err = await path.get('k').catch((e) => e);
    expect(err).toBeInstanceOf(TransferError);
    expect(err.message).toMatch(/every replica failed \(2 tried\)/);
  });

  it('a failed Put is revoked, not ended', async () => {
    const { path, engine, master } = setup();
    for (const ep of ['a:1', 'b:1', 'c:1']) engine.dead.add(ep);
    await expect(path.put('k', Buffer.from('x'))).rejects.toBeInstanceOf(TransferError);
    expect(master.revoked).toEqual(['k', 'k']); // the first attempt and the retry elsewhere
    expect(master.ended).toEqual([]);
    await expect(path.get('k')).rejects.toBeInstanceOf(ObjectNotFoundError);
  });

  it('a batch Put ends the objects that were written and revokes only those that failed', async () => {
    const { path, engine, master } = setup();
    engine.dead.add('b:1'); // k1 lands on b:1 and k2 on c:1: both fail, are revoked and go to a:1
    engine.dead.add('c:1');
    const r = await path.putBatch(['k0', 'k1', 'k2'].map((key) => ({ key, value: Buffer.from(key) })));
    expect(r.map((x) => x.error?.name)).toEqual([undefined, undefined, undefined]);
    expect(master.revoked.sort()).toEqual(['k1', 'k2']);
    expect(master.ended.sort()).toEqual(['k0', 'k1', 'k2']);
    for (const k of ['k0', 'k1', 'k2']) expect(master.objects.get(k)!.replicas[0].handles[0].te_endpoint).toBe('a:1');
    // nowhere left to go: the error, once both attempts failed
    engine.dead.add('a:1');
    const bad = await path.putBatch([{ key: 'k3', value: Buffer.from('k3') }]);
    expect(bad[0].error).toBeInstanceOf(TransferError);
    expect(master.revoked.filter((k) => k === 'k3')).toHaveLength(2);
  });

  it('a batch Put whose failed objects find room elsewhere on the retry ends them all', async () => {
    const { path, engine, master } = setup();
    engine.dead.add('b:1');
    const r = await path.putBatch(['k0', 'k1', 'k2'].map((key) => ({ key, value: Buffer.from(key) })));
    expect(r.map((x) => x.error?.name)).toEqual([undefined, undefined, undefined]);
    expect(master.revoked).toEqual(['k1']);
    expect(master.ended.sort()).toEqual(['k0', 'k1', 'k2']);
    const got = await path.getBatch(['k0', 'k1', 'k2']);
    expect(got.map((g) => g.value?.toString() ?? g.error?.name)).toEqual(['k0', 'k1', 'k2']);
  });

  it('a batch Get falls back per object when the shared transfer fails', async () => {
    const { path, engine } = setup();
    await path.putBatch(['x', 'y'].map((key) => ({ key, value: Buffer.from(key.repeat(10)), config: { replica_num: 2 } })));
    engine.dead.add('a:1');
    const got = await path.getBatch(['x', 'y']);
    expect(got.map((g) => g.value?.toString())).toEqual(['x'.repeat(10), 'y'.repeat(10)]);
  });

  it('large Get results are read straight into the result arena; small ones, and all once it is full, through staging', async () => {
    const big = randomBytes(ARENA_RESULT_BYTES + 5);
    const arena = fakeArena(2 * big.length + 100);
    const { path, engine } = setup({ arena });
    await path.put('big', big);
    await path.put('small', Buffer.from('small'));
    const inArena = (a: number) => a >= ARENA_BASE && a < ARENA_BASE + arena.size;
    const one = await path.get('big');
    expect(one.equals(big)).toBe(true);
    expect(inArena(engine.readsInto.at(-1)!)).toBe(true); // no staging lease, no copy
    expect((await path.get('small')).toString()).toBe('small');
    expect(inArena(engine.readsInto.at(-1)!)).toBe(false);
    const got = await path.getBatch(['big', 'small']);
    expect(got[0].value!.equals(big)).toBe(true);
    expect(got[1].value!.toString()).toBe('small');
    expect(got[0].value!.buffer).toBe(arena.memory.buffer);
    expect(arena.taken).toBe(2 * big.length);
    // Full: the result is a Buffer of its own, filled through the staging lease.
    const third = await path.get('big');
    expect(third.equals(big)).toBe(true);
    expect(third.buffer).not.toBe(arena.memory.buffer);
    expect(inArena(engine.readsInto.at(-1)!)).toBe(false);
    // Results never share bytes: the first one is still intact.
    expect(one.equals(big)).toBe(true);
    // A result passed back is registered memory: put from it without a staging copy.
    await path.put('again', one);
    expect(inArena(engine.writesFrom.at(-1)!)).toBe(true);
    expect((await path.get('again')).equals(big)).toBe(true);
  });

  it('small Get results are carved from arena slabs while it has room: read straight into, no staging', async () => {
    const arena = fakeArena(4 * 64 * 1024);
    const { path, engine, pool } = setup({ arena });
    const values = Array.from({ length: 20 }, (_, i) => randomBytes(4000 + i));
    for (const [i, v] of values.entries()) await path.put(`s${i}`, v);
    const got: Buffer[] = [];
    for (let i = 0; i < values.length; i++) {
      got.push(await path.get(`s${i}`));
      const into = engine.readsInto.at(-1)!;
      expect(into - ARENA_BASE).toBe(got[i].byteOffset); // the engine read into the result itself
    }
    got.forEach((g, i) => expect(g.equals(values[i])).toBe(true));
    expect(got[0].buffer).toBe(arena.memory.buffer);
    expect(arena.taken).toBe(2 * 64 * 1024); // 16 results of ~4 KiB per 64 KiB slab
    expect(pool!.stats().leases).toBe(0);
  });

  it('a Get that fails on one replica reads the next into the same arena result', async () => {
    const arena = fakeArena(4 * ARENA_RESULT_BYTES);
    const { path, engine } = setup({ arena });
    const v = randomBytes(ARENA_RESULT_BYTES);
    await path.put('k', v, { replica_num: 2 });
    engine.dead.add('a:1');
    expect((await path.get('k')).equals(v)).toBe(true);
    expect(arena.taken).toBe(v.length);
    engine.dead.add('b:1');
    await expect(path.get('k')).rejects.toBeInstanceOf(TransferError);
  });

  it('small Get results never share bytes with one another', async () => {
    const { path } = setup();
    const values = Array.from({ length: 40 }, (_, i) => randomBytes(4096 + i));
    for (const [i, v] of values.entries()) await path.put(`s${i}`, v);
    const got: Buffer[] = [];
    for (let i = 0; i < values.length; i++) got.push(await path.get(`s${i}`));
    got.forEach((g, i) => expect(g.equals(values[i])).toBe(true));
    got[0].fill(0);
    got.slice(1).forEach((g, i) => expect(g.equals(values[i + 1])).toBe(true));
  });

  it('a large Put is written from the caller buffer in place, also by overlapping Puts of it', async () => {
    const { path, engine } = setup();
    const big = randomBytes(LARGE_VALUE_BYTES);
    await Promise.all([path.put('p1', big), path.put('p2', big, { replica_num: 2 })]);
    expect(engine.writesFrom.length).toBe(3);
    expect(engine.writesFrom.every((a) => a !== -1 && engine.extra.get(a) === big)).toBe(true); // no staging lease
    expect(engine.registered.size).toBe(0); // registered for the writes only
    expect((await path.get('p1')).equals(big)).toBe(true);
    expect((await path.get('p2')).equals(big)).toBe(true);
    await path.put('small', Buffer.from('staged'));
    expect(engine.writesFrom[3]).toBeGreaterThanOrEqual(POOL_BASE);
    expect(engine.writesFrom[3]).toBeLessThan(POOL_BASE + (4 << 20));
  });

  it('an own segment unmounted while a Put waits for staging fails the Put with a TransferError', async () => {
    const { path, pool, segments, master } = setup({ own: ['a:1'], maxRegions: 1 });
    const held = await pool!.acquire(16); // the Put's staging lease must wait for this one
    const put = path.put('k', Buffer.from('two replicas'), { replica_num: 2 }); // a:1 (own, memcpy) and b:1
    await new Promise((r) => setImmediate(r));
    segments.delete('a:1'); // the segment is unmounted and unmapped meanwhile
    held.release();
    const err = await put.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferError);
    expect((err as Error).message).toMatch(/own segment a:1 was unmounted during the operation/);
    expect(master.revoked).toEqual(['k']);
  });

  it('tells the meter how each piece moved: memcpy for own segments, the engine for the rest', async () => {
    const meter = recordingMeter();
    const { path } = setup({ own: ['a:1'], meter });
    await path.put('k', [Buffer.alloc(100, 1), Buffer.alloc(50, 2)], { replica_num: 2 }); // a:1 own, b:1 remote
    expect(meter.calls.sort()).toEqual(['engine write 100', 'engine write 50', 'memcpy write 100', 'memcpy write 50']);
    meter.calls.length = 0;
    expect((await path.get('k')).length).toBe(150); // own replica first
    expect(meter.calls).toEqual(['memcpy read 150']);
  });

  it('a pure server refuses Get and Put before any master call', async () => {
    const { path, master } = setup({ pool: false });
    await expect(path.put('k', Buffer.from('x'))).rejects.toBeInstanceOf(UnavailableError);
    await expect(path.get('k')).rejects.toThrow(/pure server/);
    expect(master.objects.size).toBe(0);
  });
});

describe('inline reads (an engine that finishes small same-host reads synchronously)', () => {
  const inlineSetup = (now?: () => number) => {
    const s = setup({ inline: true, now });
    return { ...s, engine: s.engine as InlineMemoryEngine };
  };

  it('a small Get and getInto are read inline: no transfer batch, no staging lease', async () => {
    const { path, engine, pool } = inlineSetup();
    const v = randomBytes(4096);
    await path.put('k', v);
    const batches = engine.batches;
    expect((await path.get('k')).equals(v)).toBe(true);
    const target = Buffer.alloc(5000, 1);
    expect(await path.getInto('k', target)).toBe(4096);
    expect(target.subarray(0, 4096).equals(v)).toBe(true);
    expect(target.subarray(4096).every((x) => x === 1)).toBe(true);
    expect(engine.inlineReads).toBe(2);
    expect(engine.batches).toBe(batches);
    expect(pool!.stats().leases).toBe(0);
  });

  it('every slice of a multi-slice value lands at its offset', async () => {
    const { path, engine } = inlineSetup();
    const slices = [randomBytes(100), randomBytes(7), randomBytes(3000)];
    await path.put('k', slices);
    expect((await path.get('k')).equals(Buffer.concat(slices))).toBe(true);
    expect(engine.inlineReads).toBe(3);
  });

  it('a refused inline read falls back to the engine, then to the next replica; all failing is an error', async () => {
    const { path, engine } = inlineSetup();
    const v = randomBytes(2048);
    await path.put('k', v, { replica_num: 2 });
    engine.refuseInline.add('a:1');
    const batches = engine.batches;
    expect((await path.get('k')).equals(v)).toBe(true); // the engine reads a:1
    expect(engine.batches).toBe(batches + 1);
    engine.dead.add('a:1'); // inline refused, transfer fails: b:1 is read
    expect((await path.get('k')).equals(v)).toBe(true);
    engine.dead.add('b:1');
    const err = await path.get('k').catch((e) => e);
    expect(err).toBeInstanceOf(TransferError);
    expect(err.message).toMatch(/every replica failed \(2 tried\)/);
  });

  it('inline reads are reported to the meter as inline', async () => {
    const meter = recordingMeter();
    const { path } = setup({ inline: true, meter });
    await path.put('k', randomBytes(4096));
    meter.calls.length = 0;
    await path.get('k');
    expect(meter.calls).toEqual(['inline read 4096']);
  });

  it('values above 64 KiB are never read inline', async () => {
    const { path, engine } = inlineSetup();
    const v = randomBytes(64 * 1024 + 1);
    await path.put('k', v);
    expect((await path.get('k')).equals(v)).toBe(true);
    expect(engine.inlineReads).toBe(0);
  });

  it('an inline read that outlived its lease returns no data', async () => {
    let t = 0;
    const { path, engine } = inlineSetup(() => t);
    await path.put('k', Buffer.from('leased'));
    const target = Buffer.alloc(6);
    const slowEngine = engine.readInline.bind(engine);
    engine.readInline = (ep, addr, tgt) => {
      t += 6000; // the scripted master grants 5000 ms
      return slowEngine(ep, addr, tgt);
    };
    await expect(path.get('k')).rejects.toBeInstanceOf(LeaseExpiredError);
    await expect(path.getInto('k', target)).rejects.toBeInstanceOf(LeaseExpiredError);
    engine.readInline = slowEngine;
    expect((await path.get('k')).toString()).toBe('leased');
  });

  it('bad input is refused before any master call', async () => {
    const { path, master } = inlineSetup();
    await expect(path.get('')).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(path.getInto('k', 'nope' as unknown as Uint8Array)).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(path.get('absent')).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(master.objects.size).toBe(0);
  });

  it('keys outside the alphabet (common/key-rules.ts) are refused with INVALID_KEY before any master call', async () => {
    const { path, master } = inlineSetup();
    const refusedAs = async (p: Promise<unknown>, pattern: RegExp) => {
      const e = await p.then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(InvalidParamsError);
      expect((e as InvalidParamsError).code).toBe(ErrorCode.INVALID_KEY);
      expect((e as Error).message).toMatch(pattern);
    };
    for (const [key, why] of [
      ['two\nkeys', /control character U\+000A/],
      ['alias\ud800', /unpaired surrogate U\+D800/],
      ['alias\udfff', /unpaired surrogate U\+DFFF/],
      ['k'.repeat(4097), /4097 UTF-8 bytes/],
    ] as const) {
      await refusedAs(path.put(key, Buffer.from('v')), why);
      await refusedAs(path.upsert(key, Buffer.from('v')), why);
      await refusedAs(path.get(key), why);
      await refusedAs(path.getInto(key, Buffer.alloc(8)), why);
      await refusedAs(path.getBatch(['fine', key]), why);
      const [ok, bad] = await path.putBatch([
        { key: 'fine', value: Buffer.from('v') },
        { key, value: Buffer.from('v') },
      ]);
      expect(ok.error).toBeUndefined();
      expect(bad.error).toBeInstanceOf(InvalidParamsError);
      expect((bad.error as InvalidParamsError).code).toBe(ErrorCode.INVALID_KEY);
      await path.get('fine');
      master.objects.delete('fine');
    }
    expect([...master.objects.keys()]).toEqual([]);
  });
});

describe('writes that meet an unreachable segment', () => {
  it('are revoked naming the segment and placed again elsewhere, once', async () => {
    const { path, engine, master } = setup();
    engine.dead.add('b:1');
    const value = Buffer.from('two replicas despite a dead store');
    await path.put('k', value, { replica_num: 2 }); // first a+b (b dead), then c+a
    expect(master.revoked).toEqual(['k']);
    expect([...master.avoided]).toEqual(['b:1']);
    expect(
      master.objects
        .get('k')!
        .replicas.map((r) => r.handles[0].te_endpoint)
        .sort(),
    ).toEqual(['a:1', 'c:1']);
    expect((await path.get('k')).equals(value)).toBe(true);
    // every store dead: one retry, then the error
    engine.dead.add('a:1');
    engine.dead.add('c:1');
    await expect(path.put('k2', value)).rejects.toBeInstanceOf(TransferError);
    expect(master.revoked.filter((k) => k === 'k2')).toHaveLength(2);
  });

  it('in a batch, only the objects that failed are retried', async () => {
    const { path, engine, master } = setup();
    engine.dead.add('c:1');
    const items = ['x', 'y', 'z'].map((key) => ({ key, value: Buffer.from(key.repeat(10)) }));
    const res = await path.putBatch(items); // x->a, y->b, z->c (dead): z again elsewhere
    expect(res.map((r) => r.error)).toEqual([undefined, undefined, undefined]);
    expect(master.revoked).toEqual(['z']);
    for (const it of items) expect((await path.get(it.key)).equals(it.value)).toBe(true);
  });
});

function inlineSetupWith(opts: Parameters<typeof setup>[0]) {
  const s = setup({ ...opts, inline: true });
  return { ...s, engine: s.engine as InlineMemoryEngine };
}

describe('checksums', () => {
  it('are recorded at PutEnd, one per slice, whatever the value went through', async () => {
    const { path, master } = setup({ checksums: true, own: ['a:1'] });
    const small = randomBytes(1000); // staged
    const big = randomBytes(LARGE_VALUE_BYTES + 5); // written in place
    await path.put('small', small, { replica_num: 3 }); // own segment a:1 (memcpy) and b, c
    await path.put('slices', [small.subarray(0, 10), small.subarray(10)]);
    await path.put('big', big, { replica_num: 2 });
    await path.putBatch([{ key: 'b1', value: small }]);
    expect(master.objects.get('small')!.sums).toEqual([crc32c(small)]);
    expect(master.objects.get('slices')!.sums).toEqual([crc32c(small.subarray(0, 10)), crc32c(small.subarray(10))]);
    expect(master.objects.get('big')!.sums).toEqual([crc32c(big)]);
    expect(master.objects.get('b1')!.sums).toEqual([crc32c(small)]);
  });

  it('a replica whose bytes changed is skipped for the next, counted; none left intact is an error', async () => {
    const mismatches: string[] = [];
    const { path, engine, master } = setup({ checksums: true, mismatches });
    const value = randomBytes(5000);
    await path.put('k', value, { replica_num: 2 });
    const [first, second] = master.objects.get('k')!.replicas.map((r) => r.handles[0]);
    engine.segments.get(first.te_endpoint)![Number(first.buffer) + 7] ^= 0xff; // one bit flipped in the first replica
    expect((await path.get('k')).equals(value)).toBe(true);
    expect(mismatches).toEqual([`k@${first.segment_name}`]);
    const target = Buffer.alloc(5000);
    expect(await path.getInto('k', target)).toBe(5000);
    expect(target.equals(value)).toBe(true);
    engine.segments.get(second.te_endpoint)![Number(second.buffer)] ^= 1;
    await expect(path.get('k')).rejects.toThrow(/every replica failed.*CRC-32C/s);
    const batch = await path.getBatch(['k']);
    expect(batch[0].error).toBeInstanceOf(TransferError);
  });

  it('inline reads are checked too; objects written without checksums are read unchecked', async () => {
    const mismatches: string[] = [];
    const { path, engine, master } = inlineSetupWith({ checksums: true, mismatches });
    await path.put('k', Buffer.from('inline and checked'), { replica_num: 2 });
    const h = master.objects.get('k')!.replicas[0].handles[0];
    engine.segments.get(h.te_endpoint)![Number(h.buffer)] ^= 0x20;
    expect((await path.get('k')).toString()).toBe('inline and checked');
    expect(mismatches.length).toBeGreaterThan(0);
    const plain = setup({ checksums: false });
    await plain.path.put('u', Buffer.from('unchecked'));
    expect(plain.master.objects.get('u')!.sums).toEqual([]);
  });
});

describe('replica lists reused under their lease', () => {
  function counted(master: ReturnType<typeof scriptedMaster>): { calls: () => number } {
    let n = 0;
    const list = master.api.getReplicaList;
    master.api.getReplicaList = (r) => {
      n++;
      return list(r);
    };
    return { calls: () => n };
  }

  it('a second read within half the lease asks the master nothing; later ones ask again', async () => {
    let t = 0;
    const { path, master } = setup({ now: () => t });
    await path.put('hot', Buffer.from('prefix'));
    const c = counted(master);
    expect((await path.get('hot')).toString()).toBe('prefix');
    t += 2000; // the scripted master grants 5000 ms: reused until 2500
    expect((await path.get('hot')).toString()).toBe('prefix');
    const target = Buffer.alloc(6);
    expect(await path.getInto('hot', target)).toBe(6);
    expect(c.calls()).toBe(1);
    expect(path.replicaCacheStats()).toMatchObject({ hits: 2, entries: 1 });
    t += 600; // past half the lease
    expect((await path.get('hot')).toString()).toBe('prefix');
    expect(c.calls()).toBe(2);
    path.clearReplicaCache();
    await path.get('hot');
    expect(c.calls()).toBe(3);
  });

  it('a read through a cached list that fails is redone with a fresh list', async () => {
    const { path, master, engine } = setup();
    await path.put('k', Buffer.from('moved'), { replica_num: 2 });
    await path.get('k'); // cached: both replicas
    const c = counted(master);
    // The object's replicas now live elsewhere (as after a segment was lost and rewritten).
    const o = master.objects.get('k')!;
    engine.dead.add(o.replicas[0].handles[0].te_endpoint);
    engine.dead.add(o.replicas[1].handles[0].te_endpoint);
    await expect(path.get('k')).rejects.toThrow(/every replica failed/);
    expect(c.calls()).toBe(1); // the cached attempt failed, then one fresh list was asked for
  });

  it('keeps at most maxEntries lists, none with 0', async () => {
    const { path } = setup();
    for (const k of ['a', 'b', 'c']) await path.put(k, Buffer.from(k));
    for (const k of ['a', 'b', 'c']) await path.get(k);
    expect(path.replicaCacheStats().entries).toBe(3);
    const small = new ReplicaCache(2);
    const res = { status_code: 0, replica_list: [], lease_ttl_ms: 5000, slice_checksums: [], version: 0 };
    small.remember('a', res, 0);
    small.remember('b', res, 0);
    small.remember('c', res, 0);
    expect([small.lookup('a', 1), small.lookup('b', 1), small.lookup('c', 1)].map((e) => e !== undefined)).toEqual([false, true, true]);
    const off = new ReplicaCache(0);
    off.remember('a', res, 0);
    expect(off.lookup('a', 1)).toBeUndefined();
  });
});

describe('replica copies of a Ping reply (replica-copy.ts copyReplicas)', () => {
  /** A copy of `n` bytes at `from` on a:1 to `to` on `target`, with the checksum of those bytes when `sum` is given. */
  function copy(id: number, target: string, from: number, to: number, n: number, sum?: number): ReplicaCopy__Output {
    const h = (ep: string, at: number) => ({ segment_name: ep, te_endpoint: ep, buffer: at, size: n, status: 0, memory_type: 0, incarnation: 0, generation: 0 });
    return {
      copy_id: id,
      key: `k${id}`,
      source: { handles: [h('a:1', from)], status: ReplicaStatus.COMPLETE } as unknown as ReplicaInfo__Output,
      target: { handles: [h(target, to)], status: ReplicaStatus.INITIALIZED } as unknown as ReplicaInfo__Output,
      slice_checksums: sum === undefined ? [] : [sum],
    };
  }

  it('copies whose pieces are all remote move as one batch of reads and one of writes, checked against their CRC-32C', async () => {
    const { path, engine, pool } = setup({ checksums: true });
    const a = engine.segments.get('a:1')!;
    randomBytes(3 * 4096).copy(a, 0);
    const copies = [0, 1, 2].map((i) => copy(i + 1, i === 2 ? 'c:1' : 'b:1', i * 4096, i * 4096, 4096, crc32c(a.subarray(i * 4096, (i + 1) * 4096))));
    copies.push(copy(4, 'b:1', 0, 3 * 4096, 4096, 12345)); // recorded CRC-32C does not match the bytes
    const out = await path.copyReplicas(copies);
    expect(out.slice(0, 3)).toEqual([undefined, undefined, undefined]);
    expect(out[3]?.message).toMatch(/do not have the CRC-32C their writer recorded/);
    expect(engine.batches).toBe(2); // four reads in one batch, three writes in another
    expect(engine.segments.get('b:1')!.subarray(0, 8192).equals(a.subarray(0, 8192))).toBe(true);
    expect(engine.segments.get('c:1')!.subarray(8192, 12288).equals(a.subarray(8192, 12288))).toBe(true);
    expect(
      engine.segments
        .get('b:1')!
        .subarray(12288, 16384)
        .every((b) => b === 0),
    ).toBe(true); // the bad copy wrote nothing
    expect(pool!.stats()).toMatchObject({ leases: 0, leasedBytes: 0 });
  });

  it('a batch that fails is made again copy by copy: only the copy to the dead store fails, naming it', async () => {
    const { path, engine, pool } = setup();
    const a = engine.segments.get('a:1')!;
    randomBytes(2 * 4096).copy(a, 0);
    engine.dead.add('c:1');
    const out = await path.copyReplicas([copy(1, 'b:1', 0, 0, 4096), copy(2, 'c:1', 4096, 0, 4096)]);
    expect(out[0]).toBeUndefined();
    expect(out[1]?.message).toMatch(/c:1/);
    expect(engine.segments.get('b:1')!.subarray(0, 4096).equals(a.subarray(0, 4096))).toBe(true);
    expect(pool!.stats()).toMatchObject({ leases: 0, leasedBytes: 0 });
  });

  it('a copy from own memory into an own SSD file is a file write at the target; a generation its fence names is never written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvstore-copy-file-'));
    const fd = openSync(join(dir, 'ssd'), 'w+');
    try {
      const fileBase = 0x9000_0000;
      const region = { address: fileBase, size: 1 << 20, kind: 'file', fd, view: () => Buffer.alloc(0) } as unknown as MappedRegion;
      const ssd: OwnSegment = { name: 'ssd:1', id: 'ssd:1', region, incarnation: 0, kind: 'ssd', file: { fd, offset: 8192 } };
      const fenced = new Set<number>([7]);
      const { path, engine } = setup({
        own: ['a:1'],
        more: [ssd],
        checksums: true,
        files: { offloadFiles: new OffloadFileWriter(), fenced: (name, gen) => name === 'ssd:1' && fenced.has(gen) },
      });
      const a = engine.segments.get('a:1')!;
      randomBytes(8192).copy(a, 0);
      const toFile = (id: number, from: number, at: number, gen: number): ReplicaCopy__Output => {
        const c = copy(id, 'ssd:1', from, fileBase + at, 4096, crc32c(a.subarray(from, from + 4096)));
        c.target!.handles[0].generation = gen;
        return c;
      };
      const out = await path.copyReplicas([toFile(1, 0, 0, 5), toFile(2, 4096, 4096, 7)]);
      expect(out[0]).toBeUndefined();
      expect(out[1]?.message).toMatch(/refused by its write fence/);
      expect(engine.batches).toBe(0); // no engine: a positioned write
      const f = readFileSync(join(dir, 'ssd'));
      expect(f.subarray(8192, 8192 + 4096).equals(a.subarray(0, 4096))).toBe(true); // at the segment's file offset
      expect(f.length).toBe(8192 + 4096); // the fenced copy wrote nothing
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a read batch that fails gives every staging lease back', async () => {
    const { path, engine, pool } = setup();
    engine.dead.add('a:1');
    const out = await path.copyReplicas([copy(1, 'b:1', 0, 0, 4096), copy(2, 'c:1', 4096, 0, 4096)]);
    expect(out.map((e) => e?.message)).toEqual([expect.stringMatching(/a:1/), expect.stringMatching(/a:1/)]);
    expect(pool!.stats()).toMatchObject({ leases: 0, leasedBytes: 0 });
  });
});
