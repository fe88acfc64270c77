// The copy/move task manager's queues (spec "Task manager"): a task waits in `pending` for a
// processing slot, runs in `processing` (its copies asked for), and ends in `finished` (SUCCESS
// or FAILED) where QueryTask still finds it. Each queue is bounded by its flag: a full pending
// queue refuses new tasks (TASK_QUEUE_FULL), processing takes at most its limit at once, and the
// oldest finished tasks are dropped first. A task too long pending or processing fails with
// TASK_TIMED_OUT (0 = no timeout). A retriable failure sends the task back to pending, after
// RETRY_DELAY_MS, up to --max_retry_attempts retries.
//
// Pure bookkeeping with the time passed in: what a task does is task-path.ts's business.
// Each queue is a Map in insertion order, which is also the order tasks entered it (a task that
// re-enters is re-inserted at the back), so timeouts are found from the head, O(expired).
import { ErrorCode } from '../../common/error-code.js';
import { TaskKind } from '../../proto/gen/store/TaskKind.js';
import { TaskState } from '../../proto/gen/store/TaskState.js';

export type TaskKindValue = (typeof TaskKind)[keyof typeof TaskKind];
export type TaskStateValue = (typeof TaskState)[keyof typeof TaskState];

/** A failed attempt is retried this long after it failed (a full segment does not free space at once). */
export const RETRY_DELAY_MS = 1000;
/** Tasks finished since the last `takeFinished` that it reports (the rest are only counted). */
export const FINISHED_REPORT_MAX = 100;
/** Pending tasks looked at per `start` call past ones waiting for their retry time. */
const START_SCAN = 1024;

/**
 * Failures worth another attempt: no space on the target (the spec's NO_AVAILABLE_HANDLE), a copy
 * that failed or whose copier went silent (TRANSFER_FAILED), an object rewritten during the copy.
 */
const RETRIABLE: ReadonlySet<number> = new Set([ErrorCode.NO_AVAILABLE_HANDLE, ErrorCode.TRANSFER_FAILED, ErrorCode.REPLICA_IS_NOT_READY]);

export interface TaskLimits {
  maxPending: number; // --max_total_pending_tasks
  maxProcessing: number; // --max_total_processing_tasks
  maxFinished: number; // --max_total_finished_tasks
  pendingTimeoutMs: number; // --pending_task_timeout_sec (0: none)
  processingTimeoutMs: number; // --processing_task_timeout_sec (0: none)
  maxRetryAttempts: number; // --max_retry_attempts
}

export const DEFAULT_TASK_LIMITS: Readonly<TaskLimits> = Object.freeze({
  maxPending: 10_000,
  maxProcessing: 10_000,
  maxFinished: 10_000,
  pendingTimeoutMs: 300_000,
  processingTimeoutMs: 300_000,
  maxRetryAttempts: 10,
});

export class Task {
  state: TaskStateValue = TaskState.TASK_STATE_PENDING;
  /** FAILED: why. Otherwise the last failure retried (0: none). */
  errorCode = 0;
  /** Attempts started (the first included). */
  attempts = 0;
  updatedMs: number;
  /** When the task entered its current queue (timeouts count from here). */
  enteredMs: number;
  /** Pending after a failure: not started before this. */
  notBefore = 0;

  constructor(
    readonly id: number,
    readonly kind: TaskKindValue,
    readonly key: string,
    readonly targets: readonly string[],
    /** MOVE: the segment whose replica goes; '' for COPY. */
    readonly source: string,
    readonly createdMs: number,
  ) {
    this.updatedMs = createdMs;
    this.enteredMs = createdMs;
  }
}

export interface TaskStats {
  tasksPending: number;
  tasksProcessing: number;
  tasksFinished: number;
  tasksSucceeded: number;
  tasksFailed: number;
  tasksRetried: number;
}

export class TaskManager {
  private readonly pending = new Map<number, Task>();
  private readonly processing = new Map<number, Task>();
  private readonly finished = new Map<number, Task>();
  private nextId: number;
  private succeeded = 0;
  private failed = 0;
  private retried = 0;
  /** Finished since the last takeFinished (at most FINISHED_REPORT_MAX), and how many more. */
  private recent: Task[] = [];
  private recentDropped = 0;

  /** `idBase`: task ids start there (a process passes its view version scaled up, so an id of an earlier master names no task here). */
  constructor(
    readonly limits: Readonly<TaskLimits>,
    idBase = 1,
  ) {
    this.nextId = idBase;
  }

