"""Real processes for the tests: a store_master and store_service processes from the repository's
built dist/ (run `npm run build` first), on free ports, each awaited by its ready line. They are
authenticated: ensure_cluster_secret() names one secret in this process's environment, which the
processes and the DummyClients made here inherit."""
import atexit
import os
import re
import secrets
import shutil
import tempfile
import signal
import socket
import subprocess
import threading
from typing import List, Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DIST = os.path.join(REPO, "dist")
NODE = shutil.which("node") or "node"

MASTER_READY = re.compile(r"store_master listening: rpc=(\S+) metrics=(\S+) metadata=(\S+)")
SERVICE_READY = re.compile(r"store_service ready: http=(\S+) te_endpoint=(\S+) segments=(\S+) client_id=(\S+) rpc=(\S+) socket=(\S+)")


def ensure_cluster_secret() -> str:
    """STORE_CLUSTER_SECRET_FILE, else a new secret in a temp dir (removed at exit) named there."""
    path = os.environ.get("STORE_CLUSTER_SECRET_FILE", "")
    if path or os.environ.get("STORE_ALLOW_UNAUTHENTICATED") == "1":
        return path
    d = tempfile.mkdtemp(prefix="kvstore-test-secret-")
    atexit.register(shutil.rmtree, d, True)
    path = os.path.join(d, "cluster-secret")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.environ["STORE_CLUSTER_SECRET_FILE"] = path
    return path


#: a uid of no one, for tests that run a process as another user (under setpriv)
STRANGER_UID = 100_000 + os.getpid() % 800_000


def cannot_switch_uid() -> str:
    """'' when a process can be run as STRANGER_UID, else what that needs (for a skip reason)."""
    if os.getuid() != 0:
        return "the test runs as root (it runs a process as another uid)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is installed"
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process whose output is collected by a thread; `wait_for` blocks on a pattern."""

    def __init__(self, name: str, args: List[str], env=None):
        self.name = name
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        self.pid = self.proc.pid
        self._out: List[str] = []
        self._cond = threading.Condition()
        self._ended = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for raw in self.proc.stdout:
            with self._cond:
                self._out.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def output(self) -> str:
        with self._cond:
            return "".join(self._out)

    def wait_for(self, pattern: re.Pattern, timeout: float = 60.0) -> re.Match:
        with self._cond:
            ok = self._cond.wait_for(lambda: pattern.search("".join(self._out)) or self._ended, timeout)
            m = pattern.search("".join(self._out))
        if not m:
            self.kill()
            raise RuntimeError(f"{self.name} did not print {pattern.pattern} ({'exited' if ok else 'timed out'}): {self.output()[-2000:]}")
        return m

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Master(Proc):
    def __init__(self, extra: Optional[List[str]] = None):
        ensure_cluster_secret()
        super().__init__(
            "store_master",
            [
                NODE,
                os.path.join(DIST, "master/main.js"),
                "--rpc_port=0",
                "--metrics_port=0",
                "--rpc_address=127.0.0.1",
                "--enable_http_metadata_server=true",
                "--http_metadata_server_host=127.0.0.1",
                "--http_metadata_server_port=0",
                "--enable_metric_reporting=false",
                # reads hold a lease this long: longer than a large read on a busy machine (a read that outlives its lease fails with LeaseExpiredError), short enough for the tests to see leases end
                "--default_kv_lease_ttl=2000ms",
            ]
            + (extra or []),
        )
        m = self.wait_for(MASTER_READY)
        self.rpc, self.metrics, self.metadata = m.group(1), m.group(2), m.group(3)


class StoreService(Proc):
    def __init__(self, master: Master, shm_dir: str, rpc_port: int = 0, segment: str = "256MB", extra: Optional[List[str]] = None, env=None):
        self._master = master
        super().__init__(
            "store_service",
            [
                NODE,
                os.path.join(DIST, "sidecar/main.js"),
                "--host=127.0.0.1",
                "--port=0",
                f"--rpc_port={rpc_port}",
                "--local_hostname=127.0.0.1",
                f"--master_server={master.rpc}",
                f"--metadata_server={master.metadata}",
                f"--global_segment_size={segment}",
                "--local_buffer_size=64MB",
                f"--shm_dir={shm_dir}",
            ]
            + (extra or []),
            env=env,
        )
        m = self.wait_for(SERVICE_READY)
        self.http, self.endpoint, self.segments, self.client_id, self.rpc, self.socket = m.groups()
        self.shm_dir = shm_dir

    @property
    def segment(self) -> str:
        """The name of its (first) segment."""
        return self.segments.split(",")[0].split("(")[0]

    def dummy_calls(self) -> int:
        """Requests it received from dummy clients so far (its /segments report)."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://{self.http}/segments", timeout=10) as r:
            return json.loads(r.read())["dummy_clients"]["calls"]

    def maps(self) -> str:
        with open(f"/proc/{self.pid}/maps") as f:
            return f.read()
