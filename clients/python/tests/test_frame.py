"""The KVD1 framing (pure): frames reassembled from any chunking, oversize frames refused."""
import pytest

from kvcache_store.frame import HEADER, KIND_RESPONSE, FrameError, FrameReader, encode_request


def frame(kind, rid, method, payload):
    return HEADER.pack(len(payload), rid, method, kind, 0) + payload


def feed(reader, data):
    space = reader.space()
    space[: len(data)] = data
    reader.advance(len(data))


def test_request_layout_matches_the_documented_example():
    # docs/master-channel.md: GetReplicaList{key:"k"} as request id 7, method 5
    assert encode_request(7, 5, b"\x0a\x01k").hex() == "03000000" "07000000" "0500" "00" "00" "0a016b"


def test_frames_fed_one_byte_at_a_time():
    stream = frame(KIND_RESPONSE, 1, 13, b"abc") + frame(KIND_RESPONSE, 2, 7, b"") + frame(2, 3, 99, b"x" * 70000)
    r = FrameReader(capacity=16)
    got = []
    for i in range(len(stream)):
        feed(r, stream[i:i + 1])
        while True:
            f = r.next_frame()
            if f is None:
                break
            got.append(f)
    assert got == [(KIND_RESPONSE, 1, 13, b"abc"), (KIND_RESPONSE, 2, 7, b""), (2, 3, 99, b"x" * 70000)]
    assert r.buffered == 0


def test_many_frames_in_one_chunk():
    stream = b"".join(frame(KIND_RESPONSE, i, 0, bytes([i]) * i) for i in range(1, 50))
    r = FrameReader(capacity=64)
    at = 0
    while at < len(stream):
        space = r.space()
        n = min(len(space), len(stream) - at)
        space[:n] = stream[at:at + n]
        r.advance(n)
        at += n
    out = []
    while (f := r.next_frame()) is not None:
        out.append(f)
    assert [f[1] for f in out] == list(range(1, 50))
    assert all(f[3] == bytes([f[1]]) * f[1] for f in out)


def test_an_oversize_frame_is_refused():
    r = FrameReader(max_payload=1000)
    feed(r, HEADER.pack(1001, 1, 0, KIND_RESPONSE, 0))
    with pytest.raises(FrameError, match="exceeds"):
        r.next_frame()
