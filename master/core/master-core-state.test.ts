// MasterCore's state out and in (docs/ha.md): a state exported and imported into a fresh core
// gives the same objects at the same addresses, pins and LRU order; imported segments are
// RESTORED (not served, not placed on) until their owner mounts them again with a new
// incarnation, and are dropped after client_ttl otherwise; the change sink's records, applied in
// order to a StateImage, always equal the core's own export, whatever the operations.
import fc from 'fast-check';
import { ErrorCode } from '../../common/error-code.js';
import type { ChangeRecord__Output } from '../../proto/gen/store/ChangeRecord.js';
import { StateImage } from '../state/state-image.js';
import type { ChangeSink } from './change-sink.js';
import type { MasterCore } from './master-core.js';
import { makeCore, MEMORY, mountReq, putObject, putReq, usage } from './master-core-fixture.js';
import type { CoreState } from './state-records.js';

const MiB = 1 << 20;
const TTL = 10_000;

/** A sink that applies every change to `image` as a standby would (records as decoded: every field present). */
function imageSink(image: StateImage, clock: () => number): ChangeSink {
  const none = { object: null, removed: '', mounted: null, unmounted: '' };
  const apply = (c: Partial<ChangeRecord__Output>): void => image.apply({ ...none, ...c }, clock());
  return {
    object: (rec, lastAccess) => apply({ object: { ...rec, age_ms: Math.max(0, clock() - lastAccess) } }),
    removed: (key) => apply({ removed: key }),
    mounted: (rec) => apply({ mounted: rec }),
    unmounted: (name) => apply({ unmounted: name }),
  };
}

/** A state as sorted, comparable data. */
function canonical(s: CoreState): { segments: unknown[]; objects: unknown[] } {
  return {
    segments: [...s.segments].sort((a, b) => a.name.localeCompare(b.name)),
    objects: [...s.objects].map((o) => ({ ...o, age_ms: 0 })).sort((a, b) => (a.key < b.key ? -1 : 1)),
  };
}

function remount(core: MasterCore, name: string, client: string, base: number, incarnation: number, now: number, size = 4 * MiB): number {
  return core.mountSegment(mountReq(name, size, client, base, `10.0.0.${base >>> 28}:1`, incarnation), now).status_code;
}

/** Two clients, three segments, objects of every shape. */
function populated(): MasterCore {
  const core = makeCore({ clientTtlMs: TTL, defaultKvSoftPinTtlMs: 1_000_000 });
  remount(core, 'a', 'ca', 0x1000_0000, 11, 0);
  remount(core, 'b', 'cb', 0x2000_0000, 22, 0);
  remount(core, 'c', 'cb', 0x3000_0000, 33, 0);
  putObject(core, 'plain', 1000, 1, { preferred_segment: 'a' });
  putObject(core, 'soft', 3000, 2, { with_soft_pin: true, preferred_segment: 'b' });
  putObject(core, 'hard', 64, 3, { with_hard_pin: true });
  core.putStart(putReq('multi', [4096, 100, 7], { replica_num: 2 }), 4);
  expect(core.putEnd({ key: 'multi', replica_type: MEMORY, slice_checksums: [1, 2, 0xffffffff] }, 4).status_code).toBe(ErrorCode.OK);
  for (let i = 0; i < 20; i++) putObject(core, `k${i}`, 100 + i * 37, 5 + i);
  core.getReplicaList({ key: 'plain' }, 100); // most recently used now
  core.putStart(putReq('unfinished', 500, { preferred_segment: 'a' }), 101); // not state
  return core;
}

