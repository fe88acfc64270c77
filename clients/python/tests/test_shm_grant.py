"""The pure-Python grant client of the engine's same-host shm transport (kvcache_store/shm_grant.py)
against a real transfer engine: a node process serving a memfd region filled with a pattern
(native/test-fixtures/region-server.mjs, the engine tests' own peer), driven by JSON lines."""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import pytest

from cluster import NODE, REPO, STRANGER_UID, cannot_switch_uid
from kvcache_store.errors import UnauthenticatedError
from kvcache_store.shm_grant import ShmPeer, ShmRefused

SERVER = os.path.join(REPO, "native", "test-fixtures", "region-server.mjs")
PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20


def run_secret() -> bytes:
    with open(os.environ["STORE_CLUSTER_SECRET_FILE"], "rb") as f:
        return f.read().rstrip(b" \t\r\n")


class RegionServer:
    """A transfer engine in a node process serving `size` bytes of memfd memory."""

    def __init__(self, size: int = 4 * MiB, secret: bytes = None):
        options = {"shmTransport": True}
        if secret is not None:
            options["authSecretHex"] = secret.hex()
        self.proc = subprocess.Popen([NODE, SERVER, str(size), "7", json.dumps(options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        info = self._line()
        self.endpoint, self.address, self.size, self.incarnation = info["endpoint"], info["address"], info["size"], info["incarnation"]

    def _line(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("region server exited")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._line()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def servers():
    made = []

    def make(**kw):
        s = RegionServer(**kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


@pytest.fixture
def peers():
    made = []

    def make(endpoint, secret):
        p = ShmPeer(endpoint, secret)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def test_a_grant_maps_the_served_region_read_only_and_shares_its_pages(servers, peers):
    s = servers(secret=run_secret())
    peer = peers(s.endpoint, run_secret())
    g = peer.grant(s.address + 4096, 8192)
    assert (g.start, g.length, g.incarnation) == (s.address, s.size, s.incarnation)
    assert hashlib.sha256(g.view[4096:12288]).hexdigest() == s.ask(cmd="sha256", offset=4096, length=8192)["sha256"]
    assert g.view.readonly
    with pytest.raises(TypeError):
        g.view[0] = 1
    s.ask(cmd="fill", offset=5000, length=10, byte=0xAB)  # the engine's own write: seen here at once
    assert bytes(g.view[5000:5010]) == b"\xab" * 10
    assert peer.grant(s.address, 1) is g  # one grant per served region, cached


def test_a_range_outside_served_memory_is_refused(servers, peers):
    s = servers(secret=run_secret())
    peer = peers(s.endpoint, run_secret())
    with pytest.raises(ShmRefused, match="outside its served regions"):
        peer.grant(s.address + s.size - 10, 20)
    assert peer.grant(s.address, 10).length == s.size  # the connection goes on


def test_a_grant_expires_when_the_engine_unregisters_its_region(servers, peers):
    s = servers(secret=run_secret())
    peer = peers(s.endpoint, run_secret())
    g = peer.grant(s.address, 4096)
    assert peer.find(s.address, 4096) is g
    assert s.ask(cmd="unregister") == {"ok": True, "registered": True}
    assert peer.generation() != g.generation
    assert peer.find(s.address, 4096) is None
    with pytest.raises(ShmRefused, match="outside its served regions"):
        peer.grant(s.address, 4096)
    incarnation = s.ask(cmd="register")["incarnation"]
    again = peer.grant(s.address, 4096)
    assert again is not g and again.incarnation == incarnation != g.incarnation


def test_the_cluster_secret_must_match(servers, peers):
    s = servers(secret=run_secret())
    with pytest.raises(UnauthenticatedError, match="secret differs"):
        ShmPeer(s.endpoint, b"another secret, 32 bytes or more!!")
    no_secret = peers(s.endpoint, None)
    with pytest.raises(UnauthenticatedError, match="requires the cluster secret"):
        no_secret.grant(s.address, 4096)
    open_engine = servers(secret=None)
    with pytest.raises(UnauthenticatedError, match="runs without the cluster secret"):
        ShmPeer(open_engine.endpoint, run_secret())
    assert peers(open_engine.endpoint, None).grant(open_engine.address, 1).length == open_engine.size


def test_no_engine_there_and_an_engine_that_dies(servers, peers):
    with pytest.raises(ShmRefused, match="no same-host control socket"):
        ShmPeer("127.0.0.1:1", None)
    s = servers(secret=run_secret())
    peer = peers(s.endpoint, run_secret())
    g = peer.grant(s.address, 4096)
    s.stop()
    peer._watcher.join(10)  # the watcher ends at the control socket's hang-up
    assert not peer.alive
    assert len(bytes(g.view[:4])) == 4  # the mapping stays valid (no crash); it is only not trusted any more


@pytest.mark.skipif(bool(cannot_switch_uid()), reason=f"needs {cannot_switch_uid()}")
def test_a_reader_of_another_uid_gets_no_fd(servers):
    s = servers(secret=run_secret())
    code = (
        "import sys; from kvcache_store.shm_grant import ShmPeer, ShmRefused\n"
        "p = ShmPeer(sys.argv[1], bytes.fromhex(sys.argv[2]))\n"
        "try:\n    p.grant(int(sys.argv[3]), 4096); print('granted')\n"
        "except ShmRefused as e:\n    print('refused:', e)\n"
    )
    with tempfile.TemporaryDirectory() as home:
        os.chmod(home, 0o777)
        out = subprocess.run(
            ["setpriv", f"--reuid={STRANGER_UID}", f"--regid={STRANGER_UID}", "--clear-groups", sys.executable, "-c", code, s.endpoint, run_secret().hex(), str(s.address)],
            env={**os.environ, "PYTHONPATH": PKG, "HOME": home},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.stdout.startswith("refused:"), out.stdout + out.stderr
    assert "not shareable" in out.stdout
    assert s.ask(cmd="stats")["shmPeersRefused"] == 1
