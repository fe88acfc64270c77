"""The copy and move task calls of DummyClient (docs/tiers.md "Copy and move tasks"): forwarded
by the real client to the master, which queues the task and has a store service make the copy.
Mixed into DummyClient, whose `_simple` sends one call within its deadline and `_code` applies
the return conventions."""
import time
from typing import Optional, Sequence

from ._proto import store_master_pb2 as mpb
from .errors import StoreError

_KINDS = {mpb.TASK_KIND_COPY: "copy", mpb.TASK_KIND_MOVE: "move"}
_STATES = {
    mpb.TASK_STATE_PENDING: "pending",
    mpb.TASK_STATE_PROCESSING: "processing",
    mpb.TASK_STATE_SUCCESS: "success",
    mpb.TASK_STATE_FAILED: "failed",
}


class TaskCalls:
    def create_copy_task(self, key: str, targets: Sequence[str], *, timeout: Optional[float] = None) -> int:
        """Queues a task giving `key` a replica on each segment named in `targets`: the task id
        (positive), or a negative code (e.g. OBJECT_NOT_FOUND, SEGMENT_NOT_FOUND, TASK_QUEUE_FULL)."""
        try:
            if isinstance(targets, str):
                raise TypeError("create_copy_task: targets must be a sequence of segment names, not one string")
            return int(self._simple("CreateCopyTask", mpb.CreateCopyTaskRequest(key=key, targets=list(targets)), timeout).task_id)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def create_move_task(self, key: str, source: str, target: str, *, timeout: Optional[float] = None) -> int:
        """Queues a task moving `key`'s replica from segment `source` to segment `target`: the
        task id (positive), or a negative code."""
        try:
            self._forget((key,))
            return int(self._simple("CreateMoveTask", mpb.CreateMoveTaskRequest(key=key, source=source, target=target), timeout).task_id)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def query_task(self, task_id: int, *, timeout: Optional[float] = None) -> dict:
        """The task: {"id", "kind" ("copy"/"move"), "key", "state" ("pending", "processing",
        "success", "failed"), "error_code", "attempts", "created_at", "updated_at" (seconds since
        the epoch, by this host's clock), "targets", "source"}. Raises on failure (TASK_NOT_FOUND
        for an id the master does not know: tasks live in the master's memory)."""
        res = self._simple("QueryTask", mpb.QueryTaskRequest(task_id=int(task_id)), timeout)
        t = res.task
        wall = time.time()

        def at(ms: int) -> float:
            return wall - (int(res.now_ms) - int(ms)) / 1000.0

        return {
            "id": int(t.id),
            "kind": _KINDS.get(t.kind, "copy"),
            "key": t.key,
            "state": _STATES.get(t.state, "pending"),
            "error_code": int(t.error_code),
            "attempts": int(t.attempts),
            "created_at": at(t.created_ms),
            "updated_at": at(t.updated_ms),
            "targets": list(t.targets),
            "source": t.source,
        }
