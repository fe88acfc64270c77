"""The cluster secret on the KVD1 channel (docs/threat-model.md; the TypeScript side is
common/cluster-secret.ts, and both must agree byte for byte).

The secret is the content of a file (trailing whitespace trimmed, at least 32 bytes) named by the
`cluster_secret_file` option or STORE_CLUSTER_SECRET_FILE. On connecting, a client with a secret
sends the magic and an empty AUTH frame (kind 3), receives the server's 32-byte nonce Ns in an AUTH
frame, answers with an AUTH frame holding its nonce Nc and HMAC-SHA256(secret, "kvstore-auth-v1
client dummy-client" + Ns + Nc), and checks the server's HMAC-SHA256(secret, "kvstore-auth-v1
server dummy-client" + Ns + Nc). A refusal (an ERROR frame) or a wrong proof raises
UnauthenticatedError; the whole exchange has a deadline.
"""
import hashlib
import hmac
import os
import socket
import time
from typing import Mapping, Optional

from .errors import InvalidParamsError, UnauthenticatedError
from .frame import HEADER, HEADER_BYTES, KIND_ERROR

SECRET_ENV = "STORE_CLUSTER_SECRET_FILE"
MIN_SECRET_BYTES = 32
KIND_AUTH = 3
NONCE_BYTES = 32
HANDSHAKE_TIMEOUT = 10.0
_PREFIX = b"kvstore-auth-v1"


def read_secret(path: str) -> bytes:
    """The secret in `path` (trailing whitespace trimmed); InvalidParamsError if unusable."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InvalidParamsError(f"cannot read the cluster secret file {path}: {e.strerror or e}") from None
    secret = raw.rstrip(b" \t\r\n")
    if len(secret) < MIN_SECRET_BYTES:
        raise InvalidParamsError(f"the cluster secret in {path} has {len(secret)} bytes; at least {MIN_SECRET_BYTES} are needed (make one with: store secret new FILE)")
    return secret


def client_secret(option: Optional[str], env: Optional[Mapping[str, str]] = None) -> Optional[bytes]:
    """The option's file, else STORE_CLUSTER_SECRET_FILE's, else None (unauthenticated)."""
    env = os.environ if env is None else env
    path = option or env.get(SECRET_ENV, "")
    return read_secret(path) if path else None


def proof(secret: bytes, side: str, interface: str, ns: bytes, nc: bytes) -> bytes:
    return hmac.new(secret, _PREFIX + f" {side} {interface}".encode() + ns + nc, hashlib.sha256).digest()


def _frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload), 0, 0, kind, 0) + payload


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    out = bytearray()
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise UnauthenticatedError(f"authentication handshake not completed within {HANDSHAKE_TIMEOUT:.0f} s")
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(out))
        except socket.timeout:
            continue
        if not chunk:
            raise UnauthenticatedError("the store service closed the connection during the authentication handshake")
        out += chunk
    return bytes(out)


def _read_frame(sock: socket.socket, deadline: float):
    length, _rid, _method, kind, _ = HEADER.unpack(_recv_exact(sock, HEADER_BYTES, deadline))
    if length > 4096:
        raise UnauthenticatedError(f"authentication handshake: a frame of {length} bytes")
    return kind, _recv_exact(sock, length, deadline)


def client_handshake(sock: socket.socket, secret: bytes, interface: str, magic: bytes, timeout: float = HANDSHAKE_TIMEOUT) -> None:
    """Runs the client side on a connected blocking socket; raises UnauthenticatedError."""
    deadline = time.monotonic() + timeout
    try:
        sock.sendall(magic + _frame(KIND_AUTH, b""))
        kind, ns = _read_frame(sock, deadline)
        if kind == KIND_ERROR:
            raise UnauthenticatedError(f"{interface} server does not authenticate (it runs with --allow_unauthenticated?): {ns.decode('utf-8', 'replace')}")
        if kind != KIND_AUTH or len(ns) != NONCE_BYTES:
            raise UnauthenticatedError(f"{interface} server sent no authentication challenge")
        nc = os.urandom(NONCE_BYTES)
        sock.sendall(_frame(KIND_AUTH, nc + proof(secret, "client", interface, ns, nc)))
        kind, answer = _read_frame(sock, deadline)
        if kind == KIND_ERROR:
            raise UnauthenticatedError(f"{interface} server refused: {answer.decode('utf-8', 'replace')}")
        if kind != KIND_AUTH or not hmac.compare_digest(answer, proof(secret, "server", interface, ns, nc)):
            raise UnauthenticatedError(f"{interface} server failed to prove the cluster secret (a different secret?)")
    except OSError as e:
        raise UnauthenticatedError(f"{interface} authentication handshake failed: {e}") from None
