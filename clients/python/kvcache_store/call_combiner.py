"""Single calls of many threads at once (first reads, puts), combined into batch calls.

Sixty-four threads each reading a key this process has no location for would each make a call of
their own: a lookup per read, and every reply wakes one thread, which must take the GIL back from
the others (`bench:dummy-hop`, 64 threads: 4.8-6.5k first reads/s at 151-206 us of this process's
CPU per read).
Instead the calls meet here. A call that finds no call under way makes it itself (it "leads");
calls arriving meanwhile queue. When the leader's call ends it hands every call in it its result,
then hands the queue to the first call waiting in it, which takes the calls queued so far and makes
one batch call for them: those of the same group as the first (puts of one ReplicateConfig: a
batch has one), each key once (a repeated key waits for the next call: a batch names a key once).
So one thread's calls go the usual single way at the usual cost (nothing is ever queued), and many
threads' calls go in batches as large as the number that arrived during the previous call
(the same rows: 8.8-9.7k reads/s at 80-86 us per read; puts 5.7-6.7k -> 8.1-9.3k/s; docs/client.md
"Calls of many Python threads combined").

A result is what the single or batch call gives for the key (bytes read or 0, or a negative
ErrorCode), or the exception the single call raised (the caller raises it again). Whatever a batch
call raises becomes every one of its calls' result, so no call is left waiting.
"""
import threading
from typing import Any, Callable, List, Sequence

from .errors import INTERNAL_ERROR, StoreError


class _Call:
    __slots__ = ("key", "arg", "group", "result", "wake")

    def __init__(self, key: str, arg, group):
        self.key = key
        self.arg = arg
        self.group = group
        self.result = None  # int or BaseException once done
        self.wake = threading.Lock()
        self.wake.acquire()


def _copy(e: BaseException) -> BaseException:
    """One exception per waiting thread: a raised exception's traceback is its own."""
    if isinstance(e, StoreError):
        return StoreError.from_code(e.code, e.message)
    return StoreError(INTERNAL_ERROR, f"a combined call failed: {e!r}")


class CallCombiner:
    def __init__(self, one: Callable[[str, Any, Any], int], many: Callable[[Sequence[str], List[Any], Any], List[int]]):
        #: a single call (key, arg, group): its result, or raises
        self._one = one
        #: a batch call (keys, args, group): one result per key, or raises for all
        self._many = many
        self._lock = threading.Lock()
        self._queue: List[_Call] = []
        self._leading = False
        #: calls made (single and batch), and the single calls they carried in batches
        self.calls = 0
        self.batched = 0

    def call(self, key: str, arg, group=None):
        with self._lock:
            lead = not self._leading
            self._leading = True
            if not lead:
                me = _Call(key, arg, group)
                self._queue.append(me)
        if lead:  # nothing under way: the usual single call, nothing made for it
            try:
                self.calls += 1
                try:
                    return self._one(key, arg, group)
                except (StoreError, TypeError, ValueError) as e:
                    return e
            finally:
                self._hand_on(None)
        me.wake.acquire()  # woken with a result, or to lead
        if me.result is not None:
            return me.result
        try:
            while me.result is None:
                self._run(self._take())
        finally:
            self._hand_on(me)
        return me.result

    def _hand_on(self, me) -> None:
        """The leader is done: the first call queued leads now, or nobody does."""
        with self._lock:
            if me is not None and me in self._queue:  # the leader's call raised before its own was made
                self._queue.remove(me)
            if self._queue:
                self._queue[0].wake.release()
            else:
                self._leading = False

    def _take(self) -> List[_Call]:
        with self._lock:
            batch: List[_Call] = []
            rest: List[_Call] = []
            keys = set()
            group = self._queue[0].group if self._queue else None
            for r in self._queue:
                if r.key in keys or r.group is not group:
                    rest.append(r)
                else:
                    keys.add(r.key)
                    batch.append(r)
            self._queue = rest
        return batch

    def _run(self, batch: List[_Call]) -> None:
        group = batch[0].group
        try:
            if len(batch) == 1:
                try:
                    results: list = [self._one(batch[0].key, batch[0].arg, group)]
                except (StoreError, TypeError, ValueError) as e:
                    results = [e]
            else:
                results = list(self._many([r.key for r in batch], [r.arg for r in batch], group))
                self.batched += len(batch)
        except BaseException as e:
            for r in batch:
                r.result = _copy(e)
                r.wake.release()
            raise
        self.calls += 1
        for i, r in enumerate(batch):
            r.result = results[i] if i < len(results) else INTERNAL_ERROR
            r.wake.release()  # the leader's own: nobody waits on it
