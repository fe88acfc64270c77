"""Finding and opening the real client (store_service, usually the injected sidecar).

The address comes from setup() or the environment the webhook sets: STORE_SIDECAR_ADDRESS
(host:port of the real client's service) and STORE_SHM_DIR (the shared directory, default
/dev/shm). The real client also listens on the Unix socket <shm_dir>/kvstore-<port>.sock: when
that file exists it is used (same pod or host: the fast path), else TCP.
"""
import os
import re
import socket
import time
from typing import Mapping, NamedTuple, Optional

from .errors import InvalidParamsError, UnavailableError

DEFAULT_SHM_DIR = "/dev/shm"


class Endpoint(NamedTuple):
    address: str  # host:port ('' when only a socket path was given)
    socket_path: str  # '' when none
    shm_dir: str

    def describe(self) -> str:
        return self.socket_path if self.socket_path and os.path.exists(self.socket_path) else self.address


def resolve_endpoint(
    address: Optional[str] = None,
    socket_path: Optional[str] = None,
    shm_dir: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Endpoint:
    env = os.environ if env is None else env
    address = address if address is not None else env.get("STORE_SIDECAR_ADDRESS", "")
    shm_dir = shm_dir or env.get("STORE_SHM_DIR") or DEFAULT_SHM_DIR
    if address:
        split_host_port(address)  # validates
    port = re.search(r":(\d+)$", address or "")
    if socket_path is None:
        socket_path = os.path.join(shm_dir, f"kvstore-{port.group(1)}.sock") if port else ""
    if not address and not socket_path:
        raise InvalidParamsError("DummyClient: no real client address (set STORE_SIDECAR_ADDRESS=host:port or pass address= / socket_path=)")
    return Endpoint(address or "", socket_path, shm_dir)


def split_host_port(address: str):
    m = re.match(r"^\[?([^\]]*?)\]?:(\d+)$", address.strip())
    if not m or not m.group(1) or int(m.group(2)) > 65535:
        raise InvalidParamsError(f"DummyClient: invalid real client address {address!r}: expected host:port")
    return m.group(1), int(m.group(2))


def open_socket(ep: Endpoint, deadline: float) -> socket.socket:
    """A connected socket to the real client: the Unix socket when it exists, else TCP."""
    timeout = max(0.05, min(5.0, deadline - time.monotonic()))
    if ep.socket_path and os.path.exists(ep.socket_path):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = ep.socket_path
    elif ep.address:
        host, port = split_host_port(ep.address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        target = (host, port)
    else:
        raise UnavailableError(f"the real client's socket {ep.socket_path} does not exist (is store_service running with --shm_dir={ep.shm_dir}?)")
    s.settimeout(timeout)
    try:
        s.connect(target)
    except OSError as e:
        s.close()
        raise UnavailableError(f"cannot connect to the real client at {target}: {e}") from None
    return s
