"""Power per draw: the smallest TV each battery detects with power 0.9 at equal N, before and after the prefix tests.

    python benchmarks/power_per_draw.py [--reps 120] [--draws 200000] [--quick]

At the standard level's fixed plan N of each law (the toy matrix's per-scenario α, 1e-6 / m with m the matrix's
sampling tests), two batteries decide on the same multinomial draws:

* omnibus — the pooled Cressie–Read test alone at α_scenario / 3: what the default look rule decided on before
  (the other tests were evidence only under sequential looks), at its fixed N;
* before — omnibus (pooled Cressie–Read), surprisal, max-cell, each at α_scenario / 3 (the fixed plan's battery);
* after — the same three and the two prefix score tests (token, rank), each at α_scenario / 5.

The smallest TV detected with power ≥ 0.9 is found by bisection on the TV (``--reps`` draws of N per step, the same
seeds before and after). Rows:

* zoo mechanisms — every greedy-only entry of ``specverify.zoo`` on its showcases, on the single-request sample
  path: its law is estimated from ``--draws`` draws (rows whose estimated TV is under 0.03, the estimate's noise,
  are left out: the bug is not on that path) and mixed with the exact law, ``(1 - t) p + t q``, scaled to each TV;
* bug shapes of ``benchmarks/sequential_decisions.py`` (mixture, temperature, sparse move, flat tilt) on its three
  flat laws (no prefix structure: one position) and on two toy showcase laws (a token tree).

The ratio column is ``(tv_after / tv_before)²``: the fraction of the draws the after battery needs for the TV the
before battery detects at N (the noncentral χ² model's N ∝ 1 / TV²), i.e. what the gain is worth in draws.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats

from specverify.stats import battery_directions, plan_sample_size, pooled_cells
from specverify.stats.gof import _power_divergence
from specverify.stats.prefix import RANK_TOL

POWER, EPSILON, FAMILY_ALPHA = 0.9, 0.02, 1e-6


class Battery:
    """Both batteries' smallest p-value, vectorised over draws of one N (the same tests as ``stats.battery``)."""

    def __init__(self, p, n, outcomes):
        self.p, self.n = p, n
        cells = pooled_cells(p, n)
        self.onehot = np.zeros((p.size, int(cells.max()) + 1))
        self.onehot[np.arange(p.size), cells] = 1.0
        self.df = self.onehot.shape[1] - 1
        surprisal = -np.log(p)
        self.entropy = float(p @ surprisal)
        self.surprisal = surprisal
        self.surprisal_sd = math.sqrt(float(p @ (surprisal - self.entropy) ** 2) / n)
        self.flat = np.ptp(surprisal) <= 1e-9  # a uniform law: the surprisal is constant, its test gives p = 1
        self.prefix = []
        for d in battery_directions(outcomes, p).values():
            values, vectors = np.linalg.eigh(d.T @ (d * p[:, None]))
            keep = values > RANK_TOL * max(float(values.max(initial=0.0)), 1e-300)
            if keep.any():
                self.prefix.append((d @ vectors[:, keep] / np.sqrt(values[keep]), int(keep.sum())))

    def pvalues(self, counts) -> tuple:  # int [R, K] -> (omnibus [R], before [R], after [R]) smallest p-values
        expected = self.n * (self.p @ self.onehot)
        omnibus = stats.chi2.sf(_power_divergence(counts @ self.onehot, expected, 2 / 3), self.df)
        if self.flat:
            surprisal = np.ones(counts.shape[0])
        else:
            z = (counts @ self.surprisal / self.n - self.entropy) / self.surprisal_sd
            surprisal = np.minimum(1.0, 2 * stats.norm.sf(np.abs(z)))
        cell = np.minimum(
            1.0, 2 * np.minimum(stats.binom.cdf(counts, self.n, self.p), stats.binom.sf(counts - 1, self.n, self.p))
        )
        max_cell = np.minimum(1.0, self.p.size * cell.min(axis=1))
        before = np.minimum(np.minimum(omnibus, surprisal), max_cell)
        after = before
        for projection, df in self.prefix:
            after = np.minimum(after, stats.chi2.sf(np.sum((counts @ projection) ** 2, axis=1) / self.n, df))
        return omnibus, before, after


def power_at(p, direction, tv, n, alpha, tests, reps, seed) -> tuple:
    """(power of the omnibus alone, before, after) of the alternative ``p + tv * direction`` (TV 1 per unit)."""
    q = np.clip(p + tv * direction, 0, None)
    q /= q.sum()
    counts = np.random.default_rng(seed).multinomial(n, q, size=reps)
    omnibus, before, after = tests.pvalues(counts)
    return tuple(
        float(np.mean(p <= level)) for p, level in ((omnibus, alpha / 3), (before, alpha / 3), (after, alpha / 5))
    )


