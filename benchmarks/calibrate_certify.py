"""End-to-end calibration: how often does `certify` fail the exact reference decoder?

    python benchmarks/calibrate_certify.py --seeds 200 [--level quick] [--alpha 0.05]

Runs the full scenario matrix (greedy scenarios left out: they are deterministic and cannot false-alarm on an
exact decoder) at family α for each seed, in-process, and prints the false-fail rate with a Clopper–Pearson 95 %
interval, which scenarios failed, and the wall time per certification. A calibrated certifier fails at most α.
"""

from __future__ import annotations

import argparse
import collections
import time

from scipy.stats import beta

from specverify.certification import SCENARIOS, certify
from specverify.reference import make_decoder


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple:
    lo = 0.0 if k == 0 else beta.ppf((1 - level) / 2, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(1 - (1 - level) / 2, k + 1, n - k)
    return lo, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    names = [n for n, s in SCENARIOS.items() if s.kind != "greedy"]
    fails, by_scenario, times = 0, collections.Counter(), []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        start = time.perf_counter()
        cert = certify(make_decoder, level=args.level, seed=seed, alpha=args.alpha, scenarios=names, isolation="none")
        times.append(time.perf_counter() - start)
        if cert.verdict != "inconclusive" and cert.verdict != "exact":
            fails += 1
            by_scenario.update(s.name for s in cert.failures)
            print(f"seed {seed}: {cert.verdict} — {cert.reason.splitlines()[0]}", flush=True)
    lo, hi = clopper_pearson(fails, args.seeds)
    print(
        f"level {args.level}, family α {args.alpha}: {fails}/{args.seeds} certifications of the exact reference "
        f"failed = {fails / args.seeds:.3f} (95 % CI [{lo:.3f}, {hi:.3f}]); calibrated if ≤ α = {args.alpha}"
    )
    print(f"failures by scenario: {dict(by_scenario) or 'none'}")
    print(f"wall time per certification: median {sorted(times)[len(times) // 2]:.1f} s, max {max(times):.1f} s")


if __name__ == "__main__":
    main()
