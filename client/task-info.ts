// A copy or move task as the client API reports it (QueryTask, docs/tiers.md "Copy and move
// tasks"): the proto's TaskInfo with named kind and state, and the master's monotonic times turned
// into wall-clock ones (the reply carries the master's clock when it answered).
import { errorCodeName } from '../common/error-code.js';
import { TaskKind } from '../proto/gen/store/TaskKind.js';
import { TaskState } from '../proto/gen/store/TaskState.js';
import type { TaskInfo__Output } from '../proto/gen/store/TaskInfo.js';

export type TaskKindName = 'copy' | 'move';
export type TaskStateName = 'pending' | 'processing' | 'success' | 'failed';

export interface TaskInfo {
  id: number;
  kind: TaskKindName;
  key: string;
  state: TaskStateName;
  /** failed: why (an ErrorCode); otherwise the last failure that was retried, 0 when none. */
  errorCode: number;
  errorName: string;
  /** Copy attempts started so far. */
  attempts: number;
  /** Wall-clock ms (Date.now() scale), as of this client's clock. */
  createdAt: number;
  updatedAt: number;
  targets: string[];
  /** move: the segment whose replica goes; '' for a copy. */
  source: string;
}

const STATES: Record<number, TaskStateName> = {
  [TaskState.TASK_STATE_PENDING]: 'pending',
  [TaskState.TASK_STATE_PROCESSING]: 'processing',
  [TaskState.TASK_STATE_SUCCESS]: 'success',
  [TaskState.TASK_STATE_FAILED]: 'failed',
};

/** The reply's task; `masterNowMs` is the reply's now_ms, `wallNowMs` this process's Date.now() on receipt. */
export function taskInfoOf(t: TaskInfo__Output, masterNowMs: number, wallNowMs: number): TaskInfo {
  const wall = (ms: number): number => wallNowMs - (Number(masterNowMs) - Number(ms));
  return {
    id: Number(t.id),
    kind: t.kind === TaskKind.TASK_KIND_MOVE ? 'move' : 'copy',
    key: t.key,
    state: STATES[t.state as number] ?? 'pending',
    errorCode: t.error_code,
    errorName: t.error_code === 0 ? 'OK' : errorCodeName(t.error_code),
    attempts: t.attempts,
    createdAt: wall(Number(t.created_ms)),
    updatedAt: wall(Number(t.updated_ms)),
    targets: [...t.targets],
    source: t.source,
  };
}
