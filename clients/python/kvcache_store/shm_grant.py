"""The reading side of the transfer engine's same-host shared-memory transport, in pure Python:
ask an engine on this host for the memory behind a range it serves, map it read-only, and tell
when what was mapped may no longer be the engine's.

The protocol is the engine's (native/src/shm_wire.h, the serving side native/src/shm_server.cc,
docs/native.md "Same-host shared-memory transport" and "Authentication"). Each engine listens on
the abstract Unix socket "\\0kvstore-te/<host:port>" (abstract names belong to the network
namespace: same host, or same pod). With the cluster secret the connection first runs the
challenge-response (interface "transfer-shm"):

    client -> server  b"KSH1"
    server -> client  Ns (32 random bytes)
    client -> server  Nc (32 bytes) + HMAC-SHA256(secret, b"kvstore-auth-v1 client transfer-shm" + Ns + Nc)
    server -> client  HMAC-SHA256(secret, b"kvstore-auth-v1 server transfer-shm" + Ns + Nc)
    a refusal: 8 bytes (b"KSA2", int32 status 4), then the close

Then each request is 24 bytes little-endian (magic "KSQ2", reserved u32, address u64, length u64)
and each answer 64 (magic "KSA2", status i32, region start, region length, mapping base, mapping
length, file offset of the base, the engine's region generation, the region's incarnation; u64
each). Status 0 comes with three fds (SCM_RIGHTS): the mapping, the engine's generation page and
the region's fence page (for writers). 1: the range is not served; 3: not shareable (not
fd-backed, or our uid is not one the engine gives fds to); 4: the engine wants the secret.

A writer (a dummy's own puts, direct_puts.py) asks for a writable grant: the mapping read-write
and the fence page read-only. The fence page says which write generations the engine refuses
(the master gave those writes up: docs/integrity.md "Write fences"); its layout is the engine's
(native/src/fence_page.h): u64 seq (odd while the engine updates it), u64 below, u64 count, then
`count` revoked generations. A write of generation g is refused when g < below or g is listed,
and when no stable snapshot can be read (a refused write is safe, a stale one is not); it is
checked before every chunk as the engine's own writers do.

A grant stays true while the engine's generation page holds the value its answer carried (the
engine bumps it whenever a served region goes away) and the engine lives (a thread waits for the
control socket's hang-up, so a read checks a flag, not a syscall).
"""
import hashlib
import hmac
import mmap
import os
import select
import socket
import struct
import ctypes
import threading
from typing import List, Optional

from .errors import StoreError, UnauthenticatedError, UnavailableError, INTERNAL_ERROR

REQUEST = struct.Struct("<IIQQ")
RESPONSE = struct.Struct("<IiQQQQQQQ")
REQUEST_MAGIC = 0x3251534B  # "KSQ2"
RESPONSE_MAGIC = 0x3241534B  # "KSA2"
AUTH_HELLO = b"KSH1"
OK, OUT_OF_RANGE, NOT_SHAREABLE, UNAUTHENTICATED = 0, 1, 3, 4
GRANT_FDS = 3
NONCE_BYTES = 32
MAC_BYTES = 32
INTERFACE = b"transfer-shm"
_POLLRDHUP = getattr(select, "POLLRDHUP", 0x2000)
#: the engine's fence page (native/src/fence_page.h): its size and most revoked generations listed
FENCE_PAGE_BYTES = 8192
MAX_REVOKED = 1000
#: a write is copied and checked against the fence in chunks of at most this many bytes (the engine's chunk)
WRITE_CHUNK = 1 << 20
#: madvise(2) advice that fills in page tables (Linux 5.14+), and the window a populator fills at a time
MADV_POPULATE_READ, MADV_POPULATE_WRITE = 22, 23
POPULATE_WINDOW = 2 << 20
_libc = ctypes.CDLL(None, use_errno=True)  # CDLL: the GIL is released around madvise
_madvise = getattr(_libc, "madvise", None)
if _madvise is not None:
    _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    _madvise.restype = ctypes.c_int


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int), ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


def _address_of(mm: mmap.mmap) -> int:
    """The address of a mapping's first byte, read-only mappings included (the buffer protocol)."""
    b = _PyBuffer()
    ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(mm), ctypes.byref(b), 0)
    try:
        return b.buf
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(b))


def _populate(grant: "Grant", peer: "ShmPeer", write: bool) -> None:
    """Fills in the page tables of a new grant's mapping, window after window, on a thread of its
    own (as the engine's populator does for its grants: docs/native.md): a copy through the grant
    then takes no page fault per 4 KiB under the GIL. Stops when the grant goes stale or the
    kernel refuses the advice (before Linux 5.14: pages fault in as they are touched)."""
    if _madvise is None:
        return
    base = _address_of(grant._mm)
    advice = MADV_POPULATE_WRITE if write else MADV_POPULATE_READ
    size = len(grant._mm)
    for at in range(0, size, POPULATE_WINDOW):
        if not peer.alive or peer.generation() != grant.generation:
            return
        if _madvise(base + at, min(POPULATE_WINDOW, size - at), advice) != 0:
            return


