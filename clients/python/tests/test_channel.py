"""The KVD1 channel (kvcache_store/channel.py) against a scripted peer over a socketpair: replies
that come together and out of order reach the right callers, a request larger than the socket
buffer goes out whole, a channel closed while a request waits for room fails that call cleanly."""
import socket
import struct
import threading
import time

import pytest

from kvcache_store.channel import Channel
from kvcache_store.errors import UnavailableError
from kvcache_store.frame import HEADER, HEADER_BYTES, KIND_RESPONSE, MAGIC


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


def read_request(s):
    length, rid, method, _kind, _ = HEADER.unpack(recv_exact(s, HEADER_BYTES))
    return rid, method, recv_exact(s, length)


def reply(rid, method, payload):
    return HEADER.pack(len(payload), rid, method, KIND_RESPONSE, 0) + payload


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_replies_written_together_in_reverse_order_reach_their_callers(pair):
    mine, peer = pair
    n = 16

    def serve():
        assert recv_exact(peer, 4) == MAGIC
        reqs = [read_request(peer) for _ in range(n)]
        # one write carrying every reply, the last request answered first
        peer.sendall(b"".join(reply(rid, m, b"echo:" + p) for rid, m, p in reversed(reqs)))

    server = threading.Thread(target=serve)
    server.start()
    ch = Channel(mine, "test peer", spin_us=0)
    got = {}

    def call(i):
        got[i] = ch.call("Echo", 3, struct.pack("<I", i), deadline=time.monotonic() + 10)

    callers = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(10)
    server.join(10)
    assert got == {i: b"echo:" + struct.pack("<I", i) for i in range(n)}
    ch.close()


def test_a_request_larger_than_the_socket_buffer_goes_out_whole(pair):
    mine, peer = pair
    mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    big = bytes(range(256)) * (16 * 1024)  # 4 MiB: the first send takes only part of it
    seen = []

    def serve():
        recv_exact(peer, 4)
        rid, m, p = read_request(peer)
        seen.append(p)
        peer.sendall(reply(rid, m, b"ok"))

    server = threading.Thread(target=serve)
    server.start()
    ch = Channel(mine, "test peer", spin_us=0)
    assert ch.call("Put", 1, big, deadline=time.monotonic() + 10) == b"ok"
    server.join(10)
    assert seen == [big]
    ch.close()


def test_closing_while_a_request_waits_for_room_fails_that_call(pair):
    mine, peer = pair
    mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    recv_magic = threading.Thread(target=lambda: recv_exact(peer, 4))
    recv_magic.start()
    ch = Channel(mine, "test peer", spin_us=0)
    recv_magic.join(5)
    errors = []

    def call():
        try:
            ch.call("Put", 1, b"x" * (8 << 20), deadline=time.monotonic() + 30)  # the peer never reads
        except UnavailableError as e:
            errors.append(e)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.2)  # let it fill the socket buffer and wait for room
    ch.close()
    t.join(5)
    assert not t.is_alive() and len(errors) == 1
    assert mine.fileno() == -1  # the socket was closed once the sender let go of it
    with pytest.raises(UnavailableError):
        ch.call("Ping", 0, b"", deadline=time.monotonic() + 1)
