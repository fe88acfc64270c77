// Copy and move tasks in the core (docs/tiers.md "Copy and move tasks"): CreateCopyTask,
// CreateMoveTask and QueryTask. A request is checked against the table and the segments, then
// queued (task-manager.ts). A task that starts asks re-replication (re-replication.ts) for a
// directed copy to each target that holds no replica yet: a client that can copy makes it and
// reports it, and only then does the replica join the object. When every target holds one the
// task succeeds; a move first takes its source replica out of the object.
//
// A moved-away replica leaves the object at once (no reply hands it out again), but its space is
// kept until every lease handed out before has ended (the object's lease end at that moment):
// a reader told about the replica earlier may still be reading it. Then the space is freed.
import { ErrorCode } from '../../common/error-code.js';
import { keyProblem, segmentNameProblem } from '../../common/key-rules.js';
import type { CreateCopyTaskRequest__Output } from '../../proto/gen/store/CreateCopyTaskRequest.js';
import type { CreateCopyTaskResponse__Output } from '../../proto/gen/store/CreateCopyTaskResponse.js';
import type { CreateMoveTaskRequest__Output } from '../../proto/gen/store/CreateMoveTaskRequest.js';
import type { CreateMoveTaskResponse__Output } from '../../proto/gen/store/CreateMoveTaskResponse.js';
import type { QueryTaskRequest__Output } from '../../proto/gen/store/QueryTaskRequest.js';
import type { QueryTaskResponse__Output } from '../../proto/gen/store/QueryTaskResponse.js';
import { TaskKind } from '../../proto/gen/store/TaskKind.js';
import { TaskState } from '../../proto/gen/store/TaskState.js';
import type { FinishedTasks } from './master-core-config.js';
import type { CoreShared } from './core-shared.js';
import { HANDLE_FIELDS, type ObjectMeta } from './object-meta.js';
import { freeHandles } from './replica-placement.js';
import type { Segment } from './segment-registry.js';
import { Task, TaskManager, type TaskLimits, type TaskStats } from './task-manager.js';

/** Targets one copy task may name. */
export const MAX_TASK_TARGETS = 64;

/** A directed copy in flight for a task. */
interface Pending {
  task: Task;
  segmentId: number;
}

/** Space of a moved-away replica, freed once the leases that could name it have ended. */
interface Release {
  h: number[];
  at: number;
}

export class TaskPath {
  readonly tasks: TaskManager;
  /** Directed copies asked for, by tag; and each task's tags. */
  private readonly copies = new Map<number, Pending>();
  private readonly tagsOf = new Map<number, number[]>();
  private nextTag = 1;
  private readonly releases: Release[] = [];

  constructor(
    private readonly s: CoreShared,
    limits: Readonly<TaskLimits>,
    idBase: number,
  ) {
    this.tasks = new TaskManager(limits, idBase);
    s.directedCopySettled = (tag, code, now) => this.settled(tag, code, now);
  }

  createCopyTask(req: CreateCopyTaskRequest__Output, now: number): CreateCopyTaskResponse__Output {
    const fail = (status_code: number): CreateCopyTaskResponse__Output => ({ status_code, task_id: 0 });
    const targets = req.targets;
    if (!Array.isArray(targets) || targets.length === 0 || targets.length > MAX_TASK_TARGETS) return fail(ErrorCode.INVALID_PARAMS);
    if (new Set(targets).size !== targets.length) return fail(ErrorCode.INVALID_PARAMS);
    const code = this.check(req.key, targets, [], now);
    if (code !== ErrorCode.OK) return fail(code);
    return this.queue(TaskKind.TASK_KIND_COPY, req.key, targets, '', now);
  }

  createMoveTask(req: CreateMoveTaskRequest__Output, now: number): CreateMoveTaskResponse__Output {
    const fail = (status_code: number): CreateMoveTaskResponse__Output => ({ status_code, task_id: 0 });
    if (req.source === req.target) return fail(ErrorCode.INVALID_PARAMS);
    const code = this.check(req.key, [req.target], [req.source], now);
    if (code !== ErrorCode.OK) return fail(code);
    return this.queue(TaskKind.TASK_KIND_MOVE, req.key, [req.target], req.source, now);
  }

