"""Fixtures: one store_master and one store_service (real processes from dist/) for the session,
a shared directory per session, and clients that are closed after each test."""
import os

import pytest

from cluster_fixtures import master, pytest_configure, service, shm_dir  # noqa: F401 (fixtures and hook, found by name)

from kvcache_store import DummyClient


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
