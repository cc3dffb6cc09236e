"""Sequential decisions (specverify.stats.sequential) against the fixed plan, by simulation on synthetic bug shapes.

Table 1, per exact law and bug shape, at the certifier's per-test level (``--alpha``, default 1e-8) and ε = 0.05:
the fixed plan's N (``plan_sample_size``, safety 4), the sequential design's largest N, the mean N on exact draws,
the mean N and the power at pooled TV ε, and the N at which a decoder at TV 0.2 is rejected. Table 2: false-alarm
rate of the whole sequential design at α = 1e-2 and 1e-3 with a Clopper–Pearson 95 % upper bound. Table 3: planner
accuracy of the fixed pooled Cressie–Read test: N for power 0.9 predicted by the noncentral χ² model (worst case
``plan_sample_size(..., safety=1)`` and the shape's own noncentrality) against the simulated N.

Bug shapes, each scaled to a TV of exactly ε on the design's reference partition: a mixture with another law, a
temperature change (p^b renormalised; none on a uniform law), a sparse move (mass taken from the largest outcomes
onto the rarest one) and a flat tilt (the worst case of the planning model).

    python benchmarks/sequential_decisions.py --quick          # a couple of minutes
    python benchmarks/sequential_decisions.py --reps 2000      # ~10 minutes on one core
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import optimize, stats

from specverify.stats import noncentrality_needed, plan_sample_size, plan_sequential, sample_size_against
from specverify.stats.gof import _pool, _power_divergence
from specverify.stats.sequential import _look_statistics

EPSILON, FAR_TV, POWER, LAMBDA = 0.05, 0.2, 0.9, 2 / 3
CHUNK = 5000


def make_laws() -> dict[str, np.ndarray]:
    zipf = 1.0 / np.arange(1, 257) ** 1.1
    geometric = 0.97 ** np.arange(128)
    return {
        "uniform K=64": np.full(64, 1 / 64),
        "zipf(1.1) K=256": zipf / zipf.sum(),
        "geometric(0.97) K=128": geometric / geometric.sum(),
    }


def tv_on(cells: np.ndarray, q: np.ndarray, p: np.ndarray) -> float:
    """Total variation between q and p on a partition."""
    num = int(cells.max()) + 1
    return 0.5 * float(np.abs(np.bincount(cells, q - p, minlength=num)).sum())


def mixture(p, cells, tv, rng):
    other = 1.0 / np.arange(1, p.size + 1)
    other = rng.permutation(other / other.sum())
    weight = tv / tv_on(cells, other, p)
    return None if weight > 1 else (1 - weight) * p + weight * other


def temperature(p, cells, tv, rng):
    if np.ptp(p) < 1e-15:
        return None

    def law(b):
        q = np.exp(b * np.log(p) - np.max(b * np.log(p)))
        return q / q.sum()

    if tv_on(cells, law(20.0), p) < tv:
        return None
    b = optimize.brentq(lambda b: tv_on(cells, law(b), p) - tv, 1.0, 20.0, xtol=1e-12)
    return law(b)


def sparse_move(p, cells, tv, rng):
    order = np.argsort(-p, kind="stable")
    q = p.copy()
    rarest = order[-1]
    left = tv
    for i in order[:-1]:  # take up to half of each of the largest outcomes until tv is moved
        if cells[i] == cells[rarest]:
            return None
        take = min(left, p[i] / 2)
        q[i] -= take
        left -= take
        if left <= 1e-15:
            break
    if left > 1e-15:
        return None
    q[rarest] += tv
    return q


def flat_tilt(p, cells, tv, rng):
    num = int(cells.max()) + 1
    masses = np.bincount(cells, p, minlength=num)
    up, total = np.zeros(num, dtype=bool), 0.0
    for c in np.argsort(-masses, kind="stable"):  # greedy halves
        if total + masses[c] <= 0.5 or total == 0.0:
            up[c], total = True, total + masses[c]
    side = up[cells]
    if tv / (1 - total) >= 1:
        return None
    return np.where(side, p * (1 + tv / total), p * (1 - tv / (1 - total)))


SHAPES = {"mixture": mixture, "temperature": temperature, "sparse move": sparse_move, "flat tilt": flat_tilt}


FLOOR = {"factor": 32.0}  # the certifier's p-value floor: family α / battery = m × the design's α (m = 32 on toy)


def simulate(plan, source, reps, rng):
    """Run the sequential design on ``reps`` multinomial streams from ``source``: (stop N [reps], rejected [reps]).
    As the certifier runs it: an early pass needs the any-time p-value above ``FLOOR["factor"] × plan.alpha``."""
    stop_n = np.zeros(reps, dtype=np.int64)
    rejected = np.zeros(reps, dtype=bool)
    floor = FLOOR["factor"] * plan.alpha
    for start in range(0, reps, CHUNK):
        size = min(CHUNK, reps - start)
        counts = np.zeros((size, source.size), dtype=np.int64)
        running = np.ones(size)  # the any-time p-value (min over looks of p_k α / α_k)
        active = np.arange(size)
        drawn = 0
        for look, n in enumerate(plan.schedule):
            counts[active] += rng.multinomial(n - drawn, source, size=active.size)
            drawn = n
            statistic = _look_statistics(plan, look, counts[active])
            log_p = stats.chi2.logsf(statistic, plan.dfs[look]) if plan.dfs[look] > 0 else np.zeros(active.size)
            adjusted = np.exp(np.minimum(0.0, log_p + math.log(plan.alpha / plan.alpha_spent[look])))
            running[active] = np.minimum(running[active], adjusted)
            reject = statistic > plan.reject_thresholds[look]
            last = look == plan.num_looks - 1
            inside = (statistic <= plan.pass_thresholds[look]) & (running[active] > floor)
            done = reject | inside | last
            stop_n[start + active[done]] = n
            rejected[start + active[done & reject]] = True
            active = active[~done]
            if active.size == 0:
                break
    return stop_n, rejected


def clopper_pearson_upper(k: int, trials: int, confidence: float = 0.95) -> float:
    return 1.0 if k == trials else float(stats.beta.ppf(1 - (1 - confidence) / 2, k + 1, trials - k))


def design_table(laws, alpha, reps, rng) -> None:
    print(
        f"Table 1: sequential design at alpha={alpha:g}, epsilon={EPSILON}, power {POWER}, p-value floor "
        f"{FLOOR['factor']:g} × alpha; {reps} runs per cell"
    )
    header = (
        f"{'law':22} {'shape':12} {'fixed N':>8} {'max N':>7} {'mean N exact':>14} {'mean N at eps':>14} "
        f"{'power':>6} {'N to reject TV 0.2 (mean/p95/max)':>34}"
    )
    print(header)
    print("-" * len(header))
    for name, law in laws.items():
        plan = plan_sequential(law, EPSILON, alpha=alpha, power=POWER)
        reference = plan.cells[plan.first_pass_look]
        exact_n, exact_rejected = simulate(plan, law, reps, rng)
        exact = f"{exact_n.mean():.0f} ({exact_n.mean() / plan.fixed_n:.2f}x)"
        for shape, make in SHAPES.items():
            q = make(law, reference, EPSILON, np.random.default_rng(7))
            far = make(law, reference, FAR_TV, np.random.default_rng(7))
            if q is None:
                print(f"{name:22} {shape:12} {'(not defined on this law)':>40}")
                continue
            n_eps, rejected = simulate(plan, q, reps, rng)
            far_text = "n/a"
            if far is not None:
                n_far, rejected_far = simulate(plan, far, reps, rng)
                far_text = (
                    f"{n_far.mean():.0f}/{np.quantile(n_far, 0.95):.0f}/{n_far.max()} ({rejected_far.mean():.3f})"
                )
            eps_text = f"{n_eps.mean():.0f} ({n_eps.mean() / plan.fixed_n:.2f}x)"
            print(
                f"{name:22} {shape:12} {plan.fixed_n:>8} {plan.max_n:>7} {exact:>14} {eps_text:>14} "
                f"{rejected.mean():>6.3f} {far_text:>34}"
            )
        if exact_rejected.any():
            print(f"  (exact draws rejected {exact_rejected.sum()} times of {reps})")
    print("  the power column at TV 0.2 is in brackets; TV is measured on the design's reference partition\n")


def false_alarm_table(laws, alphas, reps_for, rng) -> None:
    print("Table 2: false alarms of the whole sequential design (every look), exact draws, epsilon 0.05")
    header = f"{'law':22} {'alpha':>7} {'runs':>7} {'rejects':>8} {'rate':>9} {'CP95 upper':>10} {'mean N / fixed':>15}"
    print(header)
    print("-" * len(header))
    for name, law in laws.items():
        for alpha in alphas:
            plan = plan_sequential(law, EPSILON, alpha=alpha, power=POWER)
            reps = reps_for(alpha)
            stop_n, rejected = simulate(plan, law, reps, rng)
            k = int(rejected.sum())
            upper = clopper_pearson_upper(k, reps)
            lower = float(stats.beta.ppf(0.025, k, reps - k + 1)) if k > 0 else 0.0
            flag = "" if upper <= alpha else "  (consistent with <= alpha)" if lower <= alpha else "  (ABOVE alpha)"
            print(
                f"{name:22} {alpha:>7g} {reps:>7} {k:>8} {k / reps:>9.2e} {upper:>10.2e} "
                f"{stop_n.mean() / plan.fixed_n:>14.2f}x{flag}"
            )
    print()


def fixed_power(law, q, n, alpha, reps, rng) -> float:
    cells = _pool(law, float(n), 5.0)
    num = int(cells.max()) + 1
    onehot = np.zeros((law.size, num))
    onehot[np.arange(law.size), cells] = 1.0
    expected_counts = n * (law @ onehot)
    statistic = _power_divergence(rng.multinomial(n, q, size=reps) @ onehot, expected_counts, LAMBDA)
    return float(np.mean(statistic > stats.chi2.isf(alpha, num - 1)))


def model_n(law, q, alpha) -> int:
    """Smallest N (0.5 % grid) with ``N δ²(N) >= λ*(df(N))``: the noncentral χ² model with the shape's own
    noncentrality per sample on the cells pooled at N, ``δ² = 2 I_λ(Q : P)`` (Cressie–Read divergence, λ = 2/3,
    which is ``Σ_c Δ_c² / P_c`` to second order and tracks the statistic better for large local moves)."""
    n = 16.0
    while n < 1e8:
        cells = _pool(law, float(math.ceil(n)), 5.0)
        num = int(cells.max()) + 1
        cell_q, cell_p = np.bincount(cells, q, minlength=num), np.bincount(cells, law, minlength=num)
        per_sample = float(2 / (LAMBDA * (LAMBDA + 1)) * np.sum(cell_q * ((cell_q / cell_p) ** LAMBDA - 1)))
        if num > 1 and per_sample > 0 and math.ceil(n) * per_sample >= noncentrality_needed(num - 1, alpha, POWER):
            return math.ceil(n)
        n *= 1.005
    return math.inf


def simulated_n(law, q, alpha, reps, rng, guess) -> int:
    """Smallest N (to ~1 %) whose simulated power reaches 0.9, by bisection from a bracket around ``guess``."""
    low, high = max(8, guess // 2), 2 * guess
    while fixed_power(law, q, high, alpha, reps, rng) < POWER:
        low, high = high, 2 * high
    while low > 8 and fixed_power(law, q, low, alpha, reps, rng) >= POWER:
        low, high = low // 2, low
    while high - low > max(4, high // 100):
        middle = (low + high) // 2
        if fixed_power(law, q, middle, alpha, reps, rng) >= POWER:
            high = middle
        else:
            low = middle
    return high


def planner_table(laws, alpha, reps, rng) -> None:
    print(f"Table 3: planner accuracy, fixed pooled Cressie-Read test at alpha={alpha:g}, power {POWER}, TV {EPSILON}")
    print("  worst = plan_sample_size(safety=1) (worst case over alternatives); model = noncentral chi2 with the")
    print(f"  shape's own noncentrality 2 I_2/3(Q:P); sim = simulated N for power 0.9 ({reps} runs per N, bisection)")
    print("  2-mom = stats.sample_size_against (two moments of the statistic under the shape, Satterthwaite)")
    header = (
        f"{'law':22} {'shape':12} {'worst':>7} {'model':>7} {'2-mom':>7} {'sim':>7} {'sim/worst':>10} "
        f"{'sim/model':>10} {'sim/2-mom':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, law in laws.items():
        worst = plan_sample_size(law, EPSILON, alpha=alpha, power=POWER, safety=1.0)
        reference = _pool(law, float(worst), 5.0)
        for shape, make in SHAPES.items():
            q = make(law, reference, EPSILON, np.random.default_rng(7))
            if q is None:
                continue
            model = model_n(law, q, alpha)
            moments = sample_size_against(law, q, alpha=alpha, power=POWER)
            sim = simulated_n(law, q, alpha, reps, rng, model)
            print(
                f"{name:22} {shape:12} {worst:>7} {model:>7} {moments:>7} {sim:>7} {sim / worst:>10.3f} "
                f"{sim / model:>10.3f} {sim / moments:>10.3f}"
            )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=2000, help="runs per cell of tables 1 and 3")
    parser.add_argument("--alarm-reps", type=int, default=None, help="runs per false-alarm cell (default 150/alpha)")
    parser.add_argument("--alpha", type=float, default=1e-8, help="per-test level of table 1 and 3")
    parser.add_argument("--quick", action="store_true", help="fewer runs (500; false alarms 30/alpha)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--floor-tests",
        type=float,
        default=32.0,
        help="early passes need the any-time p-value "
        "above this many times the design's α (the certifier's floor: m = 32 tests; 0: no floor)",
    )
    args = parser.parse_args()
    FLOOR["factor"] = args.floor_tests
    reps = 500 if args.quick else args.reps
    reps_for = (lambda a: args.alarm_reps) if args.alarm_reps else (lambda a: int((30 if args.quick else 150) / a))
    rng = np.random.default_rng(args.seed)
    laws = make_laws()
    started = time.perf_counter()
    design_table(laws, args.alpha, reps, rng)
    false_alarm_table(laws, (1e-2, 1e-3), reps_for, rng)
    planner_table(laws, args.alpha, reps, rng)
    print(f"elapsed {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
