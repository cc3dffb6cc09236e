"""Sample-size planning for the pooled χ² family: how many samples detect any alternative at total variation ε.

The planning model is the noncentral χ² approximation of the pooled Pearson statistic, and the worst case over all
alternatives at pooled TV ε has noncentrality ``4 n ε²`` (Cauchy–Schwarz; see :func:`plan_sample_size`). Measured on
K = 256 at α = 1e-6 and power 0.9, the prediction is within ~6 % of the simulated worst case (a flat tilt).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special, stats

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_expected, as_positive_float, as_positive_int, as_probability
from specverify.stats.gof import _pool

__all__ = ["plan_sample_size", "detectable_tv", "family_alpha_per_test", "noncentrality_needed"]


try:  # the ufunc behind scipy.stats.ncx2.sf (nc > 0): ~2.5 µs a call against ~200 µs through the distribution object
    from scipy.special._ufuncs import _ncx2_sf as _ncx2_sf_ufunc
except ImportError:  # pragma: no cover - another scipy layout: the public path, same numbers
    _ncx2_sf_ufunc = None


def _ncx2_sf(x: float, df: int, noncentrality: float) -> float:
    """``scipy.stats.ncx2.sf(x, df, noncentrality)``, bit for bit (``tests/stats/test_power.py``), without the
    distribution object's argument handling: the plans call it ~1,000 times per certification."""
    if _ncx2_sf_ufunc is None or not noncentrality > 0:
        return float(stats.ncx2.sf(x, df, noncentrality))  # nc = 0 is the central χ² (scipy's own branch)
    return float(_ncx2_sf_ufunc(x, df, noncentrality))


def _chi2_isf(q: float, df: int) -> float:
    """``scipy.stats.chi2.isf(q, df)`` for q in (0, 1), bit for bit: the special function it calls."""
    return float(special.chdtri(df, q)) if 0 < q < 1 else float(stats.chi2.isf(q, df))


def _ncx2_ppf(q: float, df: int, noncentrality: float) -> float:
    """``scipy.stats.ncx2.ppf(q, df, noncentrality)`` for q in (0, 1) and noncentrality > 0, bit for bit."""
    if 0 < q < 1 and noncentrality > 0:
        return float(special.chndtrix(q, df, noncentrality))
    return float(stats.ncx2.ppf(q, df, noncentrality))


@functools.lru_cache(maxsize=4096)
def noncentrality_needed(df: int, level: float, power: float) -> float:
    """Smallest noncentrality λ* with ``P(ncχ²(df, λ*) > χ²(df) quantile 1 - level) = power``.

    Parameters
    ----------
    df : int
        Degrees of freedom (>= 1).
    level : float
        Test level in (0, 1).
    power : float
        Wanted rejection probability in (0, 1).

    Returns
    -------
    float
        λ*; 0.0 when ``power <= level`` (the null itself already rejects that often).

    Notes
    -----
    Solved by Brent's method to a relative tolerance of 1e-12. Exact for the noncentral χ², which is itself only the
    large-n law of a power-divergence statistic under an alternative close to the null.
    """
    df = as_positive_int(df, "df")
    level = as_probability(level, "level")
    power = as_probability(power, "power")
    if power <= level:
        return 0.0
    critical = _chi2_isf(level, df)

    def shortfall(noncentrality: float) -> float:
        return _ncx2_sf(critical, df, noncentrality) - power

    upper = max(1.0, critical)
    while shortfall(upper) < 0:
        upper *= 2.0
    return float(optimize.brentq(shortfall, 0.0, upper, xtol=1e-12, rtol=1e-12))


def _check_plan_args(alpha, power, min_expected, safety) -> tuple[float, float, float]:
    alpha = as_probability(alpha, "alpha")
    power = as_probability(power, "power")
    min_expected = as_positive_float(min_expected, "min_expected")
    safety = as_positive_float(safety, "safety")
    if safety < 1.0:
        raise InvalidArgument(f"safety={safety!r}; expected >= 1 (the plan is made at level alpha / safety).")
    return alpha / safety, power, min_expected


def _df_at(expected: np.ndarray, n: int, min_expected: float) -> int:
    return int(_pool(expected, float(n), min_expected).max())  # num_cells - 1


