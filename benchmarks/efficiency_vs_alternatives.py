"""Samples needed to catch each inexact zoo decoder: specverify's battery against the tests engines and papers use.

    python benchmarks/efficiency_vs_alternatives.py [--reps 20] [--entries NAME ...] [--max-n 512000] [--jobs 1]

For every zoo entry whose verdict is not ``exact`` (on its first showcase; entries whose law on that seeded
showcase is exact, ``tv is None``, are listed and skipped: no law test sees them; ``--entries`` runs any entry,
e.g. ``reference`` as a null check), each replication draws outcomes through ``decoder.sample`` with its own seeded
requests, nested along the doubling grid 500, 1000, ..., ``--max-n``
(the sample at 2n extends the one at n). "n needed" is the smallest grid n at which a test rejects in at least 90 %
of the replications. Every test runs at the certifier's per-scenario share of the family α = 1e-6, i.e.
α_s = 1e-6 / m with m the number of sampling tests of the toy matrix (printed); the battery splits α_s over its three
tests, the marginal test over positions. The methods:

  specverify  ``specverify.stats.battery`` (pooled Cressie–Read, surprisal, max-cell at α_s / 3 each), plus the
              certifier's rule that an outcome of exact probability 0 fails outright;
  tv>0.05     the fixed plug-in TV threshold engines quote: reject when ½ Σ |f - p| > 0.05 (mass on p = 0 counts);
  tv-cal      plug-in TV above a threshold valid at α_s: its simulated null mean (200 multinomial samples) plus the
              McDiarmid margin sqrt(log(1/α_s) / 2n) (one draw moves the plug-in by at most 1/n);
  dkwm        KS on the exact law's enumeration order of outcomes, rejecting when sup |F_n - F| exceeds the DKWM
              bound sqrt(log(2/α_s) / 2n);
  first-tok   pooled Pearson χ² on the first token's law only (what engines' rejection-sampler tests check);
  marginals   pooled Pearson χ² on each position's token marginal (plus "ended" as a category), Bonferroni over
              positions;
  pearson     unpooled Pearson χ² over all K outcomes at the nominal α_s (miscalibrated at small α: its χ² tail is
              far too thin with cells of expected count < 1).

The two uncalibrated rules (tv>0.05, pearson) also reject the exact law at small n, so their count only starts at the
grid points where they rejected none of 200 multinomial samples from the exact law; the footer prints their
false-alarm rate on the exact law at n = 500. "never": no rejection in any replication at any (counted) grid n;
">MAX": some rejections but under 90 % at every n. Ratios are method n / specverify n (">"-prefixed when the method
never reached 90 %).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from specverify.enums import Verdict
from specverify.oracles import exact_law
from specverify.stats import battery, goodness_of_fit
from specverify.zoo import SHOWCASES, ZOO

METHODS = ("specverify", "tv>0.05", "tv-cal", "dkwm", "first-tok", "marginals", "pearson")
UNCALIBRATED = ("tv>0.05", "pearson")
FAMILY_ALPHA = 1e-6
POWER = 0.9
NULL_SIMS = 200
TV_THRESHOLD = 0.05


def certifier_num_tests() -> int:
    """m of the certifier's α budget: the number of sampling tests in the toy matrix."""
    from specverify.certification.checks.alpha import planned_tests

    return planned_tests("toy")


def doubling_grid(start: int, stop: int) -> list:
    grid, n = [], start
    while n <= stop:
        grid.append(n)
        n *= 2
    return grid


@dataclass
class LawTables:
    """The exact law with what the marginal tests need: categories per position (token id, or V for "ended")."""

    law: object
    vocab_size: int
    positions: int
    categories: np.ndarray  # int64 [P, K]
    marginals: np.ndarray  # float [P, V + 1]

    @classmethod
    def build(cls, law) -> LawTables:
        size = law.vocab.size
        positions = max(len(tokens) for tokens, _ in law.outcomes)
        cats = np.array([category_row(tokens, positions, size) for tokens, _ in law.outcomes]).T  # [P, K]
        marginals = np.stack([np.bincount(row, weights=law.probs, minlength=size + 1) for row in cats])
        return cls(law, size, positions, cats, marginals)


def category_row(tokens: tuple, positions: int, size: int) -> list:
    return [tokens[i] if i < len(tokens) else size for i in range(positions)]


def marginal_counts(tables: LawTables, vec: np.ndarray, impossible: list) -> np.ndarray:
    """Observed [P', V + 1] position-token counts (P' ≥ P when an impossible outcome is longer than any possible)."""
    longest = max([tables.positions] + [len(tokens) for (tokens, _), _ in impossible])
    out = np.zeros((longest, tables.vocab_size + 1))
    for i in range(tables.positions):
        out[i] = np.bincount(tables.categories[i], weights=vec, minlength=tables.vocab_size + 1)
    out[tables.positions :, tables.vocab_size] = vec.sum()
    for (tokens, _), count in impossible:
        for i, cat in enumerate(category_row(tokens, longest, tables.vocab_size)):
            out[i, cat] += count
    return out


