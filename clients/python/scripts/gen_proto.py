"""Generates kvcache_store/_proto/*_pb2.py from the repository's proto/ files with grpcio-tools.

The generated modules are committed; tests/test_proto_generated.py regenerates them into a
temporary directory and compares. grpcio-tools is pinned (its bundled protoc fixes the gencode
version, which is the lower bound of the package's protobuf dependency):

    pip install grpcio-tools==1.66.2
    python scripts/gen_proto.py            # writes kvcache_store/_proto/
    python scripts/gen_proto.py OUT_DIR    # writes elsewhere

One deterministic edit: protoc writes `import store_master_pb2` for the import between the two
files; that line is rewritten to a relative import so the modules live inside the package.
"""
import os
import re
import sys
from importlib import metadata

GRPCIO_TOOLS_VERSION = "1.66.2"
PROTOS = ("store_master.proto", "store_client.proto")

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
PROTO_DIR = os.path.normpath(os.path.join(PACKAGE_ROOT, "..", "..", "proto"))
DEFAULT_OUT = os.path.join(PACKAGE_ROOT, "kvcache_store", "_proto")


def generate(out_dir: str) -> list:
    """Writes the modules into out_dir; returns their paths."""
    installed = metadata.version("grpcio-tools")
    if installed != GRPCIO_TOOLS_VERSION:
        raise SystemExit(f"gen_proto: grpcio-tools {GRPCIO_TOOLS_VERSION} is required (installed: {installed})")
    from grpc_tools import protoc

    os.makedirs(out_dir, exist_ok=True)
    args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}"] + [os.path.join(PROTO_DIR, p) for p in PROTOS]
    if protoc.main(args) != 0:
        raise SystemExit("gen_proto: protoc failed")
    paths = []
    for p in PROTOS:
        path = os.path.join(out_dir, p.replace(".proto", "_pb2.py"))
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"^import (\w+_pb2) as ", r"from . import \1 as ", text, flags=re.M)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in generate(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT):
        print(written)
