"""How many draws another spending of the sequential design's pass looks would save (issue 44's floor).

The standard level's cost on an engine is its draws: on vLLM, 600,000 or more of a run's draws are single sampling
scenarios at about 2,000 draws/s. Those scenarios mostly stop at an early pass, so what they cost is the design's
mean N on exact draws. This script asks whether another design at the same guarantee (α over every look, power 0.9
at pooled TV ε) would stop sooner. Per flat law of ``benchmarks/sequential_decisions.py``, at the standard level's
per-test α and ε = 0.02, it simulates each variant of ``plan_sequential``'s knobs (pass looks, the share of α and β
kept for the last look) and prints the largest N and the mean N on exact draws (both / the fixed plan's N), and the
power on the planning model's worst case, the flat tilt at TV ε. The certifier's p-value floor is applied, as there.

    PYTHONPATH=. python benchmarks/sequential_spending.py               # 600 runs per cell (77 s at --reps 2000)
    PYTHONPATH=. python benchmarks/sequential_spending.py --reps 100    # a smoke run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sequential_decisions import flat_tilt, make_laws, simulate  # noqa: E402

from specverify.stats import plan_sequential  # noqa: E402

EPSILON = 0.02  # the standard level
ALPHA = 3.0e-8 / 5  # per test: family 1e-6 over the toy matrix's 33 scenarios, then the battery's 5 tests
VARIANTS = {
    "default (10 pass looks, half kept for the last)": {},
    "20 pass looks": {"looks": 20},
    "30% kept for the last look": {"final_share": 0.3},
    "20 pass looks, 30% kept": {"looks": 20, "final_share": 0.3},
    "5 pass looks": {"looks": 5},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=600, help="simulated runs per cell (default 600)")
    parser.add_argument("--seed", type=int, default=44, help="seed of the simulation (default 44)")
    args = parser.parse_args()
    if args.reps < 10:
        parser.error(f"--reps={args.reps!r} must be at least 10 (a rate needs runs); e.g. --reps 600")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"epsilon {EPSILON}, per-test alpha {ALPHA:.2g}, power 0.9, {args.reps} runs per cell")
    print(f"{'law':22} {'design':48} {'max N/fixed':>11} {'mean N exact/fixed':>18} {'power flat tilt':>15}")
    for name, law in make_laws().items():
        for label, knobs in VARIANTS.items():
            plan = plan_sequential(law, EPSILON, alpha=ALPHA, **knobs)
            stop, _ = simulate(plan, law, args.reps, rng)
            tilted = flat_tilt(law, plan.cells[-1], EPSILON, rng)
            _, rejected = simulate(plan, tilted, args.reps, rng)
            print(
                f"{name:22} {label:48} {plan.max_n / plan.fixed_n:11.3f} {stop.mean() / plan.fixed_n:18.3f} "
                f"{rejected.mean():15.3f}"
            )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
