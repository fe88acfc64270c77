"""Generates kvcache_store/_proto/*_pb2.py from the repository's proto/ files with grpcio-tools.

The generated modules are committed; tests/test_proto_generated.py regenerates them into a
temporary directory and compares. grpcio-tools is pinned (its bundled protoc fixes the gencode
version, which is the lower bound of the package's protobuf dependency):

    pip install grpcio-tools==1.66.2
    python scripts/gen_proto.py            # writes kvcache_store/_proto/
    python scripts/gen_proto.py OUT_DIR    # writes elsewhere

Two deterministic edits, both because of protoc's rules rather than the project's:
- protoc rejects proto/store_master.proto as it is (protobufjs accepts it): enum values are
  scoped to the package, and BufStatus and ReplicaStatus both define COMPLETE and FAILED. protoc
  is given a copy in which BufStatus's values carry the prefix BUF_STATUS_ (numbers unchanged, so
  the wire format is the same). Drop this step once the proto itself prefixes them.
- protoc writes `import store_master_pb2` for the import between the two files; that line is
  rewritten to a relative import so the modules live inside the package.
"""
import os
import re
import sys
import tempfile
from importlib import metadata

GRPCIO_TOOLS_VERSION = "1.66.2"
PROTOS = ("store_master.proto", "store_client.proto")

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
PROTO_DIR = os.path.normpath(os.path.join(PACKAGE_ROOT, "..", "..", "proto"))
DEFAULT_OUT = os.path.join(PACKAGE_ROOT, "kvcache_store", "_proto")


def _prefix_enum_values(text: str, enum: str, prefix: str) -> str:
    """Prefixes every value name inside `enum <enum> { ... }`."""

    def edit(m):
        body = re.sub(r"^(\s*)([A-Z][A-Z0-9_]*)(\s*=)", lambda v: v.group(1) + prefix + v.group(2) + v.group(3), m.group(2), flags=re.M)
        return m.group(1) + body + "}"

    return re.sub(r"(enum\s+" + enum + r"\s*\{)([^}]*)\}", edit, text)


def generate(out_dir: str) -> list:
    """Writes the modules into out_dir; returns their paths."""
    installed = metadata.version("grpcio-tools")
    if installed != GRPCIO_TOOLS_VERSION:
        raise SystemExit(f"gen_proto: grpcio-tools {GRPCIO_TOOLS_VERSION} is required (installed: {installed})")
    from grpc_tools import protoc

    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as src:
        for p in PROTOS:
            with open(os.path.join(PROTO_DIR, p), encoding="utf-8") as f:
                text = f.read()
            with open(os.path.join(src, p), "w", encoding="utf-8") as f:
                f.write(_prefix_enum_values(text, "BufStatus", "BUF_STATUS_"))
        args = ["protoc", f"-I{src}", f"--python_out={out_dir}"] + [os.path.join(src, p) for p in PROTOS]
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
