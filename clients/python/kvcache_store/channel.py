"""One KVD1 connection to the real client, shared by every thread of the process.

Many calls are in flight at once (ids match replies, which come in any order). No thread is
dedicated to reading: a caller whose reply has not come reads the socket itself when nobody else
does (the "reader"), hands the replies of other calls to their threads, and passes the reader's
role on when its own reply is in. A thread wake-up costs tens of microseconds here, so with one
call in flight the caller reads its own reply with no hand-off at all, and it polls the socket
without blocking for a short while (`spin_us`) before it sleeps in poll(): the real client
usually answers a small call within that time.

Every call has a deadline. A call still unanswered then raises UnavailableError; its late reply is
dropped (after running the call's `on_late` cleanup, e.g. to free the staging memory the real
client might still have been reading). When the connection ends (the real client died, or
close()), every call in flight fails at once with UnavailableError.
"""
import ctypes
import errno
import os
import select
import socket
import threading
import time
from typing import Callable, Dict, Optional, Tuple

from .cluster_auth import client_handshake
from .errors import INTERNAL_ERROR, DeadlineExceededError, StoreError, UnauthenticatedError, UnavailableError
from .frame import KIND_ERROR, KIND_RESPONSE, MAGIC, FrameError, FrameReader, encode_request

_now = time.monotonic
_yield = getattr(os, "sched_yield", lambda: None)
_POLLIN = select.POLLIN | select.POLLERR | select.POLLHUP
_POLLOUT = select.POLLOUT | select.POLLERR | select.POLLHUP

# A request is first sent with send(2) called through ctypes.PyDLL, which keeps the GIL: the socket
# is non-blocking, so it returns at once. socket.send releases the GIL around the call, and with
# many threads calling, each release hands the GIL to another caller and the sender waits to get it
# back: two thread switches per call. Measured with 64 threads (bench/dummy-hop-bench.ts rows,
# 4 KiB): futex calls per call 6.1 -> 5.2, context switches 3.4 -> 3.0, get_into 20-21k -> 21-26k
# calls/s and put_from 19-20k -> 21-24k (alternating runs). What it cannot send at once (a full
# socket buffer) goes the usual way (poll for room, GIL released).
try:
    _c_send = ctypes.PyDLL(None, use_errno=True).send
    _c_send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
    _c_send.restype = ctypes.c_ssize_t
except (AttributeError, OSError):  # no send(2) among the process's symbols: socket.send only
    _c_send = None
_SEND_FLAGS = int(getattr(socket, "MSG_DONTWAIT", 0x40)) | int(getattr(socket, "MSG_NOSIGNAL", 0x4000))
_RETRY = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)


class _Call:
    __slots__ = ("method", "done", "kind", "payload", "error", "wake", "sleeping", "abandoned", "on_late")

    def __init__(self, method: str):
        self.method = method
        self.done = False
        self.kind = 0
        self.payload = b""
        self.error: Optional[BaseException] = None
        self.wake = threading.Lock()
        self.wake.acquire()
        self.sleeping = False
        self.abandoned = False
        self.on_late: Optional[Callable[[], None]] = None