class ShmRefused(StoreError):
    """The engine will not share this memory with us (not shareable, not served, another secret,
    or no socket to reach it): read through the real client instead."""

    def __init__(self, message: str):
        super().__init__(INTERNAL_ERROR, message)


def watch_hangup(fd: int, then, name: str) -> threading.Thread:
    """Calls `then()` on a thread of its own once the socket `fd` hangs up (the peer closed or
    died, or this side shut it down). It waits in poll() for the hang-up only, never for data, on
    a duplicate of the descriptor (so a close of `fd` meanwhile cannot make it poll another file)."""
    dup = os.dup(fd)

    def run() -> None:
        p = select.poll()
        p.register(dup, _POLLRDHUP)
        try:
            while True:
                try:
                    events = p.poll()
                except InterruptedError:
                    continue
                if events:
                    break
        finally:
            os.close(dup)
        then()

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t


def control_name(endpoint: str) -> str:
    """The engine's abstract socket name (leading NUL)."""
    return "\0kvstore-te/" + endpoint


def _proof(secret: bytes, side: bytes, ns: bytes, nc: bytes) -> bytes:
    return hmac.new(secret, b"kvstore-auth-v1 " + side + b" " + INTERFACE + ns + nc, hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


class Grant:
    """A served region of the engine, mapped here: `view` holds its bytes. A writable grant
    also has the address of the region's first byte here (`base`) and the fence page (`fence`)."""

    __slots__ = ("start", "length", "incarnation", "generation", "view", "base", "fence", "_mm", "_fm")

    def __init__(self, start: int, length: int, incarnation: int, generation: int, mm: mmap.mmap, at: int, fm: Optional[mmap.mmap] = None):
        self.start = start
        self.length = length
        self.incarnation = incarnation
        self.generation = generation
        self._mm = mm
        self.view = memoryview(mm)[at:at + length]
        self._fm = fm
        self.fence = memoryview(fm).cast("Q") if fm is not None else None
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.view)) if fm is not None else None

    def covers(self, address: int, length: int) -> bool:
        return self.start <= address and address + length <= self.start + self.length

    def refuses(self, generation: int) -> bool:
        """Whether the engine's fence now refuses a write of `generation` (also when no stable
        snapshot of the page could be read, or this grant has no fence page)."""
        f = self.fence
        if f is None:
            return True
        for attempt in range(10000):
            s1 = f[0]
            if s1 & 1:
                if attempt > 100:
                    os.sched_yield()
                continue
            below = f[1]
            count = min(f[2], MAX_REVOKED)
            listed = count > 0 and generation in f[3:3 + count]
            if f[0] != s1:
                continue
            return generation < below or listed
        return True


