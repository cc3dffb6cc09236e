"""Certify transformers' speculative decoding (and its plain control) with the transformers adapter.

    OMP_NUM_THREADS=1 python benchmarks/transformers_certify.py [--factory assisted prompt_lookup plain]
        [--models toy checkpoint] [--level quick] [--scenario NAME ...] [--isolation process|none]

For each factory of ``specverify.adapters.transformers`` and each model family, runs
``specverify.certify("specverify.adapters.transformers:FACTORY", level=..., models=FAMILY, scenarios=...)`` and
prints the verdict, each scenario's N (planned N) and p-value, the calls per second (draws over the run's wall
time) and the wall time. ``models="checkpoint"`` needs the ``models`` keyword of ``certify``; where it does not
exist yet, the checkpoint family is reported as skipped. Findings: docs/findings/transformers.md.
"""

from __future__ import annotations

import argparse
import inspect
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny matrices: threads only add overhead (workers inherit this)

FACTORIES = ("assisted", "prompt_lookup", "plain")
FAMILIES = ("toy", "checkpoint")


def run_one(factory: str, family: str, level: str, scenarios, isolation: str) -> None:
    import specverify as sv

    kwargs = {"level": level, "scenarios": scenarios or None, "isolation": isolation}
    kwargs["progress"] = lambda message: print(f"   {factory}/{family} {message}", flush=True)
    if "models" in inspect.signature(sv.certify).parameters:
        kwargs["models"] = family
    elif family != "toy":
        print(f"== {factory} / {family}: skipped (certify has no `models` keyword yet)", flush=True)
        return
    name = f"specverify.adapters.transformers:{factory}"
    started = time.perf_counter()
    cert = sv.certify(name, **kwargs)
    wall = time.perf_counter() - started
    draws = sum(r.n for r in cert.scenarios)
    print(f"== {factory} / {family}: verdict {cert.verdict} ({cert.reason.splitlines()[0] if cert.reason else ''})")
    for r in cert.scenarios:
        if not r.covered:
            print(f"   {r.name:26s} not covered: {r.note}")
            continue
        p = "-" if r.pvalue is None else f"{r.pvalue:.3g}"
        status = "pass" if r.passed else "FAIL"
        extra = f" violation: {r.violation}" if r.violation else ""
        print(f"   {r.name:26s} {status} N={r.n} (planned {r.planned_n}) p={p} {r.elapsed_s:.0f}s{extra}")
    print(f"   reproducible={cert.reproducible} speculation_observed={cert.speculation_observed}")
    print(f"   {draws} draws, {draws / wall:.1f} calls/s, wall {wall:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--factory", nargs="+", default=list(FACTORIES), choices=FACTORIES)
    ap.add_argument("--models", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--isolation", default="process", choices=("process", "none"))
    args = ap.parse_args()
    for family in args.models:
        for factory in args.factory:
            run_one(factory, family, args.level, args.scenario, args.isolation)


if __name__ == "__main__":
    main()
