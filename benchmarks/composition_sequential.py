"""Batch composition's small-call tests, fixed plan (before) against sequential looks (after), by simulation: power
and calls on the decoders the scenario exists to catch, at equal α (docs/design.md, *Batch composition*).

    PYTHONPATH=. python benchmarks/composition_sequential.py [--trials 200] [--seed 0] [--levels quick standard]

For each level it takes the ``small`` and ``alone`` plans of ``checks.composition`` on the toy batch-composition
scenario and simulates, on independent draws of the small-call shape S (the law of a call of one, the law of a call
of two), the decision of each test:

- *fixed* (the plan before): ``A`` calls of one and ``A`` of two, the battery (``stats.battery``, the five tests
  ``judge`` runs) on all ``3A`` draws (``small``) and on the ``A`` draws of the calls of one (``alone``);
- *sequential* (after): ``checks.composition.small_looks``, the code the certifier runs, with calls simulated.

A test rejects when its scenario p-value (5 × the battery's smallest, or 5 × the design's any-time p-value) is at
most the lowest Holm level α / m (the rejection a lone failing test needs), or when an outcome of probability 0
is drawn. Printed: the rejection rate of either test (``any``), of ``small`` and of ``alone``, and the mean calls (of
one plus of two). Decoders: the exact law; the flat tilt at ``small``'s planned TV in every small call; the nearby
law of ``tests/certification/composition_decoders.py`` (TV ≈ 0.04) in calls of one and two, and in calls of one
only; the zoo's ``batch_path_numerics`` (calls of two sample its nearby target law); and the zoo's
``rng_keyed_by_batch_position`` (every call of one replays one outcome, every call of two one pair of outcomes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.certification.composition_decoders
sys.path.insert(0, str(Path(__file__).resolve().parent))  # composition_power, also when loaded by file path

from composition_power import aligned, flat_tilt  # noqa: E402 -- benchmarks/, the script's folder

from specverify.certification import checks  # noqa: E402
from specverify.certification.checks.composition import composition_plan, small_call_shape, small_looks  # noqa: E402
from specverify.certification.checks.judge import law_directions  # noqa: E402
from specverify.certification.matrix.laws import law_of  # noqa: E402
from specverify.certification.matrix.scenarios import matrix  # noqa: E402
from specverify.certification.run.context import BATTERY_SIZE, AlphaPlan  # noqa: E402
from specverify.enums import Level  # noqa: E402
from specverify.oracles.law import exact_law  # noqa: E402
from specverify.oracles.models import draft_near  # noqa: E402
from specverify.stats import battery  # noqa: E402


class Decoder:
    """A simulated decoder of S: ``one(rng, k)`` outcome indices of k calls of one, ``two(rng, k)`` of k calls of
    two (flattened)."""

    def __init__(self, alone, pairs, replay=False):
        self.alone, self.pairs, self.replay = alone, pairs, replay

    def one(self, rng, k):
        if self.replay:  # every call of one is batch index 0: one draw, replayed
            return np.full(k, self.fixed[0])
        return rng.choice(self.alone.size, size=k, p=self.alone)

    def two(self, rng, k):
        if self.replay:
            return np.tile(self.fixed, k)
        return rng.choice(self.pairs.size, size=2 * k, p=self.pairs)

    def start(self, rng):
        self.fixed = rng.choice(self.alone.size, size=2, p=self.alone)


def fixed_trial(rng, decoder, law, plan, calls, seed, level) -> tuple:
    alone, pairs = decoder.one(rng, calls), decoder.two(rng, calls)
    out = {}
    for member, idx in (("small", np.concatenate([alone, pairs])), ("alone", alone)):
        out[member] = _rejects(np.bincount(idx, minlength=len(law)), law, plan, seed, level)
    return out, 2 * calls


def _rejects(vec, law, plan, seed, level) -> bool:
    bat = battery(vec, law.probs, alpha=plan.alpha_scenario, seed=seed, directions=law_directions(law))
    return BATTERY_SIZE * bat.pvalue_min <= level


def sequential_trial(rng, decoder, law, plan, sizes, level) -> tuple:
    made = {"alone": [], "pairs": []}

    def more(alone: int, pairs: int):
        if alone > len(made["alone"]):
            made["alone"] += [law.outcomes[i] for i in decoder.one(rng, alone - len(made["alone"]))]
        if pairs > len(made["pairs"]) // 2:
            made["pairs"] += [law.outcomes[i] for i in decoder.two(rng, pairs - len(made["pairs"]) // 2)]
        return made["alone"], made["pairs"]

    decisions = small_looks(law, plan, sizes, more)
    out = {}
    for member, (n, decision, _) in decisions.items():  # no decision: an impossible outcome stopped it (rejected)
        out[member] = decision is None or BATTERY_SIZE * decision.pvalue <= level or decision.status == "reject"
    return out, len(made["alone"]) + len(made["pairs"]) // 2


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=1e-6)
    parser.add_argument("--levels", nargs="+", default=["quick", "standard"])
    args = parser.parse_args(argv)
    from tests.certification.composition_decoders import DISTANCE

    family = matrix("toy")
    m = checks.num_tests(family)
    scenario = family["batch-composition"]
    shape = small_call_shape(scenario)
    law = law_of(shape)
    target = scenario.models().target

    def near(distance) -> np.ndarray:
        return aligned(law, exact_law(draft_near(target, distance=distance, seed=991), shape.prompt, shape.params))

    nearby, numerics = near(DISTANCE), near(0.5)
    exact = law.probs
    print(f"toy batch-composition: S has {len(law)} outcomes; m = {m}, α = {args.alpha:g}, Holm floor α/m; "
          f"nearby TV {0.5 * np.abs(nearby - exact).sum():.4f}, batch_path_numerics TV "
          f"{0.5 * np.abs(numerics - exact).sum():.4f}; {args.trials} trials per cell")  # fmt: skip
    print(f"{'level':9s} {'decoder':26s} {'plan':10s} {'any':>6s} {'small':>6s} {'alone':>6s} {'calls':>8s}")
    rng = np.random.default_rng(args.seed)
    for level_name in args.levels:
        level = Level(level_name)
        plan = AlphaPlan(args.alpha, level.epsilon, 0.9, m)
        sizes = composition_plan(plan, scenario)
        decoders = {
            "exact": Decoder(exact, exact),
            "flat tilt at small's TV": Decoder(*(2 * (flat_tilt(exact, sizes["small_epsilon"]),))),
            "nearby in calls of 1 & 2": Decoder(nearby, nearby),
            "nearby in calls of 1 only": Decoder(nearby, exact),
            "zoo batch_path_numerics": Decoder(exact, numerics),
            "zoo rng_keyed_by_batch_pos": Decoder(exact, exact, replay=True),
        }
        for name, decoder in decoders.items():
            for how in ("fixed", "sequential"):
                hits, calls = {"any": 0, "small": 0, "alone": 0}, 0
                for t in range(args.trials):
                    decoder.start(rng)
                    if how == "fixed":
                        out, c = fixed_trial(rng, decoder, law, plan, sizes["calls_alone"], t, args.alpha / m)
                    else:
                        out, c = sequential_trial(rng, decoder, law, plan, sizes, args.alpha / m)
                    calls += c
                    hits["any"] += out["small"] or out["alone"]
                    hits["small"] += out["small"]
                    hits["alone"] += out["alone"]
                rates = [hits[k] / args.trials for k in ("any", "small", "alone")]
                print(f"{level_name:9s} {name:26s} {how:10s} " + " ".join(f"{r:6.3f}" for r in rates)
                      + f" {calls / args.trials:8.0f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
