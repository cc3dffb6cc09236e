"""Certify vLLM's speculative decoding (and its plain control) on the checkpoint family with the vLLM adapter.

    .venv-vllm/bin/python benchmarks/vllm_certify.py [--factory draft_model ngram draft_model_greedy plain]
        [--level quick] [--scenario NAME ...] [--isolation none|process] [--timeout 600] [--sequential]
        [--json-dir DIR]

Run from the vLLM venv (see docs/findings/vllm.md). For each factory of ``specverify.adapters.vllm``: the engine
start of one decoder (measured apart, then closed), then ``specverify.certify("specverify.adapters.vllm:FACTORY",
level=..., models="checkpoint", isolation=...)``, printing the verdict, each scenario's N (planned N), p-value and
seconds, samples per second (draws over the run's wall time) and the wall time. Factories run one after another.
``--sequential`` stops each scenario at its first decisive look; ``--json-dir`` writes each certificate as
``FACTORY.json``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine runs in this process (or the worker)
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

from _engine_report import print_certificate, write_certificate  # noqa: E402 -- benchmarks/, this folder

FACTORIES = ("draft_model", "ngram", "draft_model_greedy", "plain")


def engine_start(factory: str) -> float:
    """Seconds to make one decoder (one engine) on the main checkpoint pair; the engine is shut down after."""
    from specverify.adapters import vllm as adapter
    from specverify.certification.matrix_checkpoint import CHECKPOINT_PAIRS

    pair = CHECKPOINT_PAIRS["main"].build()
    started = time.perf_counter()
    decoder = getattr(adapter, factory)(pair.target, pair.draft)
    seconds = time.perf_counter() - started
    decoder.close()
    return seconds


def run_one(
    factory: str, level: str, scenarios, isolation: str, timeout_s: float, sequential=False, json_dir=None
) -> None:
    import specverify as sv
    from specverify.adapters import vllm as adapter

    start_s = engine_start(factory)
    stamp = time.perf_counter()
    kwargs = dict(level=level, scenarios=scenarios or None, isolation=isolation, models="checkpoint")
    kwargs["sequential"] = sequential
    kwargs["progress"] = lambda m: print(f"   {factory} {m} (+{time.perf_counter() - stamp:.0f} s)", flush=True)
    started = time.perf_counter()
    cert = sv.certify(f"specverify.adapters.vllm:{factory}", timeout_s=timeout_s, **kwargs)
    wall = time.perf_counter() - started
    adapter.close_all()
    print_certificate(factory, cert, wall, setup=f"engine start {start_s:.1f} s")
    write_certificate(cert, json_dir, factory)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--factory", nargs="+", default=list(FACTORIES), choices=FACTORIES)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--isolation", default="none", choices=("process", "none"))
    ap.add_argument("--timeout", type=float, default=600.0, help="per-call limit with --isolation process")
    ap.add_argument("--sequential", action="store_true")
    ap.add_argument("--json-dir", default=None)
    args = ap.parse_args()
    for factory in args.factory:
        run_one(factory, args.level, args.scenario, args.isolation, args.timeout, args.sequential, args.json_dir)


if __name__ == "__main__":
    main()