def pooled_pearson_rejects(observed: np.ndarray, expected: np.ndarray, level: float) -> bool:
    """Pooled Pearson χ² on one marginal; a category of exact probability 0 that is observed rejects outright."""
    support = expected > 0
    if observed[~support].sum() > 0:
        return True
    if support.sum() < 2:
        return False
    result = goodness_of_fit(observed[support].astype(np.int64), expected[support], method="pearson")
    return bool(result.pvalue <= level)


def unpooled_pearson(counts: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Unpooled Pearson statistic per row of counts [B, K] against probs [K]."""
    n = counts.sum(axis=-1, keepdims=True)
    return np.sum((counts - n * probs) ** 2 / (n * probs), axis=-1)


def plug_in_tv(counts: np.ndarray, probs: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """½ Σ |f - p| per row, counts [B, K], with ``zero`` [B] draws on outcomes of probability 0."""
    n = counts.sum(axis=-1) + zero
    return 0.5 * (np.abs(counts / n[:, None] - probs).sum(axis=-1) + zero / n)


@dataclass
class NullFigures:
    """Per grid n: the calibrated TV threshold and the exact-law rejection rates of the two uncalibrated rules."""

    tv_threshold: float
    false_alarms: dict


def null_figures(probs: np.ndarray, n: int, alpha: float, rng: np.random.Generator) -> NullFigures:
    draws = rng.multinomial(n, probs, size=NULL_SIMS)  # [S, K]
    tv = plug_in_tv(draws, probs, np.zeros(NULL_SIMS))
    pearson_p = stats.chi2.sf(unpooled_pearson(draws, probs), probs.size - 1)
    rates = {"tv>0.05": float(np.mean(tv > TV_THRESHOLD)), "pearson": float(np.mean(pearson_p <= alpha))}
    return NullFigures(float(tv.mean()) + math.sqrt(math.log(1 / alpha) / (2 * n)), rates)


def rejections(tables: LawTables, outcomes: Counter, alpha: float, null: NullFigures, seed: int) -> dict:
    """Which methods reject one replication's cumulative ``outcomes`` (all tests at per-scenario level ``alpha``)."""
    law = tables.law
    vec, impossible = law.align(outcomes)
    zero = sum(c for _, c in impossible)
    n = int(vec.sum()) + zero
    tv = float(plug_in_tv(vec[None, :], law.probs, np.array([zero]))[0])
    out = {"tv>0.05": tv > TV_THRESHOLD, "tv-cal": tv > null.tv_threshold}
    out["specverify"] = bool(zero) or (vec.sum() > 0 and not battery(vec, law.probs, alpha=alpha, seed=seed).passed)
    gap = np.abs(np.cumsum(vec) / n - np.cumsum(law.probs)).max()
    out["dkwm"] = bool(gap > math.sqrt(math.log(2 / alpha) / (2 * n)))
    observed = marginal_counts(tables, vec, impossible)
    expected = np.zeros_like(observed)
    expected[: tables.positions] = tables.marginals
    expected[tables.positions :, tables.vocab_size] = 1.0
    out["first-tok"] = pooled_pearson_rejects(observed[0], expected[0], alpha)
    out["marginals"] = any(pooled_pearson_rejects(o, e, alpha / len(observed)) for o, e in zip(observed, expected))
    pearson_p = stats.chi2.sf(unpooled_pearson(vec[None, :].astype(float), law.probs)[0], len(law) - 1)
    out["pearson"] = bool(zero) or bool(pearson_p <= alpha)
    return out


def request_seed(seed: int, entry: str, rep: int, step: int) -> int:
    key = [seed, rep, step, *entry.encode()]
    return int(np.random.SeedSequence(key).generate_state(1)[0])


def measure(job: tuple) -> dict:
    """Samples needed per method for one entry: {"entry", "showcase", "needed", "max_rate", "null500"}."""
    name, reps, grid, alpha, seed = job
    torch.set_num_threads(1)
    entry = ZOO[name]
    showcase = SHOWCASES[entry.showcases[0]]
    target, draft = showcase.models()
    tables = LawTables.build(exact_law(target, showcase.prompt, showcase.params))
    decoder = entry.factory(target, draft, entropy=seed)
    rng = np.random.default_rng([seed, 7])
    cumulative = [Counter() for _ in range(reps)]
    needed, max_rate, null500, previous = dict.fromkeys(METHODS), dict.fromkeys(METHODS), None, 0
    for step, n in enumerate(grid):
        null = null_figures(tables.law.probs, n, alpha, rng)
        null500 = null500 or null.false_alarms
        hits = Counter()
        for rep in range(reps):
            draws = decoder.sample(showcase.request(seed=request_seed(seed, name, rep, step)), n - previous)
            cumulative[rep].update(draws.outcomes)
            hits.update(m for m, hit in rejections(tables, cumulative[rep], alpha, null, seed).items() if hit)
        for method in METHODS:
            if method in UNCALIBRATED and null.false_alarms[method] > 0.0:
                continue  # the rule rejects the exact law here too: not a catch
            rate = hits[method] / reps
            max_rate[method] = max(max_rate[method] or 0.0, rate)
            if needed[method] is None and rate >= POWER:
                needed[method] = n
        previous = n
        if all(v is not None for v in needed.values()):
            break
    return dict(entry=name, showcase=entry.showcases[0], needed=needed, max_rate=max_rate, null500=null500)


def cell(row: dict, method: str, max_n: int) -> str:
    n = row["needed"][method]
    if n is not None:
        return str(n)
    return "never" if row["max_rate"][method] == 0 else f">{max_n / 1000:g}k"


def ratio(row: dict, method: str, max_n: int) -> str:
    base, n = row["needed"]["specverify"], row["needed"][method]
    if base is None:
        return "-"
    if n is None:
        return "never" if row["max_rate"][method] == 0 else f">{max_n / base:.0f}"
    return f"{n / base:.2f}" if n / base < 100 else f"{n / base:.0f}"


def needed_line(row: dict, max_n: int) -> str:
    tv = ZOO[row["entry"]].tv or 0.0
    cells = " ".join(f"{cell(row, m, max_n):>10s}" for m in METHODS)
    return f"{row['entry']:31s} {row['showcase']:12s} {tv:6.4f} {cells}"


def print_ratios(rows: list, max_n: int) -> None:
    print("\nratio method n / specverify n")
    print(f"{'entry':31s} " + " ".join(f"{m:>10s}" for m in METHODS[1:]))
    for row in rows:
        print(f"{row['entry']:31s} " + " ".join(f"{ratio(row, m, max_n):>10s}" for m in METHODS[1:]))


def print_footer(rows: list) -> None:
    seen = {}
    for row in rows:
        seen.setdefault(row["showcase"], row["null500"])
    print(f"\nfalse alarms on the exact law at n = 500 ({NULL_SIMS} multinomial samples), per showcase:")
    for showcase, rates in seen.items():
        print(f"  {showcase:12s} " + "  ".join(f"{m} {rate:.3f}" for m, rate in rates.items()))


def parse_args(argv: list | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20, help="seeded replications per grid point (default 20)")
    ap.add_argument(
        "--entries", nargs="*", default=None, help="zoo entries to run, any verdict (default: every inexact one)"
    )
    ap.add_argument("--min-n", type=int, default=500, help="first grid point (default 500)")
    ap.add_argument("--max-n", type=int, default=512_000, help="last grid point (default 512000)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes, one entry each (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the decoders, the requests and the simulations")
    return ap.parse_args(argv)


def main(argv: list | None = None) -> None:
    args = parse_args(argv)
    inexact = [name for name, e in ZOO.items() if e.verdict != Verdict.EXACT]
    names = args.entries or [name for name in inexact if ZOO[name].tv is not None]
    skipped = [] if args.entries else [name for name in inexact if ZOO[name].tv is None]
    num_tests = certifier_num_tests()
    alpha = FAMILY_ALPHA / num_tests
    grid = doubling_grid(args.min_n, args.max_n)
    jobs = [(name, args.reps, grid, alpha, args.seed) for name in names]
    print(
        f"family α {FAMILY_ALPHA:g} over m = {num_tests} sampling tests: α_s = {alpha:.3g} per scenario; "
        f"n needed = smallest of {grid[0]}..{grid[-1]} (doubling) rejecting in ≥ {POWER:.0%} of {args.reps} reps"
    )
    print(f"{'entry':31s} {'showcase':12s} {'TV':>6s} " + " ".join(f"{m:>10s}" for m in METHODS), flush=True)
    started, rows = time.perf_counter(), []
    with ProcessPoolExecutor(args.jobs) if args.jobs > 1 else contextlib.nullcontext() as pool:
        for row in pool.map(measure, jobs) if pool else map(measure, jobs):  # rows print as they finish
            rows.append(row)
            print(needed_line(row, grid[-1]), flush=True)
            print(f"[{time.perf_counter() - started:6.0f} s] {row['entry']} done", file=sys.stderr, flush=True)
    print_ratios(rows, grid[-1])
    print_footer(rows)
    if skipped:
        print(f"\nskipped (law exact on the seeded showcase, tv None; other checks catch them): {', '.join(skipped)}")


if __name__ == "__main__":
    main()
