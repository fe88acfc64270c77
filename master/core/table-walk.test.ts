import { ErrorCode } from '../../common/error-code.js';
import { encodeMessage, lookupType } from '../../common/master-proto.js';
import { FileIndex } from './file-index.js';
import { DISK, makeCore, MEMORY, mountReq, putObject, putReq, usage } from './master-core-fixture.js';
import { defaultMasterCoreConfig, MasterCore, SeededRng } from './master-core.js';
import { runSteps, STEP_KEY_CHARS, STEP_OBJECTS, type Steps } from './table-walk.js';

const MiB = 1024 * 1024;

function coreWith(objects: number, prefix = 'k'): MasterCore {
  const core = makeCore();
  core.mountSegment(mountReq('seg', 1024 * MiB), 0);
  for (let i = 0; i < objects; i++) putObject(core, `${prefix}${i}`, 64, 0);
  return core;
}

/** Runs steps to the end, calling `between(step)` after each yield; returns the reply and the step count. */
function drive<R>(steps: Steps<R>, between: (step: number) => void = () => {}): { reply: R; steps: number } {
  let n = 1;
  let r = steps.next(1);
  while (!r.done) {
    between(n);
    n++;
    r = steps.next(1);
  }
  return { reply: r.value, steps: n };
}

const exists = (core: MasterCore, key: string): boolean => core.existKey({ key }, 1).exists;

