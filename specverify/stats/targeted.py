"""Tests aimed at bug shapes the omnibus χ² detects slowly, and the per-outcome residuals shown with every verdict.

* :func:`surprisal_test` — mean of -log p(X): ~4× more sample-efficient than χ² on temperature-like bugs (mass moved
  between likely and unlikely outcomes along the law's own ordering).
* :func:`max_cell_test` — the most extreme single outcome (exact binomial tails, Bonferroni over K): wins on sparse
  bugs that move mass to or from a few outcomes, including outcomes inside pooled cells.
* :func:`worst_outcomes` — the outcomes with the largest standardised residuals, for the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_counts, as_expected, as_positive_int

__all__ = [
    "SurprisalResult",
    "MaxCellResult",
    "OutcomeResidual",
    "surprisal_test",
    "max_cell_test",
    "worst_outcomes",
]


@dataclass(frozen=True)
class SurprisalResult:
    """Result of :func:`surprisal_test`.

    Attributes
    ----------
    statistic : float
        z score ``(mean_surprisal - null_mean) / null_std``.
    pvalue : float
        Two-sided normal tail ``2 Φ(-|z|)``.
    mean_surprisal : float
        Observed mean of ``-log p(X)`` over the n samples (nats).
    null_mean : float
        Its exact mean under the null: the entropy of ``expected`` (nats).
    null_std : float
        Exact standard deviation of the mean under the null, ``sqrt(Var[-log p(X)] / n)``.
    n : int
        Number of samples.
    """

    statistic: float
    pvalue: float
    mean_surprisal: float
    null_mean: float
    null_std: float
    n: int


@dataclass(frozen=True)
class MaxCellResult:
    """Result of :func:`max_cell_test`.

    Attributes
    ----------
    statistic : float
        Smallest per-outcome two-sided binomial p-value (unadjusted).
    pvalue : float
        ``min(1, K * statistic)`` (Bonferroni over the K outcomes).
    index : int
        The outcome that attains it (lowest index on ties).
    observed : int
        Its count.
    expected_count : float
        Its expected count ``n p``.
    """

    statistic: float
    pvalue: float
    index: int
    observed: int
    expected_count: float


@dataclass(frozen=True)
class OutcomeResidual:
    """One outcome's standardised residual (see :func:`worst_outcomes`)."""

    index: int
    observed: int
    expected_count: float
    residual: float


def _validated(counts, expected) -> tuple[np.ndarray, np.ndarray, int]:
    expected = as_expected(expected)
    counts = as_counts(counts, expected.size)
    n = int(counts.sum())
    if n == 0:
        raise InvalidArgument("counts sum to n=0; expected at least one sample. Draw samples before testing.")
    return counts, expected, n


def surprisal_test(counts, expected) -> SurprisalResult:
    """Two-sided z test of the mean surprisal ``-log p(X)`` of the samples against its exact null mean.

    Parameters
    ----------
    counts : array_like, int [K]
        How many of the n samples hit each outcome.
    expected : array_like, float [K]
        Exact law over the same K outcomes.

    Returns
    -------
    SurprisalResult

    Notes
    -----
    Under the null the n surprisals are iid with mean H (the entropy) and variance ``Σ p log² p - H²``, both exact;
    only the law of their mean is approximated by a normal. Valid for n ≥ 100 or so at moderate α. At very small α
    the normal tail is only as good as the skewness γ of ``-log p(X)`` allows: the relative error of the tail at
    z is about ``|γ| z³ / (6 √n)``, so prefer n in the tens of thousands (what :func:`plan_sample_size` gives at
    α ≈ 1e-6) when laws have rare outcomes of large surprisal. If every outcome has the same probability the mean
    surprisal is constant: ``statistic`` is 0 and ``pvalue`` 1.

    Examples
    --------
    >>> result = surprisal_test([60, 40], [0.6, 0.4])
    >>> round(float(result.statistic), 6) + 0.0, round(float(result.pvalue), 6)
    (0.0, 1.0)
    """
    counts, expected, n = _validated(counts, expected)
    surprisal = -np.log(expected)  # [K]
    null_mean = float(np.dot(expected, surprisal))
    variance = float(np.dot(expected, (surprisal - null_mean) ** 2))
    mean_surprisal = float(np.dot(counts, surprisal)) / n
    null_std = math.sqrt(variance / n)
    if np.ptp(surprisal) <= 1e-9:  # constant surprisal (uniform law): rounding noise only
        return SurprisalResult(0.0, 1.0, mean_surprisal, null_mean, null_std, n)
    z = (mean_surprisal - null_mean) / null_std
    pvalue = float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
    return SurprisalResult(float(z), pvalue, mean_surprisal, null_mean, null_std, n)