  queryTask(req: QueryTaskRequest__Output, now: number): QueryTaskResponse__Output {
    const task = this.tasks.get(Number(req.task_id));
    if (task === undefined) return { status_code: ErrorCode.TASK_NOT_FOUND, task: null, now_ms: now };
    return {
      status_code: ErrorCode.OK,
      now_ms: now,
      task: {
        id: task.id,
        kind: task.kind,
        key: task.key,
        state: task.state,
        error_code: task.errorCode,
        attempts: task.attempts,
        created_ms: task.createdMs,
        updated_ms: task.updatedMs,
        targets: [...task.targets],
        source: task.source,
      },
    };
  }

  /** Housekeeping (the core's sweep): timeouts, tasks started, moved-away space freed. Returns the tasks finished since the last sweep. */
  sweep(now: number): FinishedTasks | undefined {
    for (const task of this.tasks.expire(now)) this.cancelCopies(task);
    this.startTasks(now);
    let kept = 0;
    for (const r of this.releases) {
      if (r.at <= now) freeHandles(this.s.segments, r.h);
      else this.releases[kept++] = r;
    }
    this.releases.length = kept;
    const { tasks, more } = this.tasks.takeFinished();
    if (tasks.length === 0) return undefined;
    return {
      tasks: tasks.map((t) => ({
        id: t.id,
        kind: t.kind === TaskKind.TASK_KIND_MOVE ? 'move' : 'copy',
        key: t.key,
        ok: t.state === TaskState.TASK_STATE_SUCCESS,
        errorCode: t.errorCode,
      })),
      more,
    };
  }

  stats(): TaskStats {
    return this.tasks.stats();
  }

  /**
   * OK, or why the task cannot be: a bad key or segment name, a target not mounted or already
   * holding a replica, a source (move) without one, an object absent or being written.
   */
  private check(key: unknown, targets: readonly unknown[], sources: readonly unknown[], now: number): number {
    if (keyProblem(key) !== undefined) return ErrorCode.INVALID_KEY;
    for (const name of [...targets, ...sources]) if (segmentNameProblem(name) !== undefined) return ErrorCode.INVALID_PARAMS;
    const segs = this.s.segments;
    const targetSegs: Segment[] = [];
    for (const name of targets) {
      const seg = segs.byName(name as string);
      if (seg === undefined || seg.status !== 'MOUNTED' || seg.suspectUntil > now) return ErrorCode.SEGMENT_NOT_FOUND;
      targetSegs.push(seg);
    }
    // a move's source may be on its way out (UNMOUNTING): moving its objects off is what one wants then
    const sourceSegs = sources.map((name) => segs.byName(name as string));
    if (sourceSegs.some((seg) => seg === undefined || seg.status === 'RESTORED')) return ErrorCode.SEGMENT_NOT_FOUND;
    const meta = this.s.objects.get(key as string);
    if (meta === undefined) return ErrorCode.OBJECT_NOT_FOUND;
    if (!meta.complete) return ErrorCode.REPLICA_IS_NOT_READY;
    for (const seg of sourceSegs) if (!meta.hasHandleOn(seg!.id)) return ErrorCode.NO_REPLICA_ON_SEGMENT;
    for (const seg of targetSegs) if (meta.hasHandleOn(seg.id)) return ErrorCode.REPLICA_ALREADY_ON_SEGMENT;
    return ErrorCode.OK;
  }

  private queue(kind: number, key: string, targets: readonly string[], source: string, now: number): { status_code: number; task_id: number } {
    const { code, task } = this.tasks.create(kind as Task['kind'], key, targets, source, now);
    if (task === undefined) return { status_code: code, task_id: 0 };
    this.startTasks(now);
    return { status_code: ErrorCode.OK, task_id: task.id };
  }

