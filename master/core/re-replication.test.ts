// Re-replication in MasterCore: an object that lost a replica with a segment is copied back by a
// client that offers to copy (Ping can_copy); the copy joins the object only when reported ok and
// the object did not change meanwhile; failed and lost copies keep their space until fenced.
import { ErrorCode } from '../../common/error-code.js';
import type { MasterCore } from './master-core.js';
import { makeCore, MEMORY, mountReq, putReq, usage } from './master-core-fixture.js';
import { COPY_ATTEMPTS, COPY_TIMEOUT_MS } from './re-replication.js';

const TTL = 1000;
const INC = 77;
/** What k takes on a segment: 4096 + 100 bytes, the allocator rounding 100 up to 104. */
const TARGET_BYTES = 4200;

/** Segments a, b, c (1 MiB each, one client each), and `k` of 4096 + 100 bytes with replicas on a and b. */
function setup(): MasterCore {
  const core = makeCore({ clientTtlMs: TTL });
  core.mountSegment(mountReq('a', 1 << 20, 'ca', 0x1000_0000, '10.0.0.1:1', INC), 0);
  core.mountSegment(mountReq('b', 1 << 20, 'cb', 0x2000_0000, '10.0.0.2:1', INC), 0);
  core.putStart(putReq('k', [4096, 100], { replica_num: 2, preferred_segment: 'a' }), 0);
  expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [11, 22] }, 0).status_code).toBe(ErrorCode.OK);
  core.mountSegment(mountReq('c', 1 << 20, 'cc', 0x3000_0000, '10.0.0.3:1', INC), 0);
  return core;
}

function segmentsOf(core: MasterCore, key: string, now: number): string[][] {
  return core.getReplicaList({ key }, now).replica_list.map((r) => r.handles.map((h) => h.segment_name));
}

/** Client ca goes silent: its segment is unmounted and k keeps one replica (on b). */
function loseA(core: MasterCore, now = TTL + 1): void {
  core.ping({ client_id: 'cb', fence_acks: [], can_copy: false }, now - 1);
  core.ping({ client_id: 'cc', fence_acks: [], can_copy: false }, now - 1);
  expect(core.sweep(now).droppedClients).toEqual(['ca']);
}

const ping = (core: MasterCore, client: string, now: number, can_copy = true) => core.ping({ client_id: client, fence_acks: [], can_copy }, now);

