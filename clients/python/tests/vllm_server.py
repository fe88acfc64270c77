"""A vLLM OpenAI server (`vllm serve`, CPU build) as a real child process for the engine tests and
the engine benchmark: started on a free port with the tiny local model, optionally with the
kvcache-store connector, awaited by its startup line; greedy completions, time to first token
(streamed) and its Prometheus counters over HTTP."""
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Tuple

from cluster import Proc, free_port

READY = re.compile(r"Application startup complete")
CONNECTOR = {"kv_connector": "KVCacheStoreConnector", "kv_connector_module_path": "kvcache_store.vllm_connector", "kv_role": "kv_both"}


def offline_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                # the KV cache size in GiB: without it vLLM CPU wants 92% of the free memory
                "VLLM_CPU_KVCACHE_SPACE": "1"})
    env.update(extra or {})
    return env


class VllmServer(Proc):
    def __init__(self, name: str, model: str, *, store=None, connector_extra: Optional[dict] = None, blocks: int = 512,
                 block_size: int = 32, max_len: int = 4096, prefix_caching: bool = True, startup_timeout: float = 300.0,
                 extra_args: Optional[List[str]] = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model = model
        # `vllm serve` of vllm-cpu 0.32.0 fails at start (it asks for the metadata of a package
        # named "vllm"); the server module is the same server.
        args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1", "--port", str(self.port),
                "--dtype", "float32", "--block-size", str(block_size), "--num-gpu-blocks-override", str(blocks),
                "--max-model-len", str(max_len), "--enforce-eager", "--max-num-seqs", "4", "--seed", "0"]
        if not prefix_caching:
            args.append("--no-enable-prefix-caching")
        env = {}
        if store is not None:
            cfg = dict(CONNECTOR, kv_connector_extra_config=dict(connector_extra or {}))
            args += ["--kv-transfer-config", json.dumps(cfg)]
            env = {"STORE_SIDECAR_ADDRESS": store.rpc, "STORE_SHM_DIR": store.shm_dir}
        super().__init__(name, args + (extra_args or []), env=offline_env(env))
        self.wait_for(READY, timeout=startup_timeout)
        self._wait_serving(time.monotonic() + startup_timeout)

    def _wait_serving(self, deadline: float) -> None:
        """Until the HTTP port answers: uvicorn prints its startup line before it listens, and a
        request sent in between is refused (CI saw that: "connection refused", the server alive).
        The socket has no event to await from here, so /health is asked again until it answers."""
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError, OSError) as e:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.url}: the server exited with {self.proc.returncode}; its last output:\n{self.output()[-4000:]}") from e
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.url}: not answering after its startup line ({e})") from e
                time.sleep(0.1)

    # ------------------------------------------------------------------ HTTP

    def _post(self, path: str, body: dict, timeout: float):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            return urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.URLError as e:
            # a server that stopped answering: what it printed last says why
            tail = self.output()[-4000:]
            exited = self.proc.poll()
            raise RuntimeError(f"{path} on {self.url} failed ({e}); the server {'exited with ' + str(exited) if exited is not None else 'is still running'}; its last output:\n{tail}") from e

    def complete(self, prompt: str, max_tokens: int = 8, timeout: float = 120.0) -> List[int]:
        """Greedy completion: the generated token ids."""
        with self._post("/v1/completions", {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                            "ignore_eos": True, "return_token_ids": True}, timeout) as r:
            out = json.loads(r.read())
        return list(out["choices"][0]["token_ids"])

    def first_token_seconds(self, prompt: str, timeout: float = 120.0) -> float:
        """Time to first token: from sending the request to the first streamed token."""
        t0 = time.perf_counter()
        with self._post("/v1/completions", {"model": self.model, "prompt": prompt, "max_tokens": 1, "temperature": 0,
                                            "ignore_eos": True, "stream": True}, timeout) as r:
            for line in r:
                if line.startswith(b"data: ") and b'"text"' in line:
                    t = time.perf_counter() - t0
                    r.read()
                    return t
        raise RuntimeError(f"{self.name}: the stream ended without a token")

    def metrics(self, timeout: float = 10.0) -> Dict[str, float]:
        """The server's Prometheus samples, summed over labels: {name: value}."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=timeout) as r:
            text = r.read().decode()
        out: Dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"([^\s{]+)(\{[^}]*\})?\s+(\S+)", line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
        return out

    def wait_metric(self, name: str, at_least: float, timeout: float = 30.0) -> float:
        """Polls /metrics until `name` reaches `at_least` (vLLM publishes stats after the step
        that made them); returns its value, or raises with the last one."""
        end = time.monotonic() + timeout
        v = 0.0
        while True:
            v = self.metrics().get(name, 0.0)
            if v >= at_least or time.monotonic() > end:
                break
            time.sleep(0.2)  # polling an HTTP endpoint: no event to wait on
        if v < at_least:
            raise AssertionError(f"{self.name}: {name} = {v} after {timeout} s, expected >= {at_least}")
        return v


def parse_counters(metrics: Dict[str, float], prefix: str = "vllm:kvcache_store_") -> Dict[str, float]:
    return {k[len(prefix):-len("_total")]: v for k, v in metrics.items() if k.startswith(prefix) and k.endswith("_total")}


def store_metric(http: str, name: str, labels: Tuple[str, ...] = ()) -> float:
    """A store service counter from its /metrics (summed over the samples whose label text
    contains every string in `labels`)."""
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(s in line for s in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total
