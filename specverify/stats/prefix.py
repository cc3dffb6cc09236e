"""Score tests on the law of each position given its prefix, pooled over draws and prefixes.

An outcome is a path through a tree: each step picks one child (a token, or the end of the outcome) of the prefix
node it stands at, with the exact conditional probability ``π(child | prefix)`` that the law's leaf probabilities
define. A feature ``g(prefix, child)`` centred by its conditional mean at every step, ``g - Σ_c π(c | prefix) g(c)``,
has mean zero given everything before it, so its sum over the steps of one outcome, ``D_i``, is a vector with
``Σ_i p_i D_i = 0`` exactly. For n iid draws the statistic ``S = Σ_i counts_i D_i`` then has mean 0 and covariance
``n Σ_i p_i D_i D_iᵀ`` exactly, and :func:`prefix_score_test` compares ``Sᵀ (n Σ)⁺ S`` with χ²(rank) (multivariate
central limit over the n draws). One test is a handful of such directions, so its df is small where the omnibus test's
is hundreds of pooled outcomes: a bug that moves each position's law the same way at many prefixes adds its evidence
up over the prefixes instead of spreading it over the outcomes.

Directions (``PREFIX_FAMILIES``):

* ``"token"`` — one indicator per (depth, child): the law of each position's token given its prefix, pooled
  over the prefixes of that depth (the observed count of token v at depth j against the sum over draws of
  ``π(v | prefix)``); a bug that favours or starves a token wherever it is drafted, recovered or bonus.
* ``"rank"`` — per depth, the mid-PIT of the chosen child in the order of decreasing conditional probability (mass
  moved to or from the likely children: temperature, greedy leaks, residuals that skip small mass) and the indicator
  of the most likely child.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_counts, as_expected

__all__ = ["PrefixScoreResult", "PREFIX_FAMILIES", "prefix_directions", "prefix_score_test", "END"]

PREFIX_FAMILIES = ("token", "rank")
END = ("<end>",)  # the child symbol of "the outcome ends here" (a tuple: never equal to a token id)
RANK_TOL = 1e-9  # eigenvalues below this fraction of the largest are treated as 0 (directions the law fixes)
MIN_EFFECTIVE = 1000.0  # a direction is tested only where n × its null variance reaches this (see prefix_score_test)


@dataclass(frozen=True)
class PrefixScoreResult:
    """Result of :func:`prefix_score_test`.

    Attributes
    ----------
    statistic : float
        ``Sᵀ (n Σ)⁺ S``: squared length of the standardised score.
    pvalue : float
        Upper tail of χ²(``df``) at ``statistic``.
    df : int
        Rank of the directions' null covariance.
    n : int
        Number of samples.
    family : str
        Which directions (one of ``PREFIX_FAMILIES``).
    """

    statistic: float
    pvalue: float
    df: int
    n: int
    family: str


def _paths(outcomes) -> list:
    """Each outcome's steps as symbols: its tokens, then END (an outcome is ``(tokens, finish_reason)``)."""
    try:
        return [tuple(tokens) + (END,) for tokens, _reason in outcomes]
    except (TypeError, ValueError) as error:
        raise InvalidArgument(
            f"outcomes={outcomes!r:.80}; expected a sequence of (tokens, finish_reason) pairs (ExactLaw.outcomes)."
        ) from error


def _children(paths, probs) -> dict:
    """``{prefix: {child: mass}}`` over every prefix of every path (mass: the law's probability below it)."""
    tree: dict = {}
    for path, p in zip(paths, probs):
        for depth, child in enumerate(path):
            node = tree.setdefault(path[:depth], {})
            node[child] = node.get(child, 0.0) + p
    return tree


def _features(family: str, depth: int, ranked: list, conditional: dict, columns: dict) -> dict:
    """``{child: {column: value}}``: the uncentred feature ``g(prefix, child)`` of every child of one node."""
    if family == "token":
        return {c: {columns.setdefault(("token", depth, c), len(columns)): 1.0} for c in ranked}
    rank_col = columns.setdefault(("pit", depth), len(columns))
    top_col = columns.setdefault(("top", depth), len(columns))
    out, below = {}, 0.0
    for position, child in enumerate(ranked):
        mid = below + conditional[child] / 2  # mid-PIT: mean 1/2 at every node whatever its law
        out[child] = {rank_col: mid, top_col: 1.0 if position == 0 else 0.0}
        below += conditional[child]
    return out


def _centred(features: dict, conditional: dict) -> dict:
    """``{child: {column: g(child) - Σ_c π_c g(c)}}`` of one node."""
    mean: dict = {}
    for child, feature in features.items():
        for col, value in feature.items():
            mean[col] = mean.get(col, 0.0) + conditional[child] * value
    out = {}
    for child, feature in features.items():
        row = {col: -value for col, value in mean.items()}
        for col, value in feature.items():
            row[col] += value
        out[child] = row
    return out