class ShmPeer:
    """One engine's control connection, its generation page and the grants it made us. Grant
    requests run one at a time (a lock); finding a cached grant takes no lock."""

    def __init__(self, endpoint: str, secret: Optional[bytes], timeout: float = 2.0):
        self.endpoint = endpoint
        self.alive = False
        self.grants: List[Grant] = []
        self._generation = None  # memoryview of the generation page as u64s
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(control_name(endpoint))
            if secret is not None:
                self._handshake(secret)
        except (OSError, ShmRefused) as e:
            self._sock.close()
            if isinstance(e, ShmRefused):
                raise
            raise ShmRefused(f"engine {endpoint}: no same-host control socket reachable ({e})") from None
        self.alive = True
        self._watcher = watch_hangup(self._sock.fileno(), self._hung_up, f"kvstore-shm-{endpoint}")

    def _handshake(self, secret: bytes) -> None:
        s = self._sock
        s.sendall(AUTH_HELLO)
        ns = _recv_exact(s, NONCE_BYTES)
        if len(ns) != NONCE_BYTES:
            why = "it runs without the cluster secret" if len(ns) == 8 and ns[:4] == b"KSA2" else "it closed the connection at the hello"
            raise UnauthenticatedError(f"engine {self.endpoint} (transfer-shm) refused our authentication: {why}")
        nc = os.urandom(NONCE_BYTES)
        s.sendall(nc + _proof(secret, b"client", ns, nc))
        answer = _recv_exact(s, MAC_BYTES)
        if len(answer) != MAC_BYTES:
            raise UnauthenticatedError(f"engine {self.endpoint} (transfer-shm) refused our authentication proof: its cluster secret differs")
        if not hmac.compare_digest(answer, _proof(secret, b"server", ns, nc)):
            raise UnauthenticatedError(f"engine {self.endpoint} (transfer-shm) failed to prove the cluster secret")

    def _hung_up(self) -> None:
        self.alive = False

    def generation(self) -> int:
        g = self._generation
        return g[0] if g is not None else -1

    def find(self, address: int, length: int, write: bool = False) -> Optional[Grant]:
        """The cached grant covering the range (writable with `write`) and still current, else
        None (stale ones dropped)."""
        grants = self.grants
        if not grants:
            return None
        g0 = self.generation()
        for g in grants:
            if g.generation != g0:
                self.grants = [x for x in grants if x.generation == g0]
                return self.find(address, length, write) if self.grants else None
            if g.covers(address, length) and (not write or g.fence is not None):
                return g
        return None

    def grant(self, address: int, length: int, write: bool = False) -> Grant:
        """The grant covering [address, +length) (mapped read-write with its fence page with
        `write`), asking the engine when none is cached. Raises ShmRefused (or
        UnauthenticatedError) when it will not share it, UnavailableError when the engine is gone
        or does not answer."""
        g = self.find(address, length, write)
        if g is not None:
            return g
        with self._lock:
            g = self.find(address, length, write)
            if g is not None:
                return g
            if not self.alive:
                raise UnavailableError(f"engine {self.endpoint}: its control socket closed")
            return self._ask(address, length, write)

    def write(self, address: int, src, length: int, incarnation: int, generation: int) -> int:
        """Copies `length` bytes from `src` (an address in this process, or a byte view) to the
        engine's `address`, as a write of `generation` into registration `incarnation` (0:
        unchecked): chunk after chunk, each once the grant is current and the fence allows the
        generation. Returns where the bytes lie here (their address in the mapping). Raises
        ShmRefused when it must not (or cannot) be written here; nothing is then written after
        the refusal."""
        g = self.grant(address, length, write=True)
        if incarnation and g.incarnation != incarnation:
            raise ShmRefused(f"engine {self.endpoint}: the write names registration {incarnation}, the region is now {g.incarnation}")
        dst = g.base + (address - g.start)
        done = 0
        while done < length:
            if not self.alive or self.generation() != g.generation:
                raise ShmRefused(f"engine {self.endpoint}: the region went away during the write")
            if g.refuses(generation):
                raise ShmRefused(f"engine {self.endpoint}: a write of generation {generation} is refused by the region's fence (given up by the master)")
            n = min(WRITE_CHUNK, length - done)
            if isinstance(src, int):
                ctypes.memmove(dst + done, src + done, n)
            else:
                at = address - g.start + done
                g.view[at:at + n] = src[done:done + n]
            done += n
        return dst

    def _ask(self, address: int, length: int, write: bool = False) -> Grant:
        s = self._sock
        try:
            s.sendall(REQUEST.pack(REQUEST_MAGIC, 0, address, length))
            data, fds, _flags, _addr = socket.recv_fds(s, RESPONSE.size, GRANT_FDS, socket.MSG_CMSG_CLOEXEC)
            if data and len(data) < RESPONSE.size:
                data += _recv_exact(s, RESPONSE.size - len(data))
        except OSError as e:
            raise UnavailableError(f"engine {self.endpoint}: shm control request failed: {e}") from None
        try:
            if len(data) != RESPONSE.size:
                raise UnavailableError(f"engine {self.endpoint}: shm control connection closed or garbled")
            magic, status, start, rlen, base, mlen, offset, generation, incarnation = RESPONSE.unpack(data)
            if magic != RESPONSE_MAGIC:
                raise UnavailableError(f"engine {self.endpoint}: shm control answer garbled")
            if status == UNAUTHENTICATED:
                raise UnauthenticatedError(f"engine {self.endpoint} (transfer-shm) requires the cluster secret and this client has none")
            if status == OUT_OF_RANGE:
                raise ShmRefused(f"engine {self.endpoint}: [{address}, +{length}) is outside its served regions")
            if status != OK or len(fds) < GRANT_FDS:
                raise ShmRefused(f"engine {self.endpoint}: the range is not shareable with this process (status {status})")
            if self._generation is None:
                gm = mmap.mmap(fds[1], 8, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                self._generation = memoryview(gm).cast("Q")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if write else 0)
            mm = mmap.mmap(fds[0], mlen, flags=mmap.MAP_SHARED, prot=prot, offset=offset)
            fm = mmap.mmap(fds[2], FENCE_PAGE_BYTES, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) if write else None
            g = Grant(start, rlen, incarnation, generation, mm, start - base, fm)
        except OSError as e:
            raise ShmRefused(f"engine {self.endpoint}: cannot map the granted memory: {e}") from None
        finally:
            for fd in fds:
                os.close(fd)
        self.grants = self.grants + [g]
        threading.Thread(target=_populate, args=(g, self, write), name=f"kvstore-populate-{self.endpoint}", daemon=True).start()
        return g

    def close(self) -> None:
        """Ends the control connection (the watcher then ends too). Mappings stay until the last
        view of them is gone."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._watcher.join(5)
        self._sock.close()
        self.grants = []