def plan_sample_size(expected, epsilon, *, alpha, power=0.9, min_expected=5.0, safety=4.0) -> int:
    """Worst-case number of samples for the pooled χ² test to detect any alternative at total variation ``epsilon``.

    Parameters
    ----------
    expected : array_like, float [K]
        Exact law over the K outcomes of positive probability.
    epsilon : float
        Total variation distance to detect, in (0, 1].
    alpha : float
        Level of the test (already divided over scenarios and tests, see :func:`family_alpha_per_test`).
    power : float, optional
        Wanted probability of rejecting such an alternative (default 0.9).
    min_expected : float, optional
        Pooling threshold of :func:`pooled_cells` (default 5).
    safety : float, optional
        The plan is made at level ``alpha / safety`` (default 4, docs/design.md: the true tail of pooled χ² was measured
        up to 2× the nominal one at small α). A test run at ``alpha`` then has at least the planned power.

    Returns
    -------
    int
        The smallest N found with ``N >= λ*(df(N)) / (4 ε²)``.

    Notes
    -----
    For an alternative law q with pooled cell masses Q_c against P_c, the pooled Pearson statistic is approximately
    noncentral χ²(df) with noncentrality ``λ = n Σ_c Δ_c² / P_c``, ``Δ_c = Q_c - P_c``. By Cauchy–Schwarz,
    ``(Σ_c |Δ_c|)² ≤ (Σ_c Δ_c² / P_c)(Σ_c P_c)`` and ``Σ_c P_c = 1``, so ``λ ≥ n (2 ε_pooled)² = 4 n ε_pooled²``,
    with equality for the flat tilt ``Δ_c = ±2 ε P_c`` on two halves of mass 1/2. Every alternative at pooled TV ε is
    therefore detected with at least the power of the flat tilt, which needs ``λ*(df) / (4 ε²)`` samples, λ* from
    :func:`noncentrality_needed` at level ``alpha / safety``. The df depends on N through pooling, so N is iterated
    upward from df = 1 until it covers its own df. Cressie–Read statistics share this large-n law.

    The guarantee is for TV measured on the pooled partition (ε_pooled ≤ ε): a bug that only moves mass inside one
    pooled cell is invisible. With a single outcome the only alternatives put mass ε outside the support, caught as
    soon as one such sample appears: N = ceil(log(1 - power) / log(1 - ε)).

    Examples
    --------
    >>> n = plan_sample_size([0.25] * 4, 0.1, alpha=1e-3)
    >>> n >= noncentrality_needed(3, 1e-3 / 4, 0.9) / (4 * 0.1**2)
    True
    """
    expected = as_expected(expected)
    epsilon = as_probability(epsilon, "epsilon", open_right=False)
    level, power, min_expected = _check_plan_args(alpha, power, min_expected, safety)
    if expected.size == 1:
        return max(1, math.ceil(math.log1p(-power) / math.log1p(-epsilon))) if epsilon < 1 else 1
    scale = 4.0 * epsilon**2
    n = max(1, math.ceil(noncentrality_needed(1, level, power) / scale))
    for _ in range(expected.size + 64):  # each step raises df, bounded by K - 1
        df = _df_at(expected, n, min_expected)
        needed = math.ceil(noncentrality_needed(df, level, power) / scale) if df >= 1 else 2 * n
        if needed <= n:
            return n
        n = needed
    return n  # unreachable in practice: df can only take K values


def detectable_tv(expected, n, *, alpha, power=0.9, min_expected=5.0, safety=4.0) -> float:
    """Smallest pooled total variation detected with probability ``power`` from ``n`` samples (inverse of the plan).

    Parameters
    ----------
    expected : array_like, float [K]
        Exact law over the K outcomes of positive probability.
    n : int
        Number of samples (>= 1).
    alpha, power, min_expected, safety
        As for :func:`plan_sample_size`.

    Returns
    -------
    float
        ``sqrt(λ*(df(n)) / (4 n))``; ``inf`` when all n samples fall in one pooled cell (nothing on the support is
        detectable). Values above 1 mean no alternative is guaranteed to be detected.

    Notes
    -----
    Same model and caveats as :func:`plan_sample_size` (worst case over alternatives, TV on the pooled partition).
    Round trip: ``detectable_tv(expected, plan_sample_size(expected, eps, ...), ...) <= eps``. A single-outcome law
    gives ``1 - (1 - power) ** (1 / n)``.

    Examples
    --------
    >>> eps = detectable_tv([0.25] * 4, 10_000, alpha=1e-3)
    >>> bool(0.01 < eps < 0.05)
    True
    """
    expected = as_expected(expected)
    n = as_positive_int(n, "n")
    level, power, min_expected = _check_plan_args(alpha, power, min_expected, safety)
    if expected.size == 1:
        return float(-math.expm1(math.log1p(-power) / n))
    df = _df_at(expected, n, min_expected)
    if df == 0:
        return math.inf
    return math.sqrt(noncentrality_needed(df, level, power) / (4.0 * n))


def family_alpha_per_test(alpha, num_scenarios, num_tests) -> float:
    """Bonferroni share of a family-wise ``alpha`` for one test: ``alpha / (num_scenarios * num_tests)``.

    Parameters
    ----------
    alpha : float
        Family-wise false-alarm rate, in (0, 1).
    num_scenarios : int
        Number of scenarios m (>= 1).
    num_tests : int
        Number of tests k per scenario (>= 1), e.g. 3 for :func:`battery`.

    Returns
    -------
    float

    Notes
    -----
    Valid under any dependence between the tests (Bonferroni). docs/design.md plans every sample size at this level
    (divided once more by the safety factor inside :func:`plan_sample_size`).

    Examples
    --------
    >>> round(family_alpha_per_test(1e-3, 10, 4), 12)
    2.5e-05
    """
    alpha = as_probability(alpha, "alpha")
    num_scenarios = as_positive_int(num_scenarios, "num_scenarios")
    num_tests = as_positive_int(num_tests, "num_tests")
    return alpha / (num_scenarios * num_tests)
