"""The committed kvcache_store/_proto modules are what scripts/gen_proto.py makes from proto/."""
import filecmp
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)


def test_generated_modules_are_up_to_date(tmp_path):
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        pytest.skip("grpcio-tools is not installed (make test-python installs it): cannot regenerate the protobuf modules")
    subprocess.run([sys.executable, os.path.join(PKG, "scripts", "gen_proto.py"), str(tmp_path)], check=True, capture_output=True)
    for name in ("store_master_pb2.py", "store_client_pb2.py"):
        committed = os.path.join(PKG, "kvcache_store", "_proto", name)
        assert filecmp.cmp(committed, tmp_path / name, shallow=False), f"{name} is stale: run python scripts/gen_proto.py"
