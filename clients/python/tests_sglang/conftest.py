"""Fixtures for the SGLang tests: a store_master and a store_service from dist/ (the processes of
../tests/cluster.py), in the venv that has SGLang (make test-sglang)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

from cluster_fixtures import master, pytest_configure, service, shm_dir  # noqa: E402,F401 (fixtures and hook, found by name)


@pytest.fixture
def store_config(service, shm_dir):
    """extra_config pointing the backend at the session's store service."""
    return {"address": service.rpc, "shm_dir": shm_dir, "interface_v1": 1, "timeout": 10}
