"""Certify transformers' speculative decoding (and its plain control) with the transformers adapter.

    OMP_NUM_THREADS=1 python benchmarks/transformers_certify.py [--factory assisted prompt_lookup plain]
        [--models toy checkpoint] [--level quick] [--scenario NAME ...] [--isolation process|none]
        [--sequential] [--json-dir DIR]

For each factory of ``specverify.adapters.transformers`` and each model family, runs
``specverify.certify("specverify.adapters.transformers:FACTORY", level=..., models=FAMILY, scenarios=...)`` and
prints the verdict, each scenario's N (planned N) and p-value, the calls per second (draws over the run's wall
time) and the wall time. ``--sequential`` stops each scenario at its first decisive look (DESIGN rule 4);
``--json-dir`` writes each certificate as ``FACTORY-FAMILY.json`` (``specverify report`` renders it).
Findings: docs/findings/transformers.md.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny matrices: threads only add overhead (workers inherit this)

from _engine_report import print_certificate, write_certificate  # noqa: E402 -- benchmarks/, this folder

FACTORIES = ("assisted", "prompt_lookup", "plain")
FAMILIES = ("toy", "checkpoint")


def run_one(factory: str, family: str, level: str, scenarios, isolation: str, sequential: bool, json_dir) -> None:
    import specverify as sv

    kwargs = {"level": level, "scenarios": scenarios or None, "isolation": isolation, "sequential": sequential}
    kwargs["progress"] = lambda message: print(f"   {factory}/{family} {message}", flush=True)
    kwargs["models"] = family
    name = f"specverify.adapters.transformers:{factory}"
    started = time.perf_counter()
    cert = sv.certify(name, **kwargs)
    wall = time.perf_counter() - started
    print_certificate(f"{factory} / {family}", cert, wall)
    write_certificate(cert, json_dir, f"{factory}-{family}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--factory", nargs="+", default=list(FACTORIES), choices=FACTORIES)
    ap.add_argument("--models", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--isolation", default="process", choices=("process", "none"))
    ap.add_argument("--sequential", action="store_true")
    ap.add_argument("--json-dir", default=None)
    args = ap.parse_args()
    for family in args.models:
        for factory in args.factory:
            run_one(factory, family, args.level, args.scenario, args.isolation, args.sequential, args.json_dir)


if __name__ == "__main__":
    main()
