"""Engine benchmark: vLLM (CPU build) time to first token, cold and warm, with the kvcache-store
connector. Not a test: it prints figures (one JSON line per prompt length, then a summary).

Three `vllm serve` servers share one store service (started here from dist/, as the tests do):
- N: no connector: every prompt is computed (cold, no store);
- A: the connector: serves each prompt first (a miss: computed, its blocks saved), then again
  (warm from vLLM's own prefix cache);
- B: the connector: serves each prompt after A (warm from the store: the prefix is loaded, only
  the tail is computed).
Time to first token is measured by the client: request sent to first streamed token (HTTP and
tokenization included, as a user sees it). Store bytes per second are the connector's load bytes
over the time its loads took (B's counters). The ratio cold/warm is N's median over B's.

Run: make bench-engine (or npm run bench:engine-e2e) after `npm run build`.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import tiny_model  # noqa: E402
from cluster import Master, StoreService  # noqa: E402
from vllm_server import VllmServer, parse_counters  # noqa: E402

MODELS = {
    # the tests' model: 2 layers, hidden 128
    "tiny": dict(hidden_size=128, heads=4, kv_heads=2, intermediate_size=256, layers=2),
    # a somewhat larger random model: 8 layers, hidden 512
    "small": dict(hidden_size=512, heads=8, kv_heads=4, intermediate_size=1408, layers=8),
}


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def hot(server, prompt: str) -> float:
    """TTFT of `prompt` on a server that just served a one-token request: an engine idle for a
    while takes tens of milliseconds to wake (seen here), which would land on whichever mode
    came after a pause."""
    server.first_token_seconds("w1")
    return server.first_token_seconds(prompt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="small",
                    help="small (default): the tiny model recomputes 2,000 tokens about as fast as the store path loads them")
    ap.add_argument("--prompts", type=int, default=20, help="prompts at the main length")
    ap.add_argument("--length", type=int, default=2000, help="the main prompt length (tokens)")
    ap.add_argument("--sweep", default="512,1000,3000", help="other prompt lengths, a few prompts each")
    ap.add_argument("--probe", default="256,128,64", help="shorter lengths tried, longest first, until the store path stops being faster")
    ap.add_argument("--sweep-prompts", type=int, default=5)
    args = ap.parse_args()

    lengths = [(args.length, args.prompts)] + [(int(x), args.sweep_prompts) for x in args.sweep.split(",") if x]
    lengths.sort()
    probes = [(int(x), args.sweep_prompts) for x in args.probe.split(",") if x]
    procs = []
    with tempfile.TemporaryDirectory(prefix="tiny-llama-") as model_dir, \
            tempfile.TemporaryDirectory(prefix="kvstore-shm-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as shm:
        try:
            dims = MODELS[args.model]
            tiny_model.build(model_dir, **dims)
            master = Master()
            procs.append(master)
            store = StoreService(master, shm, segment="1GB")
            procs.append(store)
            blocks = 1024
            n = VllmServer("vllm-N", model_dir, blocks=blocks)
            procs.append(n)
            a = VllmServer("vllm-A", model_dir, store=store, blocks=blocks)
            procs.append(a)
            b = VllmServer("vllm-B", model_dir, store=store, blocks=blocks)
            procs.append(b)
            for s in (n, a, b):  # the first request of a server pays one-time costs
                s.first_token_seconds(tiny_model.prompt(100, 999))
            summary = []
            seed = 0
            stopped_at = None
            for length, count in lengths + probes:
                probe = (length, count) in probes
                if probe and stopped_at is not None:
                    break
                cold, miss, local, warm = [], [], [], []
                before = parse_counters(b.metrics())
                for _ in range(count):
                    seed += 1
                    p = tiny_model.prompt(length, 10_000 + seed)
                    cold.append(hot(n, p))
                    miss.append(hot(a, p))
                    local.append(hot(a, p))
                    warm.append(hot(b, p))
                after = parse_counters(b.metrics())
                loaded = after.get("load_bytes", 0) - before.get("load_bytes", 0)
                secs = after.get("load_seconds", 0) - before.get("load_seconds", 0)
                row = {
                    "model": args.model,
                    "probe": probe,
                    "prompt_tokens": length,
                    "prompts": count,
                    "ttft_ms_cold_no_store_p50": round(statistics.median(cold) * 1e3, 1),
                    "ttft_ms_miss_and_save_p50": round(statistics.median(miss) * 1e3, 1),
                    "ttft_ms_warm_store_p50": round(statistics.median(warm) * 1e3, 1),
                    "ttft_ms_warm_store_p90": round(pct(warm, 0.9) * 1e3, 1),
                    "ttft_ms_warm_local_prefix_p50": round(statistics.median(local) * 1e3, 1),
                    "cold_over_warm_store": round(statistics.median(cold) / statistics.median(warm), 2),
                    "store_faster_every_prompt": all(w < c for w, c in zip(warm, cold)),
                    "load_mb_per_s": round(loaded / secs / 1e6, 1) if secs else None,
                    "load_ms_per_prompt": round(secs / count * 1e3, 2),
                    "loaded_bytes_per_prompt": int(loaded / count),
                }
                summary.append(row)
                print(json.dumps(row), flush=True)
                if probe and not row["store_faster_every_prompt"]:
                    stopped_at = length
            main_rows = [r for r in summary if not r["probe"]]
            slower = [r["prompt_tokens"] for r in main_rows if not r["store_faster_every_prompt"]]
            span = f"{main_rows[0]['prompt_tokens']}..{main_rows[-1]['prompt_tokens']} tokens"
            if slower:
                print(f"FAIL: the store path was not faster than recomputing at every prompt at {slower} tokens (lengths {span})")
            else:
                print(f"store path faster than recomputing at every prompt of every length tried ({span})")
            if stopped_at is not None:
                print(f"it stops being so at {stopped_at} tokens: there some prompt recomputed as fast or faster than it loaded")
            else:
                print(f"it was still faster at the shortest probe ({probes[-1][0] if probes else '-'} tokens)")
            c = parse_counters(b.metrics())
            print(json.dumps({"B_connector_counters": c}))
        finally:
            for p in reversed(procs):
                p.stop()


if __name__ == "__main__":
    main()