describe('re-replication', () => {
  it('copies a replica lost with a segment to another segment, and adds it once reported', () => {
    const core = setup();
    expect(segmentsOf(core, 'k', 1)).toEqual([
      ['a', 'a'],
      ['b', 'b'],
    ]);
    loseA(core);
    expect(segmentsOf(core, 'k', TTL + 2)).toEqual([['b', 'b']]);
    expect(core.stats(TTL + 2)).toMatchObject({ underReplicated: 1, copiesInFlight: 0 });

    expect(ping(core, 'cb', TTL + 3, false).copies).toEqual([]); // only a client that offers gets copies
    const [copy, ...more] = ping(core, 'cb', TTL + 3).copies;
    expect(more).toEqual([]);
    expect(copy.key).toBe('k');
    expect(copy.source!.handles.map((h) => [h.segment_name, h.size, h.status])).toEqual([
      ['b', 4096, expect.any(Number)],
      ['b', 100, expect.any(Number)],
    ]);
    // the target is on the one segment without a replica, with the copy's write generation
    expect(copy.target!.handles.map((h) => [h.segment_name, h.size, h.incarnation, h.generation])).toEqual([
      ['c', 4096, INC, TTL + 4],
      ['c', 100, INC, TTL + 4],
    ]);
    expect(copy.slice_checksums).toEqual([11, 22]);
    expect(ping(core, 'cc', TTL + 3).copies).toEqual([]); // one copy per object at a time
    expect(usage(core).c).toBe(TARGET_BYTES); // the target is reserved (sizes rounded up by the allocator)

    expect(core.replicaCopied({ client_id: 'cb', copy_id: copy.copy_id, ok: true, failed_segments: [] }, TTL + 5).status_code).toBe(ErrorCode.OK);
    expect(segmentsOf(core, 'k', TTL + 6)).toEqual([
      ['b', 'b'],
      ['c', 'c'],
    ]);
    expect(core.getReplicaList({ key: 'k' }, TTL + 6).slice_checksums).toEqual([11, 22]);
    expect(core.stats(TTL + 6)).toMatchObject({ underReplicated: 0, copiesInFlight: 0, copied: 1, failed: 0 });
    expect(ping(core, 'cb', TTL + 7).copies).toEqual([]);
    expect(core.checkIndexes()).toEqual([]);
  });

  it("places each slice away from that slice's other replicas (a replica's slices may span segments)", () => {
    const core = makeCore({ clientTtlMs: TTL });
    for (const [i, s] of ['a', 'b', 'c'].entries()) core.mountSegment(mountReq(s, 1 << 20, `c${s}`, 0x1000_0000 * (i + 1), `10.0.0.${i}:1`, INC), 0);
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    for (const k of keys) {
      core.putStart(putReq(k, [1000, 2000], { replica_num: 2 }), 0);
      core.putEnd({ key: k, replica_type: MEMORY, slice_checksums: [] }, 0);
    }
    expect(keys.some((k) => segmentsOf(core, k, 0).some((r) => r[0] !== r[1]))).toBe(true); // the case this is about
    for (const s of ['b', 'c']) ping(core, `c${s}`, TTL, false);
    core.sweep(TTL + 1);
    let now = TTL + 2;
    for (let copies = ping(core, 'cb', now++).copies; copies.length > 0; copies = ping(core, 'cb', now++).copies) {
      for (const c of copies) core.replicaCopied({ client_id: 'cb', copy_id: c.copy_id, ok: true, failed_segments: [] }, now++);
    }
    expect(core.stats(now).underReplicated).toBe(0);
    // (An object whose replicas both had a slice on a is gone: slices are placed independently.)
    const left = keys.filter((k) => core.getReplicaList({ key: k }, now).status_code === ErrorCode.OK);
    expect(left.length).toBeGreaterThan(keys.length / 2);
    for (const k of left) {
      const list = segmentsOf(core, k, now);
      expect(list).toHaveLength(2);
      for (const j of [0, 1]) expect(list[0][j]).not.toBe(list[1][j]);
    }
  });

  it('refuses a report from another client, and answers OBJECT_NOT_FOUND for a copy it does not know', () => {
    const core = setup();
    loseA(core);
    const copy = ping(core, 'cb', TTL + 3).copies[0];
    expect(core.replicaCopied({ client_id: 'cc', copy_id: copy.copy_id, ok: true, failed_segments: [] }, TTL + 4).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.replicaCopied({ client_id: 'cb', copy_id: copy.copy_id + 1, ok: true, failed_segments: [] }, TTL + 4).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.replicaCopied({ client_id: '', copy_id: copy.copy_id, ok: true, failed_segments: [] }, TTL + 4).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(segmentsOf(core, 'k', TTL + 5)).toEqual([['b', 'b']]);
    expect(core.stats(TTL + 5).copiesInFlight).toBe(1);
  });

  it('drops a copy whose object was removed or rewritten meanwhile, freeing its target', () => {
    for (const change of ['remove', 'upsert'] as const) {
      const core = setup();
      loseA(core);
      const copy = ping(core, 'cb', TTL + 3).copies[0];
      if (change === 'remove') expect(core.remove({ key: 'k', force: false }, TTL + 4).status_code).toBe(ErrorCode.OK);
      else {
        expect(core.upsertStart(putReq('k', [4096, 100]), TTL + 4).status_code).toBe(ErrorCode.OK);
        expect(core.upsertEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, TTL + 4).status_code).toBe(ErrorCode.OK);
      }
      const cBefore = usage(core).c;
      expect(core.replicaCopied({ client_id: 'cb', copy_id: copy.copy_id, ok: true, failed_segments: [] }, TTL + 5).status_code).toBe(ErrorCode.OK);
      expect(usage(core).c).toBe(cBefore - TARGET_BYTES); // freed at once: the copier wrote every byte
      if (change === 'upsert') expect(segmentsOf(core, 'k', TTL + 6)).toHaveLength(1); // the new bytes' replica only
      expect(core.stats(TTL + 6)).toMatchObject({ underReplicated: 0, copied: 0 });
      expect(core.checkIndexes()).toEqual([]);
    }
  });

  it('drops a copy whose source replica was lost meanwhile (its space may hold another object now)', () => {
    const core = makeCore({ clientTtlMs: TTL });
    for (const [i, s] of ['a', 'b', 'c', 'd'].entries()) core.mountSegment(mountReq(s, 1 << 20, `c${s}`, 0x1000_0000 * (i + 1), `10.0.0.${i}:1`, INC), 0);
    core.putStart(putReq('k', 4096, { replica_num: 3, preferred_segment: 'a' }), 0);
    core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 0);
    const placed = segmentsOf(core, 'k', 0).map((r) => r[0]);
    const spare = ['a', 'b', 'c', 'd'].find((s) => !placed.includes(s))!;
    const [first, second] = placed.filter((s) => s !== 'a');
    const alive = ['a', 'b', 'c', 'd'].filter((s) => s !== 'a');
    for (const s of alive) ping(core, `c${s}`, TTL, false);
    core.sweep(TTL + 1); // a is lost
    const copy = ping(core, `c${spare}`, TTL + 2).copies[0];
    const source = copy.source!.handles[0].segment_name;
    expect([first, second]).toContain(source);
    expect(copy.target!.handles[0].segment_name).toBe(spare);
    for (const s of alive) if (s !== source) ping(core, `c${s}`, TTL + 2 + TTL - 1, false);
    core.sweep(TTL + 2 + TTL); // the source's owner is gone too
    expect(core.replicaCopied({ client_id: `c${spare}`, copy_id: copy.copy_id, ok: true, failed_segments: [] }, TTL * 2 + 3).status_code).toBe(ErrorCode.OK);
    expect(segmentsOf(core, 'k', TTL * 2 + 4)).toHaveLength(1);
    expect(usage(core)[spare]).toBe(0);
    // still short: the next copy reads the replica that is left
    const again = ping(core, `c${spare}`, TTL * 2 + 5).copies[0];
    expect(again.source!.handles[0].segment_name).not.toBe(source);
  });

  it('a failed copy keeps its target until the owner fences it, suspects the unreachable segment, and is tried again', () => {
    const core = setup();
    loseA(core);
    const copy = ping(core, 'cb', TTL + 3).copies[0];
    expect(core.replicaCopied({ client_id: 'cb', copy_id: copy.copy_id, ok: false, failed_segments: ['c'] }, TTL + 5).status_code).toBe(ErrorCode.OK);
    expect(usage(core).c).toBe(TARGET_BYTES); // quarantined: bytes of the copy may still arrive
    expect(core.stats(TTL + 5)).toMatchObject({ underReplicated: 1, failed: 1, copiesInFlight: 0 });
    const f = ping(core, 'cc', TTL + 6, false).fences.find((x) => x.segment_name === 'c')!;
    expect(f.below > TTL + 4 || f.revoked.includes(TTL + 4)).toBe(true); // refuses the copy's generation
    core.ping({ client_id: 'cc', fence_acks: [{ segment_name: 'c', version: f.version }], can_copy: false }, TTL + 7);
    expect(usage(core).c).toBe(0);
    // c is suspect for a while: no segment is left to place on
    expect(ping(core, 'cb', TTL + 8).copies).toEqual([]);
    expect(core.stats(TTL + 8).underReplicated).toBe(1);
  });

  it('gives an object up after COPY_ATTEMPTS failed copies', () => {
    const core = setup();
    loseA(core);
    let now = TTL + 3;
    for (let i = 0; i < COPY_ATTEMPTS; i++) {
      const copy = ping(core, 'cb', now++).copies[0];
      core.replicaCopied({ client_id: 'cb', copy_id: copy.copy_id, ok: false, failed_segments: [] }, now++);
    }
    expect(core.stats(now)).toMatchObject({ underReplicated: 0, failed: COPY_ATTEMPTS, abandoned: 1 });
    expect(ping(core, 'cb', now).copies).toEqual([]);
  });

  it('a copy not reported in time is given up by the sweep and assigned again', () => {
    const core = setup();
    loseA(core);
    const copy = ping(core, 'cb', TTL + 3).copies[0];
    const late = TTL + 3 + COPY_TIMEOUT_MS;
    ping(core, 'cb', late - 1, false);
    ping(core, 'cc', late - 1, false);
    core.sweep(late);
    expect(core.stats(late)).toMatchObject({ copiesInFlight: 0, failed: 1, underReplicated: 1 });
    expect(core.replicaCopied({ client_id: 'cb', copy_id: copy.copy_id, ok: true, failed_segments: [] }, late + 1).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(segmentsOf(core, 'k', late + 1)).toEqual([['b', 'b']]);
    expect(ping(core, 'cc', late + 1).copies).toHaveLength(1);
  });

  it("a fence sent while a copy is in flight does not refuse the copy's generation", () => {
    const core = setup();
    loseA(core);
    const copy = ping(core, 'cb', TTL + 3).copies[0]; // generation TTL + 4, target on c
    core.putStart(putReq('x', 1024, { preferred_segment: 'c' }), TTL + 10);
    core.putRevoke({ key: 'x', replica_type: MEMORY, failed_segments: [] }, TTL + 11); // c has a fence to install
    const f = ping(core, 'cc', TTL + 12, false).fences.find((x) => x.segment_name === 'c')!;
    expect(f.below).toBeLessThanOrEqual(copy.target!.handles[0].generation);
    expect(f.revoked).toEqual([TTL + 11]);
  });

  it('does not copy objects whose replicas an owner cleared on purpose', () => {
    const core = setup();
    expect(core.batchReplicaClear({ client_id: 'ca', segment_name: 'a', object_keys: ['k'] }, 1).cleared_keys).toEqual(['k']);
    expect(core.stats(2).underReplicated).toBe(0);
    expect(ping(core, 'cb', 3).copies).toEqual([]);
  });
});
