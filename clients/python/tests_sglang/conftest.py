"""Fixtures for the SGLang tests: a store_master and a store_service from dist/ (the processes of
../tests/cluster.py), in the venv that has SGLang (make test-sglang)."""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

from cluster import DIST, Master, StoreService  # noqa: E402


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
def store_config(service, shm_dir):
    """extra_config pointing the backend at the session's store service."""
    return {"address": service.rpc, "shm_dir": shm_dir, "interface_v1": 1, "timeout": 10}
