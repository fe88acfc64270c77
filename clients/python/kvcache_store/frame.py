"""Framing of the KVD1 channel to the real client (docs/master-channel.md, the same frames as the
master channel with ClientService's method numbers).

After the 4-byte magic "KVD1", each frame is a 12-byte little-endian header (payload length u32,
request id u32, method u16, kind u8, reserved u8) followed by the protobuf payload. This module is
pure: it builds frames and reassembles received bytes into frames; the socket is the caller's.
"""
import struct
from typing import Optional, Tuple

MAGIC = b"KVD1"
HEADER = struct.Struct("<IIHBB")
HEADER_BYTES = HEADER.size
KIND_REQUEST = 0
KIND_RESPONSE = 1
KIND_ERROR = 2
#: Replies larger than this are a protocol error (the real client's own limit is the same).
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024 + 4096

Frame = Tuple[int, int, int, bytes]  # (kind, request id, method, payload)


class FrameError(Exception):
    """The peer sent something that is not a valid frame; the connection must be closed."""


def encode_request(request_id: int, method: int, payload: bytes) -> bytes:
    """One REQUEST frame (header + payload) as a single buffer."""
    return HEADER.pack(len(payload), request_id, method, KIND_REQUEST, 0) + payload


class FrameReader:
    """Reassembles frames from bytes received in any chunking.

    The caller receives straight into `space()` (e.g. socket.recv_into), reports how many bytes it
    got with `advance(n)`, and takes complete frames with `next_frame()`.
    """

    def __init__(self, capacity: int = 256 * 1024, max_payload: int = MAX_PAYLOAD_BYTES):
        self._capacity = capacity
        self._buf = bytearray(capacity)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._max_payload = max_payload

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._end - self._start

    def space(self) -> memoryview:
        """Free room after the received bytes: at least the rest of the current frame, or 64 KiB."""
        need = 64 * 1024
        avail = self._end - self._start
        if avail >= HEADER_BYTES:
            (length,) = struct.unpack_from("<I", self._buf, self._start)
            self._check(length)
            need = max(need, HEADER_BYTES + length - avail)
        if len(self._buf) - self._end < need:
            self._make_room(need)
        return self._view[self._end:]

    def advance(self, n: int) -> None:
        self._end += n

    def next_frame(self) -> Optional[Frame]:
        """The next complete frame, or None until more bytes arrive. Raises FrameError."""
        avail = self._end - self._start
        if avail < HEADER_BYTES:
            return None
        length, rid, method, kind, _ = HEADER.unpack_from(self._buf, self._start)
        self._check(length)
        if avail < HEADER_BYTES + length:
            return None
        at = self._start + HEADER_BYTES
        payload = bytes(self._view[at:at + length])
        self._start = at + length
        if self._start == self._end:
            self._start = self._end = 0
            if len(self._buf) > self._capacity:
                # a huge reply grew the buffer: do not keep it for small ones
                self._buf = bytearray(self._capacity)
                self._view = memoryview(self._buf)
        return kind, rid, method, payload

    def _check(self, length: int) -> None:
        if length > self._max_payload:
            raise FrameError(f"frame payload of {length} bytes exceeds the {self._max_payload}-byte limit")

    def _make_room(self, need: int) -> None:
        avail = self._end - self._start
        if self._start > 0 and len(self._buf) - avail >= need:
            self._buf[0:avail] = self._view[self._start:self._end]
        else:
            grown = bytearray(max(2 * len(self._buf), avail + need))
            grown[0:avail] = self._view[self._start:self._end]
            self._buf = grown
            self._view = memoryview(self._buf)
        self._start = 0
        self._end = avail
