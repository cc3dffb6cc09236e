"""Collision test for the joint law of independent requests (docs/design.md, verdict rule 3).

Identical unseeded requests are sent in disjoint pairs (2i, 2i+1). If the requests are independent, each pair's two
outcomes coincide with probability ``Σ p²`` under the exact law, independently across pairs, so the number of
colliding pairs is Binomial(num_pairs, Σ p²). Requests that share (or replay) an RNG stream keep each request's own
law exact but collide too often — only this test sees that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_expected, as_positive_int, as_probability

__all__ = ["CollisionResult", "collision_probability", "collision_test"]

_RELATIVE_TIE = 1e-7  # outcomes within this relative pmf of the observed one count as "as extreme"


@dataclass(frozen=True)
class CollisionResult:
    """Result of :func:`collision_test`.

    Attributes
    ----------
    statistic : int
        Observed number of colliding pairs.
    pvalue : float
        Exact two-sided binomial p-value.
    expected : float
        Expected number of colliding pairs, ``num_pairs * collision_prob``.
    num_pairs : int
        Number of disjoint pairs.
    collision_prob : float
        Per-pair collision probability under the null.
    """

    statistic: int
    pvalue: float
    expected: float
    num_pairs: int
    collision_prob: float


def collision_probability(expected) -> float:
    """Probability ``Σ p²`` that two independent draws from the exact law coincide.

    Parameters
    ----------
    expected : array_like, float [K]
        Exact law over the K outcomes of positive probability.

    Returns
    -------
    float

    Notes
    -----
    Exact (up to float rounding) for any law.

    Examples
    --------
    >>> round(collision_probability([0.5, 0.25, 0.25]), 9)
    0.375
    """
    expected = as_expected(expected)
    return float(math.fsum((expected * expected).tolist()))


def _first_true(predicate, low: int, high: int) -> int:
    """Smallest x in [low, high + 1] with predicate(x), for a predicate that is False then True on [low, high]."""
    while low <= high:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle - 1
        else:
            low = middle + 1
    return low


def binomial_two_sided_minlike(k: int, n: int, p: float) -> float:
    """Exact two-sided binomial p-value: the probability of every count no more likely than ``k`` under B(n, p).

    Counts whose probability is within a relative 1e-7 of ``P(X = k)`` count as equally likely (the convention of
    ``scipy.stats.binomtest``). Uses the unimodality of the pmf: the counts on the far side of the mean that are no
    more likely than ``k`` form a tail, found by bisection in log space (no underflow for extreme ``k``).
    """
    if p == 1.0:
        return 1.0 if k == n else 0.0
    mean = n * p
    if k == mean:
        return 1.0
    threshold = float(stats.binom.logpmf(k, n, p)) + math.log1p(_RELATIVE_TIE)

    def logpmf(x: int) -> float:
        return float(stats.binom.logpmf(x, n, p))

    if k < mean:  # pmf is non-increasing on [ceil(mean), n]: the as-extreme counts are a suffix
        start = _first_true(lambda x: logpmf(x) <= threshold, math.ceil(mean), n)
        pvalue = stats.binom.cdf(k, n, p) + stats.binom.sf(start - 1, n, p)
    else:  # pmf is non-decreasing on [0, floor(mean)]: the as-extreme counts are a prefix
        stop = _first_true(lambda x: logpmf(x) > threshold, 0, math.floor(mean)) - 1
        pvalue = (stats.binom.cdf(stop, n, p) if stop >= 0 else 0.0) + stats.binom.sf(k - 1, n, p)
    return float(min(1.0, pvalue))


def collision_test(num_pairs, num_collisions, collision_prob) -> CollisionResult:
    """Exact two-sided binomial test of the number of colliding pairs among disjoint pairs of identical requests.

    Parameters
    ----------
    num_pairs : int
        Number of disjoint pairs (2i, 2i+1) of identical unseeded requests (>= 1).
    num_collisions : int
        Pairs whose two outcomes are identical (0 .. num_pairs).
    collision_prob : float
        ``Σ p²`` of the exact law, in (0, 1] (see :func:`collision_probability`).

    Returns
    -------
    CollisionResult

    Notes
    -----
    Valid at every n and α: under independent requests the count is exactly Binomial(num_pairs, collision_prob),
    because the pairs are disjoint. (Overlapping pairs such as (i, i+1) would be dependent — don't.) The two-sided
    p-value sums the probabilities of all counts no more likely than the observed one, as ``scipy.stats.binomtest``
    does. Too many collisions indicate shared or replayed randomness; too few, a decoder that avoids repeats.

    Examples
    --------
    >>> result = collision_test(1000, 250, 0.25)
    >>> round(float(result.pvalue), 6), round(float(result.expected), 6)
    (1.0, 250.0)
    """
    num_pairs = as_positive_int(num_pairs, "num_pairs")
    num_collisions = as_positive_int(num_collisions, "num_collisions", minimum=0)
    if num_collisions > num_pairs:
        raise InvalidArgument(
            f"num_collisions={num_collisions!r} exceeds num_pairs={num_pairs!r}; count each disjoint pair at most once."
        )
    collision_prob = as_probability(collision_prob, "collision_prob", open_right=False)
    pvalue = binomial_two_sided_minlike(num_collisions, num_pairs, collision_prob)
    return CollisionResult(num_collisions, pvalue, num_pairs * collision_prob, num_pairs, collision_prob)
