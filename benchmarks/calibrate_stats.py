"""Calibrate the pooled χ² tests of specverify.stats: false-alarm rates and planned vs needed sample sizes.

For each exact law and α in {1e-2, 1e-3, 1e-4}, N is planned by ``plan_sample_size(law, 0.02, alpha=α)`` and the
false-alarm rate of pooled Pearson and Cressie–Read (λ = 2/3) at nominal α is measured over multinomial draws from
the law itself, with a Clopper–Pearson 95 % interval and whether it stays within the safety factor (rate ≤ safety·α).
Then, for a flat tilt at TV ε (the worst case of the planning model), the planned N is compared with the N at which
the simulated rejection rate at level α/safety first reaches the planned power.

    python benchmarks/calibrate_stats.py --draws 20000 --seed 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from specverify.stats import plan_sample_size, pooled_cells
from specverify.stats.gof import _power_divergence

METHODS = {"pearson": 1.0, "cressie-read": 2 / 3}
ALPHAS = (1e-2, 1e-3, 1e-4)
EPSILON, POWER, SAFETY = 0.02, 0.9, 4.0
CHUNK = 10_000


def make_laws() -> dict[str, np.ndarray]:
    zipf = 1.0 / np.arange(1, 257) ** 2.0
    geometric = 0.95 ** np.arange(256)
    return {
        "uniform K=64": np.full(64, 1 / 64),
        "zipf(2.0) K=256": zipf / zipf.sum(),
        "geometric(0.95) K=256": geometric / geometric.sum(),
    }


def pooled_statistics(law, n, cells, rng, source, draws) -> dict[str, np.ndarray]:
    """Power-divergence statistics of ``draws`` multinomial(n, source) samples on fixed cells: method -> [draws]."""
    onehot = np.eye(cells.max() + 1)[cells]  # [K, C]
    expected_counts = n * (law @ onehot)  # [C]
    out = {method: [] for method in METHODS}
    for start in range(0, draws, CHUNK):
        observed = rng.multinomial(n, source, size=min(CHUNK, draws - start)) @ onehot  # [chunk, C]
        for method, lambda_ in METHODS.items():
            out[method].append(_power_divergence(observed, expected_counts, lambda_))
    return {method: np.concatenate(parts) for method, parts in out.items()}


def clopper_pearson(k: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    low = stats.beta.ppf(tail, k, trials - k + 1) if k > 0 else 0.0
    high = stats.beta.ppf(1 - tail, k + 1, trials - k) if k < trials else 1.0
    return float(low), float(high)


def false_alarm_table(laws, draws, rng) -> None:
    print(f"False-alarm rate at nominal alpha, N = plan_sample_size(law, {EPSILON}, alpha), {draws} draws each;")
    print(f"cells = pooled cells at N; CP95 = Clopper-Pearson 95 % interval; safety factor {SAFETY:g}")
    header = f"{'law':<22} {'alpha':>7} {'N':>7} {'cells':>5} {'method':<13} {'rate':>9} {'CP95 low':>9} "
    print(header + f"{'CP95 high':>9} {'rate/alpha':>10} {'rate<=4a':>8} {'CPlow<=4a':>9}")
    for name, law in laws.items():
        for alpha in ALPHAS:
            n = plan_sample_size(law, EPSILON, alpha=alpha, safety=SAFETY)
            cells = pooled_cells(law, n)
            df = int(cells.max())
            statistics = pooled_statistics(law, n, cells, rng, law, draws)
            for method, values in statistics.items():
                k = int(np.count_nonzero(stats.chi2.sf(values, df) <= alpha))
                low, high = clopper_pearson(k, draws)
                within = "yes" if k / draws <= SAFETY * alpha else "NO"
                consistent = "yes" if low <= SAFETY * alpha else "NO"
                print(
                    f"{name:<22} {alpha:>7.0e} {n:>7} {df + 1:>5} {method:<13} {k / draws:>9.2e} {low:>9.2e} "
                    f"{high:>9.2e} {k / draws / alpha:>10.2f} {within:>8} {consistent:>9}"
                )


def flat_tilt(law: np.ndarray, cells: np.ndarray, epsilon: float) -> np.ndarray:
    """Move mass epsilon between two unions of pooled cells of mass as close to 1/2 as greedy gets, proportionally."""
    cell_mass = np.bincount(cells, weights=law)
    up_cells = np.zeros(cell_mass.size, dtype=bool)
    sides = [0.0, 0.0]
    for cell in np.argsort(-cell_mass, kind="stable"):  # greedy: heaviest cell to the lighter side
        side = int(sides[1] < sides[0])
        sides[side] += cell_mass[cell]
        up_cells[cell] = side == 1
    up = up_cells[cells]
    mass_up = law[up].sum()
    return np.where(up, law * (1 + epsilon / mass_up), law * (1 - epsilon / (1 - mass_up)))


def needed_n(fractions, rates) -> float | None:
    """Smallest fraction of the planned N where the rejection rate reaches POWER (linear interpolation)."""
    for i, rate in enumerate(rates):
        if rate >= POWER:
            if i == 0:
                return None  # below the grid
            f0, f1, r0, r1 = fractions[i - 1], fractions[i], rates[i - 1], rate
            return f0 + (POWER - r0) * (f1 - f0) / (r1 - r0)
    return None


def power_table(laws, alpha, draws, rng) -> None:
    level = alpha / SAFETY
    fractions = np.round(np.arange(0.5, 1.31, 0.1), 2)
    print(
        f"\nFlat tilt at TV {EPSILON}: planned N (alpha={alpha:.0e}, power {POWER}) vs simulated N reaching power at "
        f"level alpha/{SAFETY:g}; {draws} draws per N, grid {fractions[0]}..{fractions[-1]} x planned"
    )
    print(f"{'law':<22} {'planned N':>9} {'method':<13} {'power@plan':>10} {'needed N':>9} {'needed/planned':>14}")
    for name, law in laws.items():
        planned = plan_sample_size(law, EPSILON, alpha=alpha, power=POWER, safety=SAFETY)
        alternative = flat_tilt(law, pooled_cells(law, planned), EPSILON)
        rates = {method: [] for method in METHODS}
        for fraction in fractions:
            n = int(round(fraction * planned))
            cells = pooled_cells(law, n)
            critical = stats.chi2.isf(level, int(cells.max()))
            for method, values in pooled_statistics(law, n, cells, rng, alternative, draws).items():
                rates[method].append(float(np.mean(values > critical)))
        for method in METHODS:
            at_plan = rates[method][list(fractions).index(1.0)]
            fraction = needed_n(fractions, rates[method])
            needed = "off grid" if fraction is None else f"{fraction * planned:>9.0f}"
            ratio = "" if fraction is None else f"{fraction:.3f}"
            print(f"{name:<22} {planned:>9} {method:<13} {at_plan:>10.3f} {needed:>9} {ratio:>14}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=100_000, help="null draws per (law, alpha) (default 100000)")
    parser.add_argument("--power-draws", type=int, default=2_000, help="draws per N in the power table")
    parser.add_argument("--power-alpha", type=float, default=1e-6, help="alpha of the power table (default 1e-6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of numpy.random.default_rng")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    laws = make_laws()
    began = time.perf_counter()
    false_alarm_table(laws, args.draws, rng)
    power_table(laws, args.power_alpha, args.power_draws, rng)
    print(f"\nseed {args.seed}; {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