describe('export and import', () => {
  it('round-trips every object: same addresses, sizes, checksums, pins, used bytes and LRU order', () => {
    const core = populated();
    const state = core.exportState(200);
    expect(state.objects.map((o) => o.key)).not.toContain('unfinished');
    expect(state.objects.find((o) => o.key === 'plain')!.age_ms).toBe(100);

    const next = makeCore({ clientTtlMs: TTL, defaultKvSoftPinTtlMs: 1_000_000 });
    const report = next.importState(state, 5000);
    expect(report).toEqual({ segments: 3, objects: 24, dropped: [] });
    expect(next.checkIndexes()).toEqual([]);
    expect(next.stats(5000)).toMatchObject({ objects: 24, softPinned: 1, hardPinned: 1, segments: 3 });
    // used bytes match, less the unfinished write's space (not state)
    const before = usage(core);
    const after = usage(next);
    expect(after).toEqual({ ...before, a: before.a - 504 });
    // LRU order (the unfinished write is not listed anyway)
    expect(next.evictionOrder()).toEqual(core.evictionOrder());
    expect(canonical(next.exportState(5000))).toEqual(canonical(state));

    // Owners come back with new registrations: served again, addresses unchanged, new incarnations,
    // and the remounts are reported (a standby of this core learns the new incarnations).
    const image = new StateImage();
    next.setChangeSink(imageSink(image, () => 5001));
    for (const [name, client, base, inc] of [
      ['a', 'ca', 0x1000_0000, 111],
      ['b', 'cb', 0x2000_0000, 222],
      ['c', 'cb', 0x3000_0000, 333],
    ] as const) {
      expect(remount(next, name, client, base, inc, 5001)).toBe(ErrorCode.OK);
    }
    expect(image.toState(5001).segments.map((r) => [r.name, r.incarnation])).toEqual([
      ['a', 111],
      ['b', 222],
      ['c', 333],
    ]);
    for (const key of ['plain', 'soft', 'hard', 'multi', 'k7']) {
      const old = core.getReplicaList({ key }, 5002);
      const now = next.getReplicaList({ key }, 5002);
      expect(now.status_code).toBe(ErrorCode.OK);
      expect(now.slice_checksums).toEqual(old.slice_checksums);
      const strip = (l: typeof old.replica_list) => l.map((r) => r.handles.map((h) => [h.segment_name, h.buffer, h.size]));
      expect(strip(now.replica_list)).toEqual(strip(old.replica_list));
      for (const r of now.replica_list) for (const h of r.handles) expect(h.incarnation).toBe({ a: 111, b: 222, c: 333 }[h.segment_name]);
    }
    expect(next.checkIndexes()).toEqual([]);
  });

  it('allocates new objects only outside the imported ones', () => {
    const core = populated();
    const next = makeCore({ clientTtlMs: TTL });
    next.importState(core.exportState(200), 300);
    for (const [name, client, base] of [
      ['a', 'ca', 0x1000_0000],
      ['b', 'cb', 0x2000_0000],
      ['c', 'cb', 0x3000_0000],
    ] as const)
      remount(next, name, client, base, 9, 301);
    const spans = (c: MasterCore, fresh: boolean) =>
      [...c.allKeys()]
        .filter((k) => k.startsWith('new') === fresh)
        .flatMap((key) => c.queryKey(key)!.flatMap((r) => r.handles.map((h) => [h.segment_name, h.buffer, h.buffer + h.size] as const)));
    for (let i = 0; i < 200; i++) putObject(next, `new${i}`, 1 + ((i * 7919) % 20000), 302);
    const imported = spans(next, false);
    expect(imported.length).toBeGreaterThan(20);
    for (const [seg, s, e] of spans(next, true)) {
      for (const [seg2, s2, e2] of imported) if (seg === seg2) expect(e <= s2 || s >= e2).toBe(true);
    }
    expect(next.checkIndexes()).toEqual([]);
  });

  it('leaves out records that do not fit and says why', () => {
    const core = populated();
    const state = core.exportState(200);
    const a = state.segments.find((s) => s.name === 'a')!;
    const objects = [
      ...state.objects,
      { ...state.objects[0], key: 'bad\nkey' },
      { ...state.objects[0], key: 'nowhere', handles: [{ segment: 'zz', offset: 0, size: 8 }] },
      { ...state.objects[0], key: 'past-end', slices: 1, handles: [{ segment: 'a', offset: a.size - 8, size: 16 }] },
      { ...state.objects[0], key: 'torn', slices: 2, handles: [{ segment: 'a', offset: 0, size: 8 }] },
    ];
    // an object on top of 'plain': both dropped (neither can be trusted)
    const plain = state.objects.find((o) => o.key === 'plain')!;
    objects.push({ ...plain, key: 'squatter', handles: [{ ...plain.handles[0], offset: plain.handles[0].offset + 8, size: 8 }] });
    const next = makeCore({ clientTtlMs: TTL });
    const report = next.importState(
      { segments: [...state.segments, { ...a, name: 'a2' }, { ...a, name: 'bad\n', segment_id: '0e0e0e0e-0000-4000-8000-000000000000' }], objects },
      300,
    );
    expect(report.objects).toBe(state.objects.length - 1);
    expect(report.dropped.join('\n')).toMatch(/segment a2: listed twice/);
    for (const what of ['bad\\nkey', 'nowhere', 'past-end', 'torn', 'squatter: its space overlaps', 'plain: its space overlaps']) expect(report.dropped.join('\n')).toContain(what);
    expect(next.checkIndexes()).toEqual([]);
    expect(() => next.importState(state, 301)).toThrow(/not empty/);
  });
});

