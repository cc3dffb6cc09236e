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
    draws = sum(r.n for r in cert.scenarios if r.covered and r.n)
    print(f"== {factory}: verdict {cert.verdict} ({cert.reason.splitlines()[0] if cert.reason else ''})")
    for r in cert.scenarios:
        if not r.covered:
            print(f"   {r.name:26s} not covered: {r.note}")
            continue
        p = "-" if r.pvalue is None else f"{r.pvalue:.3g}"
        status = {True: "pass", False: "FAIL", None: "-"}[r.passed]
        extra = f" violation: {r.violation}" if r.violation else ""
        tv = f" TV~{r.tv_estimate:.3f}" if getattr(r, "tv_estimate", None) is not None else ""
        print(f"   {r.name:26s} {status} N={r.n} (planned {r.planned_n}) p={p}{tv} {r.elapsed_s:.0f}s{extra}")
    print(f"   reproducible={cert.reproducible} ({cert.reproducibility_note}) speculation={cert.speculation_observed}")
    rate = draws / wall
    print(f"   engine start {start_s:.1f} s; {draws} draws, {rate:.0f} samples/s, wall {wall:.0f} s", flush=True)
    if json_dir:
        from specverify.report import render_json

        os.makedirs(json_dir, exist_ok=True)
        with open(os.path.join(json_dir, f"{factory}.json"), "w") as fh:
            fh.write(render_json(cert))


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