describe('whole-table RPCs in bounded steps', () => {
  it('RemoveAll visits at most STEP_OBJECTS objects per step and removes them all', () => {
    const n = 3 * STEP_OBJECTS + 10;
    const core = coreWith(n);
    const { reply, steps } = drive(core.removeAllSteps({}, 1));
    expect(reply).toEqual({ status_code: ErrorCode.OK, removed_count: n });
    expect(steps).toBe(4);
    expect(core.stats(1).objects).toBe(0);
    expect(usage(core)).toEqual({ seg: 0 });
  });

  it('a step also ends after STEP_KEY_CHARS characters of keys (long keys, few objects)', () => {
    const core = makeCore();
    core.mountSegment(mountReq('seg', 64 * MiB), 0);
    const long = 'x'.repeat(4000);
    const n = Math.ceil((2 * STEP_KEY_CHARS) / 4000) + 5;
    for (let i = 0; i < n; i++) putObject(core, `${long}${i}`, 64, 0);
    const { reply, steps } = drive(core.getReplicaListByRegexSteps({ key_regex: '^x' }, 1));
    expect(Object.keys(reply.object_map)).toHaveLength(n);
    expect(steps).toBe(3);
  });

  it('objects removed, put and rehashed between steps: no double free, objects present throughout are removed once', () => {
    const n = 4 * STEP_OBJECTS;
    const core = coreWith(n);
    let extra = 0;
    const removedOutside = new Set<string>();
    const { reply } = drive(core.removeAllSteps({}, 1), (step) => {
      // others remove objects the walk may not have reached, and put enough new ones to grow every
      // shard: the walk goes on in the arrays it began with, where those removed objects still are
      for (let i = step * 7; i < n; i += 97) {
        const key = `k${i}`;
        if (core.remove({ key, force: true }, 1).status_code === ErrorCode.OK) removedOutside.add(key);
      }
      for (let i = 0; i < 20_000; i++) putObject(core, `new-${extra++}`, 64, 1);
    });
    expect(reply.status_code).toBe(ErrorCode.OK);
    // every original object is gone, removed by exactly one of the two
    for (let i = 0; i < n; i++) expect(exists(core, `k${i}`)).toBe(false);
    expect(reply.removed_count).toBeGreaterThanOrEqual(n - removedOutside.size);
    expect(reply.removed_count).toBeLessThanOrEqual(n - removedOutside.size + extra);
    // the allocator agrees with what is left: 64 bytes per remaining object
    const left = core.stats(1).objects;
    expect(left).toBe(n + extra - removedOutside.size - reply.removed_count);
    expect(usage(core)).toEqual({ seg: 64 * left });
    // and the rest can still be removed cleanly
    expect(core.removeAll({}, 1).removed_count).toBe(left);
    expect(usage(core)).toEqual({ seg: 0 });
  });

  it('RemoveByRegex in steps skips objects leased or put meanwhile per the usual rules', () => {
    const n = 2 * STEP_OBJECTS;
    const core = coreWith(n, 'r/');
    putObject(core, 'r/pinned', 64, 0, { with_hard_pin: true });
    const { reply } = drive(core.removeByRegexSteps({ key_regex: '^r/' }, 1), (step) => {
      if (step === 1) for (let i = 0; i < n; i++) core.getReplicaList({ key: `r/${i}` }, 1); // leases on all
    });
    // the first step removed what it visited; the rest were leased by then
    expect(reply.removed_count).toBeGreaterThan(0);
    expect(reply.removed_count).toBeLessThanOrEqual(STEP_OBJECTS);
    expect(exists(core, 'r/pinned')).toBe(true);
    expect(core.stats(1).objects).toBe(n + 1 - reply.removed_count);
  });

  it("GetReplicaListByRegex's size bound holds for any reply it lets through: UTF-8 keys and names, large numbers, several replicas and slices, files", () => {
    const files = new FileIndex('/shared/kv/c', 1 << 30);
    const core = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(1), undefined, undefined, files);
    // names, endpoints and keys of multi-byte characters (3 and 4 UTF-8 bytes per UTF-16 unit or pair), addresses near 2^47
    for (let s = 0; s < 3; s++) core.mountSegment(mountReq(`段${'名'.repeat(300)}${s}`, 1024 * MiB, 'c', 2 ** 46 * (s + 1), `${'主'.repeat(150)}🚀:${s}`, 2 ** 40 + s), 0);
    const key = (i: number) => `${'鍵'.repeat(1300)}${i}`;
    for (let i = 0; i < 40; i++) {
      expect(core.putStart(putReq(key(i), [1 << 20, 3, 1 << 24], { replica_num: i % 3 === 0 ? 3 : 1 }), 0).status_code).toBe(ErrorCode.OK);
      core.putEnd({ key: key(i), replica_type: MEMORY, slice_checksums: [] }, 0);
      if (i % 2 === 0) core.putEnd({ key: key(i), replica_type: DISK, slice_checksums: [] }, 0); // its file
    }
    core.batchReplicaClear({ object_keys: [key(0), key(2)], client_id: 'c', segment_name: '' }, 100_000); // held only by their files
    const req = { key_regex: '^鍵' };
    const reply = runSteps(core.getReplicaListByRegexSteps(req, 100_001), 100_001);
    expect(reply.status_code).toBe(ErrorCode.OK);
    expect(Object.keys(reply.object_map)).toHaveLength(40);
    const encoded = encodeMessage(lookupType('GetReplicaListByRegexResponse'), reply).length;
    // A limit one byte below the reply's real size refuses it: the bound never falls short.
    expect(runSteps(core.getReplicaListByRegexSteps(req, 100_001, encoded - 1), 100_001)).toEqual({ status_code: ErrorCode.RESULT_TOO_LARGE, object_map: {} });
    // ...and it is a close bound, not a wild one (the fixed fields at their widest).
    expect(runSteps(core.getReplicaListByRegexSteps(req, 100_001, Math.ceil(encoded * 1.1)), 100_001).status_code).toBe(ErrorCode.OK);
  });

  it('GetReplicaListByRegex answers RESULT_TOO_LARGE instead of building a reply over 64 MiB', () => {
    const core = makeCore();
    // long names and endpoints: every handle of the reply repeats them
    for (let s = 0; s < 4; s++) core.mountSegment(mountReq(`${'s'.repeat(1000)}${s}`, 1024 * MiB, 'c', 0x10000000 * (s + 1), `${'h'.repeat(500)}:${s}`), 0);
    const key = (i: number) => `${'k'.repeat(4000)}${i}`;
    let i = 0;
    // ~ 4 replicas x 4 slices x 1.5 KB + 4 KB per object: about 30 KB; 64 MiB is ~2,300 of them
    for (; i < 2600; i++) {
      const r = core.putStart(putReq(key(i), [64, 64, 64, 64], { replica_num: 4 }), 0);
      expect(r.status_code).toBe(ErrorCode.OK);
      core.putEnd({ key: key(i), replica_type: MEMORY, slice_checksums: [] }, 0);
    }
    expect(core.getReplicaListByRegex({ key_regex: '^k' }, 1)).toEqual({ status_code: ErrorCode.RESULT_TOO_LARGE, object_map: {} });
    expect(Object.keys(core.getReplicaListByRegex({ key_regex: '^k+1\\d\\d$' }, 1).object_map)).toHaveLength(100);
  });
});