describe('RESTORED segments', () => {
  function restored(): MasterCore {
    const next = makeCore({ clientTtlMs: TTL });
    next.importState(populated().exportState(200), 1000);
    return next;
  }

  it('are neither served nor placed on until their owner mounts them again', () => {
    const next = restored();
    expect(next.segmentsDetail().map((s) => s.status)).toEqual(['RESTORED', 'RESTORED', 'RESTORED']);
    expect(next.getReplicaList({ key: 'plain' }, 1001).status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY);
    expect(next.batchGetReplicaList({ keys: ['plain', 'none'] }, 1001).results.map((r) => r.status_code)).toEqual([ErrorCode.REPLICA_IS_NOT_READY, ErrorCode.OBJECT_NOT_FOUND]);
    expect(next.queryKey('plain')).toEqual([]);
    expect(next.getReplicaListByRegex({ key_regex: '.*' }, 1001).object_map).toEqual({});
    expect(next.putStart(putReq('x', 100), 1001).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    // the owner is asked to mount again, even once it is known
    expect(next.ping({ client_id: 'cb', fence_acks: [], can_copy: false }, 1001).need_remount).toBe(true);
    expect(remount(next, 'b', 'cb', 0x2000_0000, 5, 1002)).toBe(ErrorCode.OK);
    expect(next.ping({ client_id: 'cb', fence_acks: [], can_copy: false }, 1003).need_remount).toBe(true); // c is still RESTORED
    expect(remount(next, 'c', 'cb', 0x3000_0000, 6, 1004)).toBe(ErrorCode.OK);
    expect(next.ping({ client_id: 'cb', fence_acks: [], can_copy: false }, 1005).need_remount).toBe(false);
    expect(next.getReplicaList({ key: 'soft' }, 1006).status_code).toBe(ErrorCode.OK);
    expect(next.getReplicaList({ key: 'plain' }, 1006).status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY); // on a
    // 'multi' has two replicas: those with no handle on a are served
    const multi = next.getReplicaList({ key: 'multi' }, 1006);
    for (const r of multi.replica_list) for (const h of r.handles) expect(h.segment_name).not.toBe('a');
    expect(next.putStart(putReq('x', 100, { preferred_segment: 'a' }), 1007).replica_list[0].handles[0].segment_name).not.toBe('a');
  });

  it("are dropped after client_ttl without their owner, like a silent client's: objects with no replica left go", () => {
    const next = restored();
    remount(next, 'b', 'cb', 0x2000_0000, 5, 1001);
    remount(next, 'c', 'cb', 0x3000_0000, 6, 1001);
    next.ping({ client_id: 'cb', fence_acks: [], can_copy: false }, 1000 + TTL);
    const report = next.sweep(1001 + TTL);
    expect(report.unmountedSegments).toEqual(['a']);
    expect(next.getReplicaList({ key: 'plain' }, 1002 + TTL).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(next.getReplicaList({ key: 'soft' }, 1002 + TTL).status_code).toBe(ErrorCode.OK);
    expect(next.checkIndexes()).toEqual([]);
  });

  it('a mount of the name by another client, or of other memory, drops the restored objects first', () => {
    const next = restored();
    expect(next.mountSegment(mountReq('a', 4 * MiB, 'someone-else', 0x1000_0000, '10.0.0.9:1', 7), 1001).status_code).toBe(ErrorCode.OK);
    expect(next.getReplicaList({ key: 'plain' }, 1002).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(next.querySegment('a')).toEqual({ used: 0, capacity: 4 * MiB });
    expect(remount(next, 'b', 'cb', 0x2000_0000, 5, 1003, 2 * MiB)).toBe(ErrorCode.OK); // other size
    expect(next.getReplicaList({ key: 'soft' }, 1004).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(next.checkIndexes()).toEqual([]);
  });
});

describe('the change sink', () => {
  type Op =
    | { kind: 'put'; key: number; size: number; replicas: number; pin: number }
    | { kind: 'upsert'; key: number; size: number; end: boolean }
    | { kind: 'revoke'; key: number }
    | { kind: 'remove'; key: number }
    | { kind: 'read'; key: number }
    | { kind: 'unmount'; seg: number }
    | { kind: 'mount'; seg: number }
    | { kind: 'clear'; key: number; seg: number }
    | { kind: 'evict' }
    | { kind: 'copy'; ok: boolean }
    | { kind: 'tick'; ms: number };

  const key = fc.integer({ min: 0, max: 15 });
  // sizes repeat often, so that upserts rewrite objects in place as well as move them
  const size = fc.oneof(fc.constantFrom(100, 4000, 120_000), fc.integer({ min: 1, max: 300_000 }));
  const seg = fc.integer({ min: 0, max: 3 });
  // weighted so that replicas get lost (unmounts of objects with several) and copied back often
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('put' as const), key, size, replicas: fc.integer({ min: 1, max: 3 }), pin: fc.integer({ min: 0, max: 2 }) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('upsert' as const), key, size, end: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('revoke' as const), key }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), key }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('read' as const), key }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('unmount' as const), seg }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('mount' as const), seg }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), key, seg }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('evict' as const) }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('copy' as const), ok: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 20_000 }) }) },
  );

  it("applied in order, its records always equal the core's own state (any mix of operations)", () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 30, maxLength: 80, size: 'max' }), (ops) => {
        let now = 1;
        const core = makeCore({ clientTtlMs: TTL, evictionHighWatermarkRatio: 0.5, defaultKvLeaseTtlMs: 100 });
        const image = new StateImage();
        core.setChangeSink(imageSink(image, () => now));
        const mount = (s: number) => core.mountSegment(mountReq(`s${s}`, MiB, `c${s % 2}`, 0x1000_0000 * (s + 1), `10.0.0.${s}:1`, 100 + s), now);
        for (let s = 0; s < 4; s++) mount(s);
        for (const op of ops) {
          const k = 'key' in op ? `k${op.key}` : '';
          switch (op.kind) {
            case 'put':
              core.putStart(putReq(k, op.size, { replica_num: op.replicas, with_soft_pin: op.pin === 1, with_hard_pin: op.pin === 2 }), now);
              core.putEnd({ key: k, replica_type: MEMORY, slice_checksums: [op.size] }, now);
              break;
            case 'upsert':
              core.upsertStart(putReq(k, op.size), now);
              if (op.end) core.upsertEnd({ key: k, replica_type: MEMORY, slice_checksums: [] }, now);
              break;
            case 'revoke':
              core.upsertRevoke({ key: k, replica_type: MEMORY, failed_segments: [] }, now);
              core.putRevoke({ key: k, replica_type: MEMORY, failed_segments: [] }, now);
              break;
            case 'remove':
              core.remove({ key: k, force: true }, now);
              break;
            case 'read':
              core.getReplicaList({ key: k }, now);
              break;
            case 'unmount':
              core.unmountSegment({ segment_name: `s${op.seg}`, client_id: '', grace_period_seconds: 0 }, now);
              break;
            case 'mount':
              mount(op.seg);
              break;
            case 'clear':
              core.batchReplicaClear({ client_id: `c${op.seg % 2}`, object_keys: [k], segment_name: op.key % 2 === 0 ? `s${op.seg}` : '' }, now);
              break;
            case 'evict':
              core.evict(now, 5);
              break;
            case 'copy':
              for (const c of ['c0', 'c1']) {
                for (const copy of core.ping({ client_id: c, fence_acks: [], can_copy: true }, now).copies)
                  core.replicaCopied({ client_id: c, copy_id: copy.copy_id, ok: op.ok, failed_segments: [] }, now);
              }
              break;
            case 'tick':
              now += op.ms;
              for (const c of ['c0', 'c1']) if (op.ms % 3 !== 0 || c === 'c0') core.ping({ client_id: c, fence_acks: [], can_copy: false }, now);
              core.sweep(now);
              break;
          }
          expect(canonical(image.toState(now))).toEqual(canonical(core.exportState(now)));
        }
        // and the image imports into a core that holds the same
        const next = makeCore({ clientTtlMs: TTL });
        const report = next.importState(image.toState(now), now);
        expect(report.dropped).toEqual([]);
        expect(canonical(next.exportState(now))).toEqual(canonical(core.exportState(now)));
        expect(next.checkIndexes()).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('costs nothing without a sink: a core never given one builds no record', () => {
    const core = makeCore();
    let built = 0;
    core.setChangeSink({ object: () => built++, removed: () => built++, mounted: () => built++, unmounted: () => built++ });
    core.setChangeSink(undefined);
    core.mountSegment(mountReq('s', MiB), 0);
    putObject(core, 'k', 10, 0);
    core.remove({ key: 'k', force: false }, 1);
    expect(built).toBe(0);
  });
});
