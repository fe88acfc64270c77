"""Fixtures: one store_master and one store_service (real processes from dist/) for the session,
a shared directory per session, and clients that are closed after each test."""
import os
import tempfile

import pytest

from cluster import DIST, Master, StoreService

from kvcache_store import DummyClient


def pytest_configure(config):
    if not os.path.exists(os.path.join(DIST, "sidecar", "main.js")):
        raise pytest.UsageError(f"{DIST} has no built store service: run `npm run build` in the repository first")


@pytest.fixture(scope="session")
def shm_dir():
    with tempfile.TemporaryDirectory(prefix="kvstore-shm-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        yield d


@pytest.fixture(scope="session")
def master():
    m = Master()
    yield m
    m.stop()


@pytest.fixture(scope="session")
def service(master, shm_dir):
    s = StoreService(master, shm_dir)
    yield s
    s.stop()


@pytest.fixture
def make_client(service, shm_dir):
    made = []

    def make(raise_errors=False, **kw):
        c = DummyClient(raise_errors=raise_errors)
        kw.setdefault("address", service.rpc)
        kw.setdefault("shm_dir", shm_dir)
        kw.setdefault("buffer_size", 64 << 20)
        assert c.setup(**kw) == 0
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def client(make_client):
    return make_client()


@pytest.fixture
def rclient(make_client):
    """A client that raises typed errors."""
    return make_client(raise_errors=True)


@pytest.fixture
def key(request):
    """A key unique to the test."""
    return f"py-{request.node.name}-{os.getpid()}"