  private startTasks(now: number): void {
    for (const task of this.tasks.start(now)) this.run(task, now);
  }

  /** One attempt: a directed copy to each target without a replica; none needed: done. */
  private run(task: Task, now: number): void {
    const meta = this.s.objects.get(task.key);
    if (meta === undefined) return void this.tasks.fail(task, ErrorCode.OBJECT_NOT_FOUND, now);
    const tags: number[] = [];
    for (const name of task.targets) {
      const seg = this.s.segments.byName(name);
      if (seg === undefined || seg.status !== 'MOUNTED') {
        this.cancelTags(tags);
        return void this.tasks.fail(task, ErrorCode.SEGMENT_NOT_FOUND, now);
      }
      if (meta.hasHandleOn(seg.id)) continue;
      const tag = this.nextTag++;
      tags.push(tag);
      this.copies.set(tag, { task, segmentId: seg.id });
    }
    if (tags.length === 0) return this.complete(task, now);
    this.tagsOf.set(task.id, tags);
    for (const tag of tags) this.s.rereplicator.direct(tag, task.key, this.copies.get(tag)!.segmentId);
  }

  /** A directed copy's outcome (re-replication.ts calls this). */
  private settled(tag: number, code: number, now: number): void {
    const p = this.copies.get(tag);
    if (p === undefined) return;
    this.copies.delete(tag);
    const task = p.task;
    const tags = this.tagsOf.get(task.id) ?? [];
    const left = tags.filter((t) => t !== tag);
    if (!this.tasks.isProcessing(task)) {
      this.tagsOf.delete(task.id);
      return this.cancelTags(left);
    }
    if (code !== ErrorCode.OK) {
      // the attempt ends: its other copies are withdrawn; a retry asks again for the targets still without a replica
      this.cancelTags(left);
      this.tagsOf.delete(task.id);
      this.tasks.fail(task, code, now);
      return;
    }
    if (left.length > 0) return void this.tagsOf.set(task.id, left);
    this.tagsOf.delete(task.id);
    this.complete(task, now);
  }

  /** Every target holds a replica: a move takes its source replica out, then the task succeeds. */
  private complete(task: Task, now: number): void {
    if (task.kind === TaskKind.TASK_KIND_MOVE) {
      const meta = this.s.objects.get(task.key);
      if (meta === undefined) return void this.tasks.fail(task, ErrorCode.OBJECT_NOT_FOUND, now);
      const source = this.s.segments.byName(task.source);
      if (source !== undefined && meta.hasHandleOn(source.id)) this.moveAway(meta, source.id, now);
    }
    this.tasks.succeed(task, now);
  }

  /** Takes the replicas touching `segmentId` out of `meta`; their space waits for the leases handed out so far. */
  private moveAway(meta: ObjectMeta, segmentId: number, now: number): void {
    const h = meta.h;
    const stride = meta.slices * HANDLE_FIELDS;
    const kept: number[] = [];
    const gone: number[] = [];
    for (let r = 0; r < h.length; r += stride) {
      let hit = false;
      for (let i = r; i < r + stride; i += HANDLE_FIELDS) if (h[i] === segmentId) hit = true;
      (hit ? gone : kept).push(...h.slice(r, r + stride));
    }
    if (kept.length === 0) return; // (cannot be: a target holds a replica) never leave the object without one
    meta.h = kept;
    this.s.rereplicator.invalidate(meta.key); // a copy may be reading the replica taken out
    this.s.emitObject(meta);
    const at = Math.max(now, meta.leaseUntil);
    if (at <= now) freeHandles(this.s.segments, gone);
    else this.releases.push({ h: gone, at });
  }

  private cancelCopies(task: Task): void {
    this.cancelTags(this.tagsOf.get(task.id) ?? []);
    this.tagsOf.delete(task.id);
  }

  private cancelTags(tags: readonly number[]): void {
    for (const tag of tags) {
      this.copies.delete(tag);
      this.s.rereplicator.cancel(tag);
    }
  }
}
