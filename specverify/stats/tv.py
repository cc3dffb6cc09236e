"""Plug-in total-variation estimate beside its simulated null distribution, with an interval for the true TV."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_counts, as_expected, as_positive_int, as_probability

__all__ = ["TVResult", "tv_estimate"]

_CHUNK_ELEMENTS = 1 << 22  # multinomial rows per chunk * K: bounds memory for large K


@dataclass(frozen=True)
class TVResult:
    """Result of :func:`tv_estimate`.

    Attributes
    ----------
    estimate : float
        Plug-in TV ``½ Σ |counts / n - p|`` (biased upward by sampling noise, ~``null_mean`` when the law is exact).
    null_mean : float
        Mean of the plug-in TV over simulated samples of the same n from the exact law.
    null_quantile : float
        Its ``confidence`` quantile.
    pvalue : float
        Empirical ``(1 + #{null >= estimate}) / (n_sim + 1)``; never below ``1 / (n_sim + 1)``.
    interval : tuple of float
        ``(low, high)`` interval for the true TV, see :func:`tv_estimate` Notes.
    n : int
        Number of samples.
    n_sim : int
        Number of simulated samples behind ``null_mean``, ``null_quantile``, ``pvalue`` and ``interval``.
    confidence : float
        Confidence level of ``null_quantile`` and ``interval``.
    """

    estimate: float
    null_mean: float
    null_quantile: float
    pvalue: float
    interval: tuple[float, float]
    n: int
    n_sim: int
    confidence: float


def _tv_rows(frequencies: np.ndarray, law: np.ndarray) -> np.ndarray:  # [B, K], [K] -> [B]
    return 0.5 * np.abs(frequencies - law).sum(axis=-1)


def _simulated_tv(rng: np.random.Generator, n: int, source: np.ndarray, law: np.ndarray, n_sim: int) -> np.ndarray:
    """TV to ``law`` of the empirical frequencies of ``n_sim`` multinomial(n, source) samples: [n_sim]."""
    rows = max(1, _CHUNK_ELEMENTS // source.size)
    out = np.empty(n_sim)
    for start in range(0, n_sim, rows):
        size = min(rows, n_sim - start)
        draws = rng.multinomial(n, source, size=size)  # [size, K]
        out[start : start + size] = _tv_rows(draws / n, law)
    return out


def tv_estimate(counts, expected, *, seed, n_sim=200, confidence=0.95) -> TVResult:
    """Plug-in total variation between the observed frequencies and the exact law, with its null and an interval.

    Parameters
    ----------
    counts : array_like, int [K]
        How many of the n samples hit each outcome.
    expected : array_like, float [K]
        Exact law over the same K outcomes.
    seed : int or numpy.random.Generator
        Seed of the simulations (``numpy.random.default_rng(seed)``); the same seed gives the same result.
    n_sim : int, optional
        Number of simulated samples for the null and for the bootstrap (default 200).
    confidence : float, optional
        Level of ``null_quantile`` and ``interval`` (default 0.95).

    Returns
    -------
    TVResult

    Notes
    -----
    The null distribution is the plug-in TV of ``n_sim`` multinomial(n, expected) samples: exact up to Monte Carlo
    error, at any n. The p-value is a valid (conservative) Monte Carlo p-value, but its resolution is
    ``1 / (n_sim + 1)``: it is reported for context, not used for verdicts at small α.

    The interval uses the triangle inequality ``|TV(f, p) - TV(q, p)| ≤ TV(f, q)`` (f the observed frequencies, q the
    unknown true law): it is ``[max(0, t - u), min(1, t + u)]`` where t is the plug-in estimate and u bounds the
    sampling noise ``TV(f, q)`` at ``confidence``: the larger of ``null_quantile`` (noise if q ≈ p) and the same
    quantile of ``TV(f*, f)`` over a parametric bootstrap ``f* ~ multinomial(n, f) / n`` (noise if q ≈ f). Subtracting
    a noise quantile is the bias correction. Coverage is close to ``confidence`` when q = p (where the inequality is
    tight) and conservative otherwise; measured ≥ 0.92 for K up to 256, n ≥ 1000 and 200 simulations. Outcomes never
    observed make the bootstrap part too small; the null part guards against that when q is close to p. The interval
    is wide — about twice the noise floor ~ sqrt(K / n) — because TV itself cannot be estimated faster.

    Examples
    --------
    >>> result = tv_estimate([500, 500], [0.5, 0.5], seed=0, n_sim=50)
    >>> round(float(result.estimate), 6) + 0.0, round(float(result.interval[0]), 6) + 0.0
    (0.0, 0.0)
    """
    expected = as_expected(expected)
    counts = as_counts(counts, expected.size)
    n_sim = as_positive_int(n_sim, "n_sim")
    confidence = as_probability(confidence, "confidence")
    n = int(counts.sum())
    if n == 0:
        raise InvalidArgument("counts sum to n=0; expected at least one sample. Draw samples before testing.")
    rng = np.random.default_rng(seed)
    frequencies = counts / n  # [K]
    estimate = float(_tv_rows(frequencies, expected))
    null = _simulated_tv(rng, n, expected, expected, n_sim)  # [n_sim]
    noise = _simulated_tv(rng, n, frequencies, frequencies, n_sim)  # [n_sim]
    null_quantile = float(np.quantile(null, confidence))
    bound = max(null_quantile, float(np.quantile(noise, confidence)))
    interval = (max(0.0, estimate - bound), min(1.0, estimate + bound))
    pvalue = (1.0 + np.count_nonzero(null >= estimate)) / (n_sim + 1.0)
    return TVResult(estimate, float(null.mean()), null_quantile, float(pvalue), interval, n, n_sim, confidence)
