// The task manager's queues with the time passed in: limits, timeouts, retries, finished tasks dropped oldest first.
import { ErrorCode } from '../../common/error-code.js';
import { TaskKind } from '../../proto/gen/store/TaskKind.js';
import { TaskState } from '../../proto/gen/store/TaskState.js';
import { DEFAULT_TASK_LIMITS, RETRY_DELAY_MS, TaskManager, type TaskLimits } from './task-manager.js';

const COPY = TaskKind.TASK_KIND_COPY;
const manager = (over: Partial<TaskLimits> = {}) => new TaskManager({ ...DEFAULT_TASK_LIMITS, ...over });

describe('TaskManager', () => {
  it('queues a task pending, starts it, and keeps it finished with its outcome', () => {
    const m = manager();
    const { code, task } = m.create(COPY, 'k', ['s1'], '', 10);
    expect(code).toBe(ErrorCode.OK);
    expect(task).toMatchObject({ state: TaskState.TASK_STATE_PENDING, attempts: 0, createdMs: 10, key: 'k', targets: ['s1'] });
    expect(m.start(11)).toEqual([task]);
    expect(task!.state).toBe(TaskState.TASK_STATE_PROCESSING);
    expect(task!.attempts).toBe(1);
    expect(m.start(12)).toEqual([]);
    m.succeed(task!, 13);
    expect(m.get(task!.id)).toMatchObject({ state: TaskState.TASK_STATE_SUCCESS, errorCode: 0, updatedMs: 13 });
    expect(m.stats()).toEqual({ tasksPending: 0, tasksProcessing: 0, tasksFinished: 1, tasksSucceeded: 1, tasksFailed: 0, tasksRetried: 0 });
  });

  it('refuses a task when the pending queue is full (TASK_QUEUE_FULL), and takes one again once a slot frees', () => {
    const m = manager({ maxPending: 2, maxProcessing: 1 });
    expect(m.create(COPY, 'a', ['s'], '', 0).code).toBe(ErrorCode.OK);
    expect(m.create(COPY, 'b', ['s'], '', 0).code).toBe(ErrorCode.OK);
    const refused = m.create(COPY, 'c', ['s'], '', 0);
    expect(refused.code).toBe(ErrorCode.TASK_QUEUE_FULL);
    expect(refused.task).toBeUndefined();
    expect(m.start(1).map((t) => t.key)).toEqual(['a']); // one processing slot
    expect(m.create(COPY, 'c', ['s'], '', 1).code).toBe(ErrorCode.OK);
    expect(m.stats()).toMatchObject({ tasksPending: 2, tasksProcessing: 1 });
  });

  it('processes at most --max_total_processing_tasks at once, in creation order', () => {
    const m = manager({ maxProcessing: 2 });
    const ts = ['a', 'b', 'c'].map((k) => m.create(COPY, k, ['s'], '', 0).task!);
    expect(m.start(1)).toEqual([ts[0], ts[1]]);
    m.succeed(ts[0], 2);
    expect(m.start(3)).toEqual([ts[2]]);
  });

  it('drops the oldest finished tasks past --max_total_finished_tasks', () => {
    const m = manager({ maxFinished: 2 });
    const ts = ['a', 'b', 'c'].map((k) => m.create(COPY, k, ['s'], '', 0).task!);
    m.start(0);
    for (const [i, t] of ts.entries()) m.succeed(t, i + 1);
    expect(m.get(ts[0].id)).toBeUndefined();
    expect(m.get(ts[1].id)?.state).toBe(TaskState.TASK_STATE_SUCCESS);
    expect(m.get(ts[2].id)?.state).toBe(TaskState.TASK_STATE_SUCCESS);
    expect(m.stats().tasksFinished).toBe(2);
  });

  it('retries NO_AVAILABLE_HANDLE after RETRY_DELAY_MS, up to --max_retry_attempts retries, then fails with it', () => {
    const m = manager({ maxRetryAttempts: 2 });
    const t = m.create(COPY, 'k', ['s'], '', 0).task!;
    let now = 0;
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect(m.start(now)).toEqual([t]);
      expect(t.attempts).toBe(attempt);
      const retried = m.fail(t, ErrorCode.NO_AVAILABLE_HANDLE, now);
      expect(retried).toBe(attempt <= 2);
      if (!retried) break;
      expect(t).toMatchObject({ state: TaskState.TASK_STATE_PENDING, errorCode: ErrorCode.NO_AVAILABLE_HANDLE });
      expect(m.start(now + RETRY_DELAY_MS - 1)).toEqual([]); // not before the delay
      now += RETRY_DELAY_MS;
    }
    expect(m.get(t.id)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, errorCode: ErrorCode.NO_AVAILABLE_HANDLE, attempts: 3 });
    expect(m.stats()).toMatchObject({ tasksRetried: 2, tasksFailed: 1 });
  });

  it('fails at once on a code that is not retriable', () => {
    const m = manager();
    const t = m.create(COPY, 'k', ['s'], '', 0).task!;
    m.start(0);
    expect(m.fail(t, ErrorCode.SEGMENT_NOT_FOUND, 5)).toBe(false);
    expect(m.get(t.id)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, errorCode: ErrorCode.SEGMENT_NOT_FOUND, attempts: 1 });
  });

  it('a retried task waiting for its delay does not hold up the tasks behind it', () => {
    const m = manager();
    const a = m.create(COPY, 'a', ['s'], '', 0).task!;
    m.start(0);
    m.fail(a, ErrorCode.NO_AVAILABLE_HANDLE, 0);
    const b = m.create(COPY, 'b', ['s'], '', 1).task!;
    expect(m.start(2)).toEqual([b]);
  });

  it('fails tasks past the pending and the processing timeouts with TASK_TIMED_OUT; 0 means none', () => {
    const m = manager({ pendingTimeoutMs: 100, processingTimeoutMs: 50, maxProcessing: 1 });
    const a = m.create(COPY, 'a', ['s'], '', 0).task!;
    const b = m.create(COPY, 'b', ['s'], '', 0).task!;
    m.start(10); // a processing from 10, b pending from 0
    expect(m.expire(59)).toEqual([]);
    expect(m.expire(60)).toEqual([a]); // processing 50 ms: returned, its copies to be cancelled
    expect(m.get(a.id)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, errorCode: ErrorCode.TASK_TIMED_OUT });
    expect(m.get(b.id)!.state).toBe(TaskState.TASK_STATE_PENDING);
    expect(m.expire(100)).toEqual([]); // b was pending: nothing to cancel
    expect(m.get(b.id)).toMatchObject({ state: TaskState.TASK_STATE_FAILED, errorCode: ErrorCode.TASK_TIMED_OUT });

    const none = manager({ pendingTimeoutMs: 0, processingTimeoutMs: 0 });
    const c = none.create(COPY, 'c', ['s'], '', 0).task!;
    none.expire(1e12);
    expect(c.state).toBe(TaskState.TASK_STATE_PENDING);
    none.start(0);
    none.expire(1e12);
    expect(c.state).toBe(TaskState.TASK_STATE_PROCESSING);
  });

  it('a retried task times out from when it re-entered pending, and an outcome after a timeout changes nothing', () => {
    const m = manager({ pendingTimeoutMs: 100 });
    const t = m.create(COPY, 'k', ['s'], '', 0).task!;
    m.start(0);
    m.fail(t, ErrorCode.NO_AVAILABLE_HANDLE, 90);
    expect(m.expire(150)).toEqual([]);
    expect(t.state).toBe(TaskState.TASK_STATE_PENDING);
    m.expire(190);
    expect(t).toMatchObject({ state: TaskState.TASK_STATE_FAILED, errorCode: ErrorCode.TASK_TIMED_OUT });
    m.succeed(t, 200);
    expect(m.fail(t, ErrorCode.NO_AVAILABLE_HANDLE, 200)).toBe(false);
    expect(t.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(m.stats()).toMatchObject({ tasksSucceeded: 0, tasksFailed: 1 });
  });
});
