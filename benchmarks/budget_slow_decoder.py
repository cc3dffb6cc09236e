"""A slow exact decoder under a wall-clock budget: what ``certify(..., budget_s=)`` delivers, fixed and sequential.

    python benchmarks/budget_slow_decoder.py [--seconds-per-outcome 5e-3] [--budget 120] [--level quick]

Certifies ``tests.certification.bad_decoders:Slow`` (the exact vectorized reference, sleeping
``--seconds-per-outcome`` per outcome of ``sample``) in this process (``isolation="none"``: the subclass below is
defined here, so no worker has to import it), once with the fixed plan and once with ``sequential=True``, and prints
the wall time, the verdict and, per scenario, the N drawn, the planned N and the TV that N can detect. Only
``sample`` sleeps: greedy, collision and mixed-batch scenarios go through ``__call__`` at full speed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.certification

from specverify import certify  # noqa: E402
from specverify.certification.run.budget import PILOT_DRAWS  # noqa: E402
from tests.certification.bad_decoders import Slow  # noqa: E402


def slow_factory(seconds_per_outcome: float):
    """A factory of exact decoders that cost ``seconds_per_outcome`` per sampled outcome."""

    class SlowDecoder(Slow):
        SECONDS_PER_OUTCOME = seconds_per_outcome

    def factory(target, draft):
        return SlowDecoder(target, draft)

    factory.__name__ = f"slow_{seconds_per_outcome:g}s"
    return factory


def run(seconds_per_outcome: float, budget: float, level: str, seed: int, sequential: bool) -> None:
    started = time.perf_counter()
    cert = certify(
        slow_factory(seconds_per_outcome),
        level=level,
        seed=seed,
        isolation="none",
        budget_s=budget,
        sequential=sequential,
    )
    wall = time.perf_counter() - started
    mode = "sequential" if sequential else "fixed plan"
    print(f"\n{mode}: wall {wall:.1f} s (budget {budget:g} s), verdict {cert.verdict}")
    print(f"  reason: {cert.reason}")
    print(f"  {'scenario':34s} {'kind':11s} {'N':>8s} {'planned N':>10s} {'detect TV':>10s}  note")
    skipped = [r for r in cert.scenarios if not r.covered and r.n == 0]
    for r in cert.scenarios:
        if r in skipped:
            continue
        tv = f"{r.detectable_tv:.3f}" if r.detectable_tv is not None else "-"
        print(f"  {r.name:34s} {str(r.kind):11s} {r.n:8d} {r.planned_n:10d} {tv:>10s}  {r.note[:60]}")
    if skipped:
        names = ", ".join(r.name for r in skipped)
        print(f"  not run ({len(skipped)}): {names}")
    drawn = sum(r.n for r in cert.scenarios if str(r.kind) == "sampling")
    sleep = (drawn + PILOT_DRAWS) * seconds_per_outcome
    print(f"  sampled N {drawn} (+ {PILOT_DRAWS} pilot): {sleep:.1f} s of decoder sleep (only `sample` sleeps)")


def main(argv: list | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds-per-outcome", type=float, default=5e-3, help="decoder cost per outcome (default 5e-3)")
    ap.add_argument("--budget", type=float, default=120.0, help="wall-clock budget in seconds (default 120)")
    ap.add_argument("--level", default="quick", help="certification level (default quick)")
    ap.add_argument("--seed", type=int, default=0, help="certification seed (default 0)")
    ap.add_argument("--modes", nargs="*", default=["fixed", "sequential"], choices=["fixed", "sequential"])
    args = ap.parse_args(argv)
    cost, budget = args.seconds_per_outcome, args.budget
    print(f"Slow exact decoder: {cost:g} s per outcome, level {args.level}, budget {budget:g} s")
    for mode in args.modes:
        run(cost, budget, args.level, args.seed, sequential=mode == "sequential")


if __name__ == "__main__":
    main()