def prefix_directions(outcomes, expected, family) -> np.ndarray:  # K outcomes -> float64 [K, d]
    """The centred score directions ``D`` (one row per outcome) of one family; see the module docstring.

    Parameters
    ----------
    outcomes : sequence of (tokens, finish_reason)
        The law's outcomes (``ExactLaw.outcomes``), aligned with ``expected``.
    expected : array_like, float [K]
        Their exact probabilities.
    family : str
        One of ``PREFIX_FAMILIES``.

    Returns
    -------
    numpy.ndarray, float64 [K, d]
        ``Σ_i expected_i D_i = 0`` up to rounding.

    Notes
    -----
    The conditional laws come from the leaf probabilities alone (a prefix's mass is the sum of the outcomes below
    it), so the directions are exact whatever model made the law. Steps at a prefix with a single child (a forced
    token, a certain end) contribute nothing. A child's rank orders the conditional law by decreasing probability,
    ties by the child's ``repr``.

    Examples
    --------
    >>> D = prefix_directions([((0,), "length"), ((1,), "length")], [0.5, 0.5], "rank")
    >>> D.shape, np.allclose(D.sum(axis=0), 0)
    ((2, 2), True)
    """
    expected = as_expected(expected)
    if family not in PREFIX_FAMILIES:
        raise InvalidArgument(f"family={family!r}; expected one of {PREFIX_FAMILIES}.")
    paths = _paths(outcomes)
    if len(paths) != expected.size:
        raise InvalidArgument(
            f"outcomes has {len(paths)} entries but expected has {expected.size}; pass the law's outcomes and probs."
        )
    tree = _children(paths, expected)
    columns: dict = {}
    steps = {}  # prefix -> {child: centred feature}, for the prefixes with two children or more
    for prefix, masses in tree.items():
        if len(masses) < 2:
            continue
        total = sum(masses.values())
        conditional = {c: m / total for c, m in masses.items()}
        ranked = sorted(conditional, key=lambda c: (-conditional[c], repr(c)))
        steps[prefix] = _centred(_features(family, len(prefix), ranked, conditional, columns), conditional)
    rows = []
    for path in paths:
        row: dict = {}
        for depth, child in enumerate(path):
            node = steps.get(path[:depth])
            if node is None:
                continue
            for col, value in node[child].items():
                row[col] = row.get(col, 0.0) + value
        rows.append(row)
    directions = np.zeros((len(paths), max(1, len(columns))))
    for i, row in enumerate(rows):
        for col, value in row.items():
            directions[i, col] = value
    return directions


def prefix_score_test(
    counts, expected, directions, *, family="directions", min_effective=MIN_EFFECTIVE
) -> PrefixScoreResult:
    """χ² test of the pooled score ``S = countsᵀ D`` against its exact null mean 0 and covariance ``n DᵀPD``.

    Parameters
    ----------
    counts : array_like, int [K]
        How many of the n samples hit each outcome.
    expected : array_like, float [K]
        Exact law over the same K outcomes.
    directions : array_like, float [K, d]
        Centred directions, e.g. from :func:`prefix_directions` (``Σ_i expected_i D_i = 0``).
    family : str, optional
        Label carried into the result.
    min_effective : float, optional
        A direction (eigenvector of the null covariance) is tested only where ``n`` times its variance reaches this
        (default ``MIN_EFFECTIVE``, 1000): see Notes.

    Returns
    -------
    PrefixScoreResult

    Notes
    -----
    Under the null S is a sum of n iid vectors with exact mean 0 and covariance ``Σ = Σ_i p_i D_i D_iᵀ``; the
    statistic uses Σ's eigenvectors whose eigenvalue λ is non-negligible (``RANK_TOL``) and large enough that
    ``n λ >= min_effective``, so its df is their number (it grows with n, as pooling does for the omnibus test),
    and it is χ²(df) in the large-n limit. Only that limit is approximated, and its tail at tiny α is only as good
    as the skewness of each direction allows: the features of the families take values in an interval of length
    about 1, so ``n λ`` is an effective count of the rarer side of a direction (a token of conditional probability
    0.01 seen at 100 prefixes gives n λ ≈ 1), and a rare event standardised by a small variance would have a
    Poisson tail, far heavier than the normal one at z ≈ 6 (10× the two-sided normal tail at a count of 100). At
    ``n λ >= 1000`` the upper tail of a Poisson count at z = 6 is 2.9× the normal one and its lower tail lighter, so
    the two-sided level is within 1.6× of nominal in the worst (single, Poisson-like) direction: inside the 2× the
    planning's safety factor allows for. Measured on a law with rare tokens (``tests/stats/test_prefix.py``): 47
    rejections of 4,000 null draws at level 0.01 with the guard, 104 without it.
    No direction qualifies: statistic 0, p-value 1, df 0.

    Examples
    --------
    >>> D = prefix_directions([((0,), "length"), ((1,), "length")], [0.5, 0.5], "rank")
    >>> round(prefix_score_test([50, 50], [0.5, 0.5], D).pvalue, 6)
    1.0
    """
    expected = as_expected(expected)
    counts = as_counts(counts, expected.size)
    directions = np.asarray(directions, dtype=np.float64)
    if directions.ndim != 2 or directions.shape[0] != expected.size:
        raise InvalidArgument(
            f"directions has shape {directions.shape}; expected [K, d] with K = {expected.size} (one row per outcome)."
        )
    n = int(counts.sum())
    if n == 0:
        raise InvalidArgument("counts sum to n=0; expected at least one sample. Draw samples before testing.")
    if not (isinstance(min_effective, (int, float)) and not isinstance(min_effective, bool) and min_effective >= 0):
        raise InvalidArgument(f"min_effective={min_effective!r}; expected a number >= 0 (an effective count).")
    covariance = directions.T @ (directions * expected[:, None])  # [d, d]
    values, vectors = np.linalg.eigh(covariance)
    keep = (values > RANK_TOL * max(float(values.max(initial=0.0)), 1e-300)) & (n * values >= min_effective)
    if not keep.any():
        return PrefixScoreResult(0.0, 1.0, 0, n, family)
    score = (counts @ directions) @ vectors[:, keep]  # [r]
    statistic = float(np.sum(score**2 / values[keep]) / n)
    df = int(keep.sum())
    pvalue = float(stats.chi2.sf(statistic, df)) if math.isfinite(statistic) else 0.0
    return PrefixScoreResult(statistic, pvalue, df, n, family)
