"""Power of the pooled Cressie–Read test against one given alternative (a bug shape), not the worst case.

:func:`~specverify.stats.plan_sample_size` plans for the worst alternative at a total variation ε with the
noncentral χ² model, whose variance ``2(df + 2λ)`` is right for *local* alternatives. A bug that moves mass onto a
rare outcome is not local there: the count of that cell has variance ``N q`` rather than ``N p``, and the statistic
spreads more than the noncentral χ² says, so N is underestimated (by 13–14 % for the sparse move of
``benchmarks/sequential_decisions.py``), and cells of small expected count add their own spread (up to 12 % on a
long-tailed law). The model here computes the statistic's mean and variance under the alternative cell by cell
(binomial / Poisson counts, conditioned on the total) and reads the power off a scaled χ² with those two moments
(Satterthwaite).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_expected, as_positive_float, as_positive_int, as_probability
from specverify.stats.gof import _pool

__all__ = ["power_against", "sample_size_against"]

_LAMBDA = 2.0 / 3.0


def _alternative(alternative, size: int) -> np.ndarray:
    q = np.asarray(alternative, dtype=np.float64)
    if q.shape != (size,) or not np.all(np.isfinite(q)) or np.any(q < 0) or abs(float(q.sum()) - 1.0) > 1e-9:
        raise InvalidArgument(
            f"alternative={alternative!r}: expected a probability vector over the same {size} outcomes as "
            "`expected` (non-negative, sums to 1 within 1e-9); pass the bug's law aligned with the exact law"
        )
    return q


def _cell_terms(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Cressie–Read term of each (observed, expected) pair, the statistic's summand (see stats.gof)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        grown = np.where(observed > 0, observed * np.expm1(_LAMBDA * np.log(observed / expected)), 0.0)
    return 2.0 / (_LAMBDA * (_LAMBDA + 1.0)) * (grown - _LAMBDA * (observed - expected))


def _moments(p: np.ndarray, q: np.ndarray, n: int, min_expected: float) -> tuple[float, float, int]:
    """(mean, variance, df) of the pooled statistic at ``n`` draws from ``q`` against ``p``.

    Each cell's count is Poisson(n q_c), independently (Poissonisation); conditioning on the total T = n is done by
    regressing the statistic on ``T - n`` and ``(T - n)² - n`` (the quadratic term carries the degree of freedom the
    total removes: it turns ``2 C`` into ``2 (C - 1)`` at the null). The mean uses the exact binomial marginals.
    """
    cells = _pool(p, float(n), min_expected)
    num = int(cells.max()) + 1
    cell_p, cell_q = np.bincount(cells, p, minlength=num), np.bincount(cells, q, minlength=num)
    rate, expected = n * cell_q, n * cell_p
    spread = np.sqrt(rate) + 1.0
    low = np.maximum(np.floor(rate - 12.0 * spread), 0.0)
    width = int(np.max(np.ceil(rate + 12.0 * spread) - low)) + 1
    observed = low[:, None] + np.arange(width)[None, :]  # [C, W]
    terms = _cell_terms(observed, expected[:, None])
    mean = float(np.sum(stats.binom.pmf(observed, n, cell_q[:, None]) * terms))
    poisson = stats.poisson.pmf(observed, rate[:, None])
    centred = terms - np.sum(poisson * terms, axis=1, keepdims=True)
    deviation = observed - rate[:, None]
    variance = float(np.sum(poisson * centred**2))
    linear = float(np.sum(poisson * centred * deviation))
    quadratic = float(np.sum(poisson * centred * deviation**2))
    covariance = np.array([[n, n], [n, 2.0 * n * n + n]], dtype=np.float64)
    projection = np.array([linear, quadratic])
    variance -= float(projection @ np.linalg.solve(covariance, projection))
    return mean, max(variance, 1e-12), num - 1


def power_against(expected, alternative, n, *, alpha, min_expected=5.0) -> float:
    """Probability that the pooled Cressie–Read test (λ = 2/3) at level ``alpha`` rejects ``n`` draws from
    ``alternative`` (``expected`` being the exact law).

    Parameters
    ----------
    expected : array_like, float [K]
        The exact law (positive, sums to 1).
    alternative : array_like, float [K]
        The law actually sampled, over the same outcomes (zeros allowed).
    n : int
        Number of draws.
    alpha : float
        Level of the test, in (0, 1).
    min_expected : float, optional
        Pooling threshold of the test (default 5).

    Returns
    -------
    float
        The two-moment (Satterthwaite) approximation of the power; 0.0 when the pooled partition has one cell.

    Examples
    --------
    >>> p = [0.4, 0.3, 0.2, 0.1]
    >>> round(power_against(p, p, 1000, alpha=0.01), 3)  # no bug: the level
    0.01
    >>> power_against(p, [0.3, 0.3, 0.2, 0.2], 1000, alpha=1e-6) > 0.99
    True
    """
    p = as_expected(expected, "expected")
    q = _alternative(alternative, p.size)
    n = as_positive_int(n, "n")
    alpha = as_probability(alpha, "alpha")
    min_expected = as_positive_float(min_expected, "min_expected")
    mean, variance, df = _moments(p, q, n, min_expected)
    if df < 1:
        return 0.0
    critical = float(stats.chi2.isf(alpha, df))
    shape = 2.0 * mean**2 / variance
    return float(stats.chi2.sf(critical * shape / mean, shape))


def sample_size_against(expected, alternative, *, alpha, power=0.9, min_expected=5.0, max_n=10**9) -> int:
    """Smallest N (to 0.5 %, by doubling then bisection) at which :func:`power_against` reaches ``power``.

    Raises ``InvalidArgument`` when ``alternative`` equals ``expected`` on the pooled cells at every N up to
    ``max_n`` (a bug inside one pooled cell, which this test cannot see).

    Examples
    --------
    >>> p = [0.4, 0.3, 0.2, 0.1]
    >>> n = sample_size_against(p, [0.35, 0.3, 0.2, 0.15], alpha=1e-6)
    >>> 1000 < n < 5000
    True
    """
    p = as_expected(expected, "expected")
    q = _alternative(alternative, p.size)
    alpha, power = as_probability(alpha, "alpha"), as_probability(power, "power")
    if not alpha < power:
        raise InvalidArgument(f"power={power!r}: expected a value in (alpha, 1), e.g. power=0.9")
    max_n = as_positive_int(max_n, "max_n")

    def reaches(n: int) -> bool:
        return power_against(p, q, n, alpha=alpha, min_expected=min_expected) >= power

    high = 8
    while high <= max_n and not reaches(high):
        high *= 2
    if high <= max_n:
        low = high // 2  # power is below the target at low (or low < 8), reached at high: bisect to 0.5 %
        while high - low > max(1, high // 200):
            middle = (low + high) // 2
            low, high = (low, middle) if reaches(middle) else (middle, high)
        return high
    raise InvalidArgument(
        f"alternative={alternative!r}: the pooled test does not reach power={power!r} by max_n={max_n!r} draws "
        "(the bug may move mass only inside pooled cells); raise max_n or use the targeted tests"
    )