def binomial_two_sided(observed: np.ndarray, n: int, probs: np.ndarray) -> np.ndarray:  # [K], [K] -> [K]
    """Exact two-sided binomial p-value per outcome, ``min(1, 2 min(P(X <= x), P(X >= x)))`` (central method)."""
    lower = stats.binom.cdf(observed, n, probs)
    upper = stats.binom.sf(observed - 1, n, probs)
    return np.minimum(1.0, 2.0 * np.minimum(lower, upper))


def max_cell_test(counts, expected) -> MaxCellResult:
    """Most extreme single outcome: smallest exact two-sided binomial p-value, Bonferroni-adjusted over K outcomes.

    Parameters
    ----------
    counts : array_like, int [K]
        How many of the n samples hit each outcome.
    expected : array_like, float [K]
        Exact law over the same K outcomes.

    Returns
    -------
    MaxCellResult

    Notes
    -----
    Each count is exactly Binomial(n, p_i) under the null, and the two-sided p-value doubles the smaller exact tail
    (the central method: never anti-conservative). Bonferroni over the K outcomes keeps the level under any
    dependence, so the test is valid at every n and α, with no pooling — it sees outcomes that pooling merges. The
    price is conservatism when K is large; it has power for bugs concentrated on few outcomes, not diffuse ones.

    Examples
    --------
    >>> result = max_cell_test([50, 50], [0.5, 0.5])
    >>> round(float(result.pvalue), 6)
    1.0
    """
    counts, expected, n = _validated(counts, expected)
    pvalues = binomial_two_sided(counts, n, expected)  # [K]
    index = int(np.argmin(pvalues))
    smallest = float(pvalues[index])
    pvalue = min(1.0, expected.size * smallest)
    return MaxCellResult(smallest, pvalue, index, int(counts[index]), n * float(expected[index]))


def worst_outcomes(counts, expected, *, k=5) -> list[OutcomeResidual]:
    """The ``k`` outcomes with the largest absolute standardised residual ``(obs - n p) / sqrt(n p (1 - p))``.

    Parameters
    ----------
    counts : array_like, int [K]
        How many of the n samples hit each outcome.
    expected : array_like, float [K]
        Exact law over the same K outcomes.
    k : int, optional
        How many outcomes to return (default 5; at most K are returned).

    Returns
    -------
    list of OutcomeResidual
        Largest ``|residual|`` first; ties by lower index. Positive residual = over-represented.

    Notes
    -----
    Descriptive, not a test: the residuals are approximately standard normal under the null only when n p is large,
    and the largest of K is biased away from zero. Use :func:`max_cell_test` for a p-value. An outcome of probability
    1 has residual 0.

    Examples
    --------
    >>> [r.index for r in worst_outcomes([70, 30], [0.5, 0.5], k=1)]
    [0]
    """
    counts, expected, n = _validated(counts, expected)
    k = as_positive_int(k, "k")
    expected_counts = n * expected
    scale = np.sqrt(expected_counts * (1.0 - expected))
    with np.errstate(divide="ignore", invalid="ignore"):
        residuals = np.where(scale > 0, (counts - expected_counts) / scale, 0.0)  # [K]
    order = np.argsort(-np.abs(residuals), kind="stable")[:k]
    return [OutcomeResidual(int(i), int(counts[i]), float(expected_counts[i]), float(residuals[i])) for i in order]