  /** Queues a new task (PENDING); TASK_QUEUE_FULL when --max_total_pending_tasks wait already. */
  create(kind: TaskKindValue, key: string, targets: readonly string[], source: string, now: number): { code: number; task?: Task } {
    if (this.pending.size >= this.limits.maxPending) return { code: ErrorCode.TASK_QUEUE_FULL };
    const task = new Task(this.nextId++, kind, key, [...targets], source, now);
    this.pending.set(task.id, task);
    return { code: ErrorCode.OK, task };
  }

  get(id: number): Task | undefined {
    return this.pending.get(id) ?? this.processing.get(id) ?? this.finished.get(id);
  }

  /** Moves pending tasks whose time has come to processing, while slots are free; returns them (their attempt begins). */
  start(now: number): Task[] {
    const out: Task[] = [];
    let scanned = 0;
    for (const task of this.pending.values()) {
      if (this.processing.size >= this.limits.maxProcessing || scanned++ >= START_SCAN) break;
      if (task.notBefore > now) continue;
      this.pending.delete(task.id);
      this.enter(this.processing, task, TaskState.TASK_STATE_PROCESSING, now);
      task.attempts++;
      out.push(task);
    }
    return out;
  }

  /** A processing task completed. */
  succeed(task: Task, now: number): void {
    if (!this.processing.delete(task.id)) return;
    this.succeeded++;
    this.finish(task, TaskState.TASK_STATE_SUCCESS, 0, now);
  }

  /**
   * A processing task's attempt failed with `code`: back to pending (after RETRY_DELAY_MS) when
   * the code is retriable and retries remain, else FAILED. Returns whether it will be retried.
   */
  fail(task: Task, code: number, now: number): boolean {
    if (!this.processing.delete(task.id)) return false;
    if (RETRIABLE.has(code) && task.attempts <= this.limits.maxRetryAttempts) {
      this.retried++;
      task.errorCode = code;
      task.notBefore = now + RETRY_DELAY_MS;
      this.enter(this.pending, task, TaskState.TASK_STATE_PENDING, now);
      return true;
    }
    this.failed++;
    this.finish(task, TaskState.TASK_STATE_FAILED, code, now);
    return false;
  }

  /** Fails (TASK_TIMED_OUT) tasks past their queue's timeout; returns those that were processing (their copies are to be cancelled). */
  expire(now: number): Task[] {
    const out: Task[] = [];
    for (const [queue, limit] of [
      [this.pending, this.limits.pendingTimeoutMs],
      [this.processing, this.limits.processingTimeoutMs],
    ] as const) {
      if (limit === 0) continue;
      for (const task of queue.values()) {
        if (now - task.enteredMs < limit) break; // entry order: the rest entered later
        queue.delete(task.id);
        if (queue === this.processing) out.push(task);
        this.failed++;
        this.finish(task, TaskState.TASK_STATE_FAILED, ErrorCode.TASK_TIMED_OUT, now);
      }
    }
    return out;
  }

  /** The tasks finished since the last call (for the master's log), and how many more finished that are not listed. */
  takeFinished(): { tasks: Task[]; more: number } {
    const out = { tasks: this.recent, more: this.recentDropped };
    this.recent = [];
    this.recentDropped = 0;
    return out;
  }

  isProcessing(task: Task): boolean {
    return this.processing.get(task.id) === task;
  }

  stats(): TaskStats {
    return {
      tasksPending: this.pending.size,
      tasksProcessing: this.processing.size,
      tasksFinished: this.finished.size,
      tasksSucceeded: this.succeeded,
      tasksFailed: this.failed,
      tasksRetried: this.retried,
    };
  }

  private enter(queue: Map<number, Task>, task: Task, state: TaskStateValue, now: number): void {
    task.state = state;
    task.updatedMs = now;
    task.enteredMs = now;
    queue.set(task.id, task);
  }

  private finish(task: Task, state: TaskStateValue, code: number, now: number): void {
    task.errorCode = code;
    this.enter(this.finished, task, state, now);
    if (this.recent.length < FINISHED_REPORT_MAX) this.recent.push(task);
    else this.recentDropped++;
    const max = this.limits.maxFinished;
    for (const old of this.finished.values()) {
      if (this.finished.size <= max) break;
      this.finished.delete(old.id);
    }
  }
}
