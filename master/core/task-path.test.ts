// Copy and move tasks in MasterCore: checks of a request, a copy made by a client that can copy
// (Ping can_copy, ReplicaCopied) joining the object only once reported, a move taking its source
// out and freeing its space after the leases handed out before, failures retried or failing.
import { ErrorCode } from '../../common/error-code.js';
import { TaskState } from '../../proto/gen/store/TaskState.js';
import type { MasterCore } from './master-core.js';
import { makeCore, MEMORY, mountReq, putObject, putReq, usage } from './master-core-fixture.js';
import { COPY_TIMEOUT_MS } from './re-replication.js';
import { RETRY_DELAY_MS } from './task-manager.js';

const INC = 77;
const LEASE = 1000;

/** Segments a, b, c (1 MiB each, clients ca, cb, cc) and `k` (4096 + 100 bytes) with one replica on a. */
function setup(over: Parameters<typeof makeCore>[0] = {}): MasterCore {
  const core = makeCore({ clientTtlMs: 1e9, defaultKvLeaseTtlMs: LEASE, ...over });
  for (const [i, s] of ['a', 'b', 'c'].entries()) core.mountSegment(mountReq(s, 1 << 20, `c${s}`, 0x1000_0000 * (i + 1), `10.0.0.${i}:1`, INC), 0);
  core.putStart(putReq('k', [4096, 100], { replica_num: 1, preferred_segment: 'a' }), 0);
  expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [11, 22] }, 0).status_code).toBe(ErrorCode.OK);
  return core;
}

const segmentsOf = (core: MasterCore, _now: number) => core.queryKey('k')!.map((r) => r.handles.map((h) => h.segment_name));
const ping = (core: MasterCore, client: string, now: number) => core.ping({ client_id: client, fence_acks: [], can_copy: true }, now).copies;
const state = (core: MasterCore, id: number, now: number) => core.queryTask({ task_id: id }, now).task!;
const reported = (core: MasterCore, client: string, copyId: number, ok: boolean, now: number) =>
  expect(core.replicaCopied({ client_id: client, copy_id: copyId, ok, failed_segments: [] }, now).status_code).toBe(ErrorCode.OK);