class Channel:
    def __init__(
        self,
        sock: socket.socket,
        where: str,
        spin_us: float = 100.0,
        secret: Optional[bytes] = None,
        magic: bytes = MAGIC,
        interface: str = "dummy-client",
        peer: str = "real client",
    ):
        # the magic (and with a cluster secret the handshake, cluster_auth.py) goes first, before
        # any thread can send a frame. The same framing reaches the master with its own magic,
        # interface and method numbers (direct_reads.py).
        self.peer = peer
        sock.settimeout(5.0)
        try:
            if secret is None:
                sock.sendall(magic)
            else:
                client_handshake(sock, secret, interface, magic)
        except UnauthenticatedError as e:
            sock.close()
            raise UnauthenticatedError(f"{peer} {where}: {e.message}") from None
        except OSError as e:
            sock.close()
            raise UnavailableError(f"{peer} {where}: cannot start the channel: {e}") from None
        sock.setblocking(False)
        self.where = where
        self.spin_s = max(0.0, spin_us) / 1e6
        self._sock = sock
        self._fd = sock.fileno()
        self._lock = threading.Lock()  # pending, reader role, closed
        # held while a request is sent; the socket is closed only under it (_send writes to the
        # descriptor's number, which a close would free for another file)
        self._send_lock = threading.Lock()
        self._close_after_send = False
        self._pending: Dict[int, _Call] = {}
        self._reader_busy = False
        self._next_id = 0
        self._error: Optional[UnavailableError] = None
        self._frames = FrameReader()
        self._poll_in = select.poll()
        self._poll_in.register(self._fd, select.POLLIN)
        self._poll_out = select.poll()
        self._poll_out.register(self._fd, select.POLLOUT)

    @property
    def closed(self) -> bool:
        return self._error is not None

    def fileno(self) -> int:
        """The connection's socket descriptor (for a thread waiting for its hang-up)."""
        return self._fd

    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    # ------------------------------------------------------------------ calls

    def call(self, method: str, index: int, payload: bytes, deadline: float, on_late: Optional[Callable[[], None]] = None, spin: bool = True) -> bytes:
        """Sends one request and returns the reply's payload. Raises UnavailableError when the
        connection fails or the deadline passes, StoreError for an ERROR frame. `spin`: poll for
        the reply for `spin_us` before sleeping (False: a reply that cannot come that soon)."""
        c = _Call(method)
        c.on_late = on_late
        with self._lock:
            if self._error is not None:
                raise UnavailableError(f"{method}: {self._error.message}")
            self._next_id = (self._next_id + 1) & 0xFFFFFFFF
            rid = self._next_id
            self._pending[rid] = c
        frame = encode_request(rid, index, payload)
        try:
            self._send(frame, deadline, method)
        except UnavailableError as e:
            self._fail(e)
            raise UnavailableError(f"{method}: {e.message}") from None
        self._wait(c, rid, deadline, spin)
        if c.error is not None:
            raise c.error
        if c.kind == KIND_ERROR and c.payload.startswith(b"UNAUTHENTICATED:"):
            raise UnauthenticatedError(f"{method}: the {self.peer} at {self.where} requires the cluster secret: {c.payload.decode('utf-8', 'replace')}")
        if c.kind == KIND_ERROR:
            raise StoreError(INTERNAL_ERROR, f"{method}: the {self.peer} at {self.where} refused the request: {c.payload.decode('utf-8', 'replace')}")
        return c.payload

    def call_nowait(self, method: str, index: int, payload: bytes, timeout: float = 5.0) -> None:
        """Sends a request whose reply nobody waits for (it is dropped when it comes). Safe to
        call from a late reply's cleanup, which runs on the reading thread."""
        c = _Call(method)
        c.abandoned = True
        with self._lock:
            if self._error is not None:
                return
            self._next_id = (self._next_id + 1) & 0xFFFFFFFF
            rid = self._next_id
            self._pending[rid] = c
        try:
            self._send(encode_request(rid, index, payload), _now() + timeout, method)
        except UnavailableError as e:
            self._fail(e)

    def _send(self, data: bytes, deadline: float, method: str) -> None:
        with self._send_lock:
            try:
                self._send_locked(data, deadline, method)
            finally:
                if self._close_after_send:
                    self._sock.close()

    def _send_locked(self, data: bytes, deadline: float, method: str) -> None:
        if self._error is not None:
            raise UnavailableError(f"{self.peer} {self.where}: {self._error.message}")
        view = memoryview(data)
        if _c_send is not None:
            n = _c_send(self._fd, data, len(data), _SEND_FLAGS)
            if n == len(data):
                return
            if n < 0:
                err = ctypes.get_errno()
                if err not in _RETRY:
                    raise UnavailableError(f"{self.peer} {self.where}: send failed: {os.strerror(err)}")
            else:
                view = view[n:]
        while view:
            try:
                n = self._sock.send(view)
                view = view[n:]
                continue
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                raise UnavailableError(f"{self.peer} {self.where}: send failed: {e}") from None
            remaining = deadline - _now()
            if remaining <= 0:
                # part of a frame may be out: the stream is unusable
                raise UnavailableError(f"{self.peer} {self.where}: {method} not sent within its deadline (the {self.peer} does not read)")
            self._poll_out.poll(remaining * 1000)

    def _wait(self, c: _Call, rid: int, deadline: float, spin: bool = True) -> None:
        while True:
            reader = False
            with self._lock:
                if c.done:
                    return
                if not self._reader_busy:
                    self._reader_busy = True
                    reader = True
                else:
                    c.sleeping = True
            if reader:
                try:
                    self._read_until(c, deadline, spin)
                finally:
                    self._pass_reader()
                if c.done:
                    return
            else:
                remaining = deadline - _now()
                woken = remaining > 0 and c.wake.acquire(timeout=remaining)
                if not woken:
                    with self._lock:
                        if c.sleeping:
                            c.sleeping = False
                        else:
                            c.wake.acquire(blocking=False)  # released just as the wait timed out
            if _now() >= deadline:
                with self._lock:
                    if c.done:
                        return
                    c.abandoned = True
                raise DeadlineExceededError(f"{c.method}: no reply from the {self.peer} at {self.where} within the call's deadline")

    def _pass_reader(self) -> None:
        """Gives up the reader's role, waking one sleeping caller to take it."""
        with self._lock:
            self._reader_busy = False
            for other in self._pending.values():
                if other.sleeping and not other.done:
                    other.sleeping = False
                    other.wake.release()
                    break

    def _read_until(self, c: _Call, deadline: float, spin: bool = True) -> None:
        frames = self._frames
        spin_s = self.spin_s if spin else 0.0
        spin_until = _now() + spin_s
        while not c.done:
            if self._error is not None:
                return
            f = None
            try:
                f = frames.next_frame()
            except FrameError as e:
                self._fail(UnavailableError(f"{self.peer} {self.where}: {e}"))
                return
            if f is not None:
                self._deliver(f)
                continue
            try:
                n = self._sock.recv_into(frames.space())
            except (BlockingIOError, InterruptedError):
                n = -1
            except OSError as e:
                self._fail(UnavailableError(f"connection to the {self.peer} {self.where} failed: {e}"))
                return
            if n == 0:
                self._fail(UnavailableError(f"the {self.peer} {self.where} closed the connection (did it exit?)"))
                return
            if n > 0:
                frames.advance(n)
                spin_until = _now() + spin_s
                continue
            now = _now()
            if now < spin_until:
                _yield()  # let the real client run if it shares this core
                continue
            remaining = deadline - now
            if remaining <= 0:
                return
            self._poll_in.poll(min(remaining, 1.0) * 1000)

    def _deliver(self, f: Tuple[int, int, int, bytes]) -> None:
        kind, rid, _method, payload = f
        late = None
        with self._lock:
            c = self._pending.pop(rid, None)
            if c is None:
                return
            if kind != KIND_RESPONSE and kind != KIND_ERROR:
                c.error = UnavailableError(f"{c.method}: unexpected frame kind {kind} from the {self.peer}")
            c.kind = kind
            c.payload = payload
            c.done = True
            if c.abandoned:
                late = c.on_late
            elif c.sleeping:
                c.sleeping = False
                c.wake.release()
        if late is not None:
            late()

    # ------------------------------------------------------------------ end

    def _fail(self, error: UnavailableError) -> None:
        """Ends the connection: every call in flight fails with `error`."""
        late = []
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            calls = list(self._pending.values())
            self._pending.clear()
            for c in calls:
                c.error = UnavailableError(f"{c.method}: {error.message}")
                c.done = True
                if c.abandoned and c.on_late is not None:
                    late.append(c.on_late)
                elif c.sleeping:
                    c.sleeping = False
                    c.wake.release()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._send_lock.acquire(blocking=False):
            try:
                self._sock.close()
            finally:
                self._send_lock.release()
        else:
            self._close_after_send = True  # the thread sending closes it (the shutdown ends its send)
        for fn in late:
            fn()

    def close(self, reason: str = "closed") -> None:
        self._fail(UnavailableError(f"connection to the {self.peer} {self.where} {reason}"))
