"""The session fixtures both test suites share (tests/ and tests_sglang/): one store_master and one
store_service (real processes from dist/) and a shared directory per session. A conftest imports
them by name, which is how pytest finds fixtures and hooks. One cluster secret per run, named by
STORE_CLUSTER_SECRET_FILE before anything starts: every process the tests spawn (masters, store
services, vLLM and SGLang servers) and every DummyClient inherit it."""
import os
import tempfile

import pytest

from cluster import DIST, Master, StoreService, ensure_cluster_secret


def pytest_configure(config):
    if not os.path.exists(os.path.join(DIST, "sidecar", "main.js")):
        raise pytest.UsageError(f"{DIST} has no built store service: run `npm run build` in the repository first")
    ensure_cluster_secret()


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