describe('copy and move tasks', () => {
  it('refuses bad requests with clear codes', () => {
    const core = setup();
    core.putStart(putReq('writing', 10), 0);
    const copy = (key: string, targets: string[]) => core.createCopyTask({ key, targets }, 1).status_code;
    const move = (key: string, source: string, target: string) => core.createMoveTask({ key, source, target }, 1).status_code;
    expect(copy('nope', ['b'])).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(copy('', ['b'])).toBe(ErrorCode.INVALID_KEY);
    expect(copy('writing', ['b'])).toBe(ErrorCode.REPLICA_IS_NOT_READY);
    expect(copy('k', [])).toBe(ErrorCode.INVALID_PARAMS);
    expect(copy('k', ['b', 'b'])).toBe(ErrorCode.INVALID_PARAMS);
    expect(copy('k', ['x'])).toBe(ErrorCode.SEGMENT_NOT_FOUND);
    expect(copy('k', ['bad\nname'])).toBe(ErrorCode.INVALID_PARAMS);
    expect(copy('k', ['a'])).toBe(ErrorCode.REPLICA_ALREADY_ON_SEGMENT);
    expect(move('k', 'b', 'c')).toBe(ErrorCode.NO_REPLICA_ON_SEGMENT);
    expect(move('k', 'a', 'a')).toBe(ErrorCode.INVALID_PARAMS);
    expect(move('k', 'a', 'x')).toBe(ErrorCode.SEGMENT_NOT_FOUND);
    expect(move('k', 'x', 'b')).toBe(ErrorCode.SEGMENT_NOT_FOUND);
    expect(core.queryTask({ task_id: 12345 }, 1).status_code).toBe(ErrorCode.TASK_NOT_FOUND);
    expect(core.stats(1)).toMatchObject({ tasksPending: 0, tasksProcessing: 0, tasksFinished: 0 });
  });

  it('copies to each named segment: the replicas join only once reported, then the task succeeds', () => {
    const core = setup();
    const res = core.createCopyTask({ key: 'k', targets: ['b', 'c'] }, 1);
    expect(res.status_code).toBe(ErrorCode.OK);
    expect(state(core, res.task_id, 1)).toMatchObject({ state: TaskState.TASK_STATE_PROCESSING, attempts: 1, targets: ['b', 'c'], key: 'k' });
    const [first, ...none] = ping(core, 'cb', 2); // one copy of an object at a time
    expect(none).toEqual([]);
    expect(first.target!.handles.map((h) => h.segment_name)).toEqual(['b', 'b']);
    expect(first.slice_checksums).toEqual([11, 22]);
    expect(segmentsOf(core, 2)).toEqual([['a', 'a']]); // not before the report
    reported(core, 'cb', first.copy_id, true, 3);
    expect(segmentsOf(core, 3)).toEqual([
      ['a', 'a'],
      ['b', 'b'],
    ]);
    expect(state(core, res.task_id, 3).state).toBe(TaskState.TASK_STATE_PROCESSING);
    const [second] = ping(core, 'cb', 4);
    expect(second.target!.handles.map((h) => h.segment_name)).toEqual(['c', 'c']);
    reported(core, 'cb', second.copy_id, true, 5);
    expect(state(core, res.task_id, 5)).toMatchObject({ state: TaskState.TASK_STATE_SUCCESS, error_code: 0, updated_ms: 5 });
    expect(segmentsOf(core, 5)).toHaveLength(3);
    expect(core.stats(5)).toMatchObject({ tasksSucceeded: 1, tasksFinished: 1, underReplicated: 0 });
    expect(core.sweep(6).finishedTasks).toEqual({ tasks: [{ id: res.task_id, kind: 'copy', key: 'k', ok: true, errorCode: 0 }], more: 0 });
    expect(core.sweep(7).finishedTasks).toBeUndefined(); // reported once
    expect(core.checkIndexes()).toEqual([]);
  });

  it('a move takes the source replica out once the target is complete, and frees its space after the leases handed out before', () => {
    const core = setup();
    expect(core.getReplicaList({ key: 'k' }, 10).status_code).toBe(ErrorCode.OK); // a reader holds a lease until 10 + LEASE
    const id = core.createMoveTask({ key: 'k', source: 'a', target: 'b' }, 10).task_id;
    const [copy] = ping(core, 'cc', 11);
    expect(copy.source!.handles[0].segment_name).toBe('a');
    expect(copy.target!.handles[0].segment_name).toBe('b');
    reported(core, 'cc', copy.copy_id, true, 12);
    expect(state(core, id, 12).state).toBe(TaskState.TASK_STATE_SUCCESS);
    expect(segmentsOf(core, 12)).toEqual([['b', 'b']]); // no reply names a any more
    const aHeld = usage(core).a;
    expect(aHeld).toBeGreaterThan(0); // the earlier reader may still be reading a
    core.sweep(10 + LEASE - 1);
    expect(usage(core).a).toBe(aHeld);
    core.sweep(10 + LEASE);
    expect(usage(core).a).toBe(0);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('a move of an object nobody leased frees the source at once', () => {
    const core = setup();
    const id = core.createMoveTask({ key: 'k', source: 'a', target: 'c' }, 1).task_id;
    reported(core, 'cb', ping(core, 'cb', 2)[0].copy_id, true, 3);
    expect(state(core, id, 3).state).toBe(TaskState.TASK_STATE_SUCCESS);
    expect(usage(core).a).toBe(0);
    expect(segmentsOf(core, 3)).toEqual([['c', 'c']]);
  });

  it('a copier that reports failure: the target is quarantined, the task retried, and it fails after --max_retry_attempts', () => {
    const core = setup({ taskLimits: { maxPending: 10, maxProcessing: 10, maxFinished: 10, pendingTimeoutMs: 0, processingTimeoutMs: 0, maxRetryAttempts: 1 } });
    const id = core.createCopyTask({ key: 'k', targets: ['b'] }, 1).task_id;
    let now = 2;
    for (let attempt = 1; attempt <= 2; attempt++) {
      const [copy] = ping(core, 'cc', now);
      expect(copy).toBeDefined();
      reported(core, 'cc', copy.copy_id, false, now + 1);
      expect(segmentsOf(core, now + 1)).toEqual([['a', 'a']]); // nothing half-joined
      expect(state(core, id, now + 1)).toMatchObject({ attempts: attempt, error_code: ErrorCode.TRANSFER_FAILED });
      now += RETRY_DELAY_MS + 2;
      core.sweep(now); // the retry starts
    }
    expect(state(core, id, now).state).toBe(TaskState.TASK_STATE_FAILED);
    expect(core.stats(now)).toMatchObject({ tasksFailed: 1, tasksRetried: 1 });
  });

  it('a copier that never reports: the copy is given up at its deadline and tried again', () => {
    const core = setup();
    const id = core.createCopyTask({ key: 'k', targets: ['b'] }, 1).task_id;
    expect(ping(core, 'cc', 2)).toHaveLength(1); // cc dies with it
    core.sweep(2 + COPY_TIMEOUT_MS);
    expect(state(core, id, 2 + COPY_TIMEOUT_MS)).toMatchObject({ state: TaskState.TASK_STATE_PENDING, error_code: ErrorCode.TRANSFER_FAILED });
    core.sweep(2 + COPY_TIMEOUT_MS + RETRY_DELAY_MS);
    const [again] = ping(core, 'ca', 3 + COPY_TIMEOUT_MS + RETRY_DELAY_MS);
    reported(core, 'ca', again.copy_id, true, 4 + COPY_TIMEOUT_MS + RETRY_DELAY_MS);
    expect(state(core, id, 5 + COPY_TIMEOUT_MS + RETRY_DELAY_MS)).toMatchObject({ state: TaskState.TASK_STATE_SUCCESS, attempts: 2 });
  });

  it('a target unmounted during the copy fails the task with SEGMENT_NOT_FOUND and leaves the object as it was', () => {
    const core = setup();
    const id = core.createMoveTask({ key: 'k', source: 'a', target: 'b' }, 1).task_id;
    const [copy] = ping(core, 'cc', 2);
    expect(core.unmountSegment({ segment_name: 'b', client_id: 'cb', grace_period_seconds: 0 }, 3).status_code).toBe(ErrorCode.OK);
    reported(core, 'cc', copy.copy_id, true, 4);
    expect(state(core, id, 4)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, error_code: ErrorCode.SEGMENT_NOT_FOUND });
    expect(segmentsOf(core, 4)).toEqual([['a', 'a']]);
  });

  it('no room on the target: NO_AVAILABLE_HANDLE, retried', () => {
    const core = setup();
    core.mountSegment(mountReq('tiny', 1024, 'ct', 0x5000_0000, '10.0.0.9:1', INC), 0);
    const id = core.createCopyTask({ key: 'k', targets: ['tiny'] }, 1).task_id;
    expect(ping(core, 'cc', 2)).toEqual([]);
    expect(state(core, id, 2)).toMatchObject({ state: TaskState.TASK_STATE_PENDING, error_code: ErrorCode.NO_AVAILABLE_HANDLE, attempts: 1 });
    expect(usage(core).tiny).toBe(0);
  });

  it('a removed object fails its task with OBJECT_NOT_FOUND; a processing task past its timeout fails and its late copy is not kept', () => {
    const core = setup({ taskLimits: { maxPending: 10, maxProcessing: 10, maxFinished: 10, pendingTimeoutMs: 0, processingTimeoutMs: 100, maxRetryAttempts: 10 } });
    const id = core.createCopyTask({ key: 'k', targets: ['b'] }, 1).task_id;
    const [copy] = ping(core, 'cc', 2);
    core.sweep(101);
    expect(state(core, id, 101)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, error_code: ErrorCode.TASK_TIMED_OUT });
    reported(core, 'cc', copy.copy_id, true, 102);
    expect(segmentsOf(core, 102)).toEqual([['a', 'a']]);
    expect(usage(core).b).toBe(0);

    const id2 = core.createCopyTask({ key: 'k', targets: ['c'] }, 200).task_id;
    expect(core.remove({ key: 'k', force: false }, 201).status_code).toBe(ErrorCode.OK);
    ping(core, 'cb', 202);
    expect(state(core, id2, 202)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, error_code: ErrorCode.OBJECT_NOT_FOUND });
  });

  it('refuses a task when --max_total_pending_tasks wait (TASK_QUEUE_FULL)', () => {
    const core = setup({ taskLimits: { maxPending: 1, maxProcessing: 0, maxFinished: 10, pendingTimeoutMs: 0, processingTimeoutMs: 0, maxRetryAttempts: 10 } });
    expect(core.createCopyTask({ key: 'k', targets: ['b'] }, 1).status_code).toBe(ErrorCode.OK);
    expect(core.createCopyTask({ key: 'k', targets: ['c'] }, 1).status_code).toBe(ErrorCode.TASK_QUEUE_FULL);
  });
});

