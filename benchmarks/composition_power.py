"""Power of batch composition's small-call tests at their planned N, by simulation (docs/design.md, *Batch
composition*).

    python benchmarks/composition_power.py [--trials 400] [--seed 0] [--models toy]

For each level it takes the ``small`` and ``alone`` plans of ``checks.composition`` on the family's
batch-composition scenario and simulates the decision those tests take (the battery at the scenario's α share,
rejected at the lowest Holm level α / m, i.e. the rejection a lone failing test needs) on multinomial draws from:

- the exact law (the false-alarm rate: it must print 0 at α 1e-6);
- the flat tilt at the planned TV (the worst case of the planning model: the plan promises power ≥ 0.9);
- the nearby law of ``tests/certification/composition_decoders.py`` (TV ≈ 0.04, the blind spot), in calls of one
  and two requests (``small``), and the same defect at batch size one only (``small`` sees a third of it);
- the plan's noncentral-χ² prediction for the flat tilt beside the simulated rate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.certification.composition_decoders

from specverify.certification import checks  # noqa: E402
from specverify.certification.checks.composition import composition_plan, small_call_shape  # noqa: E402
from specverify.certification.matrix.laws import law_of  # noqa: E402
from specverify.certification.matrix.scenarios import matrix  # noqa: E402
from specverify.certification.run.context import BATTERY_SIZE, AlphaPlan  # noqa: E402
from specverify.enums import Level  # noqa: E402
from specverify.oracles.law import exact_law  # noqa: E402
from specverify.oracles.models import draft_near  # noqa: E402
from specverify.stats import detectable_tv, goodness_of_fit  # noqa: E402
from specverify.stats.gof import pooled_cells  # noqa: E402
from specverify.stats.targeted import max_cell_test, surprisal_test  # noqa: E402


def flat_tilt(probs: np.ndarray, epsilon: float) -> np.ndarray:
    """The planning model's worst case: mass ε moved from one half of the law (by mass) to the other, pro rata."""
    order = np.argsort(-probs)
    first = order[np.cumsum(probs[order]) <= 0.5 + 1e-12]
    if first.size == 0:
        first = order[:1]
    up = np.zeros(probs.size, dtype=bool)
    up[first] = True
    mass_up = probs[up].sum()
    tilted = np.where(up, probs * (1 + epsilon / mass_up), probs * (1 - epsilon / (1 - mass_up)))
    return tilted / tilted.sum()


def aligned(law, other) -> np.ndarray:
    """``other``'s probabilities on ``law``'s outcomes (both laws of one shape; no mass outside the support)."""
    vec = np.array([other.prob(o) for o in law.outcomes])
    return vec / vec.sum()


def rejects(counts: np.ndarray, probs: np.ndarray, level: float) -> bool:
    pvalues = (
        goodness_of_fit(counts, probs).pvalue,
        surprisal_test(counts, probs).pvalue,
        max_cell_test(counts, probs).pvalue,
    )
    return BATTERY_SIZE * min(pvalues) <= level


def rate(rng, probs, alt, n, level, trials) -> float:
    return float(np.mean([rejects(rng.multinomial(n, alt), probs, level) for _ in range(trials)]))


def predicted(probs, epsilon, n, plan) -> float:
    """The plan's model: ncχ²(df, 4 n ε²) beyond the χ²(df) quantile at the test's level (without the safety)."""
    df = int(pooled_cells(probs, n).max())
    critical = sps.chi2.isf(plan.alpha_test, df)
    return float(sps.ncx2.sf(critical, df, 4 * n * epsilon**2))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="toy")
    parser.add_argument("--alpha", type=float, default=1e-6)
    args = parser.parse_args(argv)
    from tests.certification.composition_decoders import DISTANCE

    family = matrix(args.models)
    m = checks.num_tests(family)
    scenario = family["batch-composition"]
    shape = small_call_shape(scenario)
    law = law_of(shape)
    nearby = aligned(law, exact_law(draft_near(scenario.models().target, distance=DISTANCE, seed=991), shape.prompt,
                                    shape.params))  # fmt: skip
    tv_nearby = 0.5 * np.abs(nearby - law.probs).sum()
    bs1_only = (law.probs * 2 + nearby) / 3  # a third of the small-call draws are made at batch size one
    rng = np.random.default_rng(args.seed)
    print(f"{args.models} batch-composition: small-call shape max_tokens={shape.params.max_tokens} "
          f"γ={shape.num_draft_tokens}, {len(law)} outcomes; m = {m} tests, α = {args.alpha:g}; "
          f"nearby law TV {tv_nearby:.4f}; {args.trials} trials per cell")  # fmt: skip
    header = ("level", "test", "N", "plan TV", "detect", "null", "tilt (model)", "tilt (sim)", "nearby", "bs-1 only")
    print(("{:<9} {:<6} {:>6} {:>7} {:>7} {:>6} {:>12} {:>10} {:>7} {:>9}").format(*header))
    for level in Level:
        plan = AlphaPlan(args.alpha, level.epsilon, 0.9, m)
        sizes = composition_plan(plan, scenario)
        holm_floor = args.alpha / m
        for test in ("small", "alone"):
            n = sizes[test]
            eps = sizes["small_epsilon"]
            detect = float(detectable_tv(law.probs, n, alpha=plan.alpha_test, power=plan.power))
            tilt = flat_tilt(law.probs, detect)
            cells = [
                rate(rng, law.probs, law.probs, n, holm_floor, args.trials),
                predicted(law.probs, detect, n, plan),
                rate(rng, law.probs, tilt, n, holm_floor, args.trials),
                rate(rng, law.probs, nearby, n, holm_floor, args.trials),
                rate(rng, law.probs, bs1_only if test == "small" else nearby, n, holm_floor, args.trials),
            ]
            print(("{:<9} {:<6} {:>6} {:>7.3f} {:>7.4f} {:>6.3f} {:>12.3f} {:>10.3f} {:>7.3f} {:>9.3f}").format(
                str(level), test, n, eps, detect, *cells))  # fmt: skip


if __name__ == "__main__":
    main()