def smallest_tv(p, direction, n, alpha, tests, reps, seed, top) -> tuple:
    """Bisection (8 steps on log TV) for each battery's smallest TV with power ≥ 0.9, capped at ``top``."""
    out, memo = [], {}

    def power(tv):  # the three powers at one TV, computed once (the same draws for every battery)
        if tv not in memo:
            memo[tv] = power_at(p, direction, tv, n, alpha, tests, reps, seed)
        return memo[tv]

    for which in (0, 1, 2):
        low, high = 1e-3, top
        if power(high)[which] < POWER:
            out.append(math.inf)
            continue
        for _ in range(8):
            mid = math.sqrt(low * high)
            if power(mid)[which] >= POWER:
                high = mid
            else:
                low = mid
        out.append(high)
    return tuple(out)


def zoo_rows(draws, seed):
    """(label, law, direction per unit TV, outcomes) of each zoo mechanism on its showcases."""
    import torch

    from specverify.enums import Verdict
    from specverify.oracles import exact_law
    from specverify.zoo import SHOWCASES, ZOO

    torch.set_num_threads(1)
    for name, entry in ZOO.items():
        if entry.verdict != Verdict.GREEDY_ONLY:
            continue
        for showcase_name in entry.showcases:
            showcase = SHOWCASES[showcase_name]
            target, draft = showcase.models()
            law = exact_law(target, showcase.prompt, showcase.params)
            try:
                decoder = entry.factory(target, draft, entropy=seed)
                outcomes = decoder.sample(showcase.request(seed=seed + 1), draws).outcomes
            except Exception as error:  # a batch-only entry refuses the single-request path
                print(f"# {name} on {showcase_name}: not on the sample path ({type(error).__name__})", flush=True)
                continue
            vec, impossible = law.align(outcomes)
            if impossible:  # an impossible outcome rejects at once, outside α: the law-level rows compare the rest
                print(f"# {name} on {showcase_name}: {sum(c for _, c in impossible)} impossible outcomes", flush=True)
            delta = vec / vec.sum() - law.probs
            tv = 0.5 * float(np.abs(delta).sum())
            if tv < 0.03:
                continue
            yield f"{name} / {showcase_name}", law.probs, delta / tv, law.outcomes


def shape_rows(seed):
    import benchmarks.sequential_decisions as sd
    from specverify.oracles import exact_law
    from specverify.zoo import SHOWCASES

    laws = {k: (v, [((i,), "length") for i in range(v.size)]) for k, v in sd.make_laws().items()}
    for name in ("plain", "eos_in_block"):
        showcase = SHOWCASES[name]
        law = exact_law(showcase.models()[0], showcase.prompt, showcase.params)
        laws[f"toy {name} K={len(law)}"] = (law.probs, law.outcomes)
    rng = np.random.default_rng(seed)
    for law_name, (p, outcomes) in laws.items():
        cells = pooled_cells(p, 20_000)
        for shape_name, shape in sd.SHAPES.items():
            q = shape(p, cells, 0.05, rng)
            if q is None:
                continue
            delta = q - p
            yield f"{shape_name} on {law_name}", p, delta / (0.5 * np.abs(delta).sum()), outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=120)
    ap.add_argument("--draws", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="30 reps, 50,000 draws, bug shapes and 6 zoo rows")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.draws = 30, 50_000
    from specverify.certification.checks.alpha import planned_tests

    alpha = FAMILY_ALPHA / planned_tests("toy")
    print(f"standard level: TV {EPSILON}, power {POWER}, α per scenario {alpha:.3g} (family {FAMILY_ALPHA:g}); "
          f"{args.reps} draws of N per bisection step")  # fmt: skip
    columns = ("omnibus", "TV before", "TV after")
    print(f"{'row':58s} {'K':>5s} {'N':>7s} " + " ".join(f"{c:>9s}" for c in columns) + " draws after/before")
    started = time.perf_counter()
    rows = list(shape_rows(args.seed))
    zoo = zoo_rows(args.draws, args.seed)
    rows += [r for _, r in zip(range(6), zoo)] if args.quick else list(zoo)
    ratios = []
    for label, p, direction, outcomes in rows:
        n = plan_sample_size(p, EPSILON, alpha=alpha / 3)  # the before plan's N: equal N for both
        tests = Battery(p, n, outcomes)
        omnibus, before, after = smallest_tv(p, direction, n, alpha, tests, args.reps, args.seed, top=0.5)
        ratio = (after / before) ** 2 if math.isfinite(before) and math.isfinite(after) else math.nan
        ratios.append(ratio)
        print(
            f"{label[:58]:58s} {p.size:5d} {n:7d} {omnibus:9.4f} {before:9.4f} {after:9.4f} {ratio:18.2f}", flush=True
        )
    finite = [r for r in ratios if math.isfinite(r)]
    print(f"rows {len(rows)}; draws after/before: median {np.median(finite):.2f}, max {max(finite):.2f}, "
          f"min {min(finite):.2f}; {time.perf_counter() - started:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