describe('directed copies waiting on their target', () => {
  it('do not hold up those behind them: a Ping looks at a bounded number, and those that must wait go to the back', () => {
    const core = setup();
    const n = 300; // more than a Ping looks at
    for (let i = 0; i < n; i++) putObject(core, `w${i}`, 100, 1, { preferred_segment: 'a' });
    for (let i = 0; i < n; i++) expect(core.createCopyTask({ key: `w${i}`, targets: ['b'] }, 2).status_code).toBe(ErrorCode.OK);
    // b becomes unreachable (a copier says so): its copies wait
    core.replicaCopied({ client_id: 'cc', copy_id: 424242, ok: false, failed_segments: ['b'] }, 3);
    const id = core.createCopyTask({ key: 'k', targets: ['c'] }, 4).task_id;
    expect(ping(core, 'ca', 5)).toEqual([]); // the first 256 all wait on b
    const [copy] = ping(core, 'ca', 6);
    expect(copy?.key).toBe('k');
    reported(core, 'ca', copy.copy_id, true, 7);
    expect(state(core, id, 7).state).toBe(TaskState.TASK_STATE_SUCCESS);
  });
});

describe('a task that fails while one of its copies waits', () => {
  it('withdraws the waiting copy: no replica is made for a task that failed', () => {
    const core = setup({ taskLimits: { maxPending: 10, maxProcessing: 10, maxFinished: 10, pendingTimeoutMs: 0, processingTimeoutMs: 0, maxRetryAttempts: 0 } });
    core.mountSegment(mountReq('tiny', 1024, 'ct', 0x5000_0000, '10.0.0.9:1', INC), 0);
    const id = core.createCopyTask({ key: 'k', targets: ['b', 'tiny'] }, 1).task_id;
    core.replicaCopied({ client_id: 'cc', copy_id: 424242, ok: false, failed_segments: ['b'] }, 2); // b unreachable: its copy waits
    expect(ping(core, 'cc', 3)).toEqual([]); // tiny has no room: the task fails
    expect(state(core, id, 3)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, error_code: ErrorCode.NO_AVAILABLE_HANDLE });
    core.sweep(1e6); // b reachable again
    expect(ping(core, 'cc', 1e6 + 1)).toEqual([]);
    expect(segmentsOf(core, 1e6 + 1)).toEqual([['a', 'a']]);
    expect(usage(core).b).toBe(0);
  });
});
