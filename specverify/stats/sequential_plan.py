"""Planning a group-sequential goodness-of-fit design: look schedule, α- and β-spending, boundaries.

:func:`plan_sequential` makes the :class:`SequentialPlan` that :func:`specverify.stats.sequential_decision` drives
look by look (see :mod:`specverify.stats.sequential` for the decision rule).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_expected, as_positive_float, as_positive_int, as_probability
from specverify.stats.gof import _lambda_for, _pool
from specverify.stats.power import _chi2_isf, _ncx2_ppf, noncentrality_needed, plan_sample_size

__all__ = ["SequentialPlan", "plan_sequential"]


@dataclass(frozen=True, eq=False)
class SequentialPlan:
    """A group-sequential design made by :func:`plan_sequential`; one entry per look in every tuple.

    Attributes
    ----------
    schedule : tuple of int
        Cumulative number of samples at each look, increasing; ``schedule[-1]`` is the most a scenario draws.
    alpha_spent : tuple of float
        Level ``α_k`` of each look's test; they sum to ``alpha``.
    beta_spent : tuple of float
        Share ``β_k`` of the type II error spent on an early pass at each look (0 where no pass is allowed); with
        the last look's share they sum to ``1 - power``.
    reject_thresholds : tuple of float
        Reject when the look's statistic exceeds this (the χ²(df) upper ``α_k`` quantile).
    pass_thresholds : tuple of float
        Pass when the look's statistic is at most this (``-inf`` where no pass is allowed; the last look's equals its
        rejection threshold, so it always decides).
    dfs : tuple of int
        Degrees of freedom of each look's statistic.
    cells : tuple of numpy.ndarray
        Cell id of every outcome at each look (int64 [K], read-only). Looks from ``first_pass_look`` on share the
        reference partition.
    first_pass_look : int
        Index of the first look that may pass; the looks before it can only reject.
    fixed_n : int
        :func:`plan_sample_size` for the same arguments: the fixed design this one replaces.
    expected : numpy.ndarray
        The exact law (float64 [K], read-only).
    epsilon, alpha, power, lambda_, min_expected, safety : float
        The arguments of :func:`plan_sequential`.
    """

    schedule: tuple[int, ...]
    alpha_spent: tuple[float, ...]
    beta_spent: tuple[float, ...]
    reject_thresholds: tuple[float, ...]
    pass_thresholds: tuple[float, ...]
    dfs: tuple[int, ...]
    cells: tuple[np.ndarray, ...] = field(repr=False)
    first_pass_look: int
    fixed_n: int
    expected: np.ndarray = field(repr=False)
    epsilon: float
    alpha: float
    power: float
    lambda_: float
    min_expected: float
    safety: float

    @property
    def num_looks(self) -> int:
        """Number of looks."""
        return len(self.schedule)

    @property
    def max_n(self) -> int:
        """Samples drawn when no early look decides (the last entry of ``schedule``)."""
        return self.schedule[-1]


def _check_design_args(looks, first_look, final_share) -> tuple[int, int, float]:
    looks = as_positive_int(looks, "looks")
    first_look = as_positive_int(first_look, "first_look")
    ok = isinstance(final_share, numbers.Real) and not isinstance(final_share, bool) and 0.0 < final_share <= 1.0
    if not ok:
        raise InvalidArgument(
            f"final_share={final_share!r}; expected a real number in (0, 1]: the share of alpha and of 1 - power kept "
            "for the last look (1 spends nothing early, so only the last look decides)."
        )
    return looks, first_look, float(final_share)


def _num_cells(expected: np.ndarray, n: int, min_expected: float) -> int:
    return int(_pool(expected, float(n), min_expected).max()) + 1


def _max_n(expected, epsilon, looks, level, power, min_expected) -> int:
    """Smallest N whose last look, on the partition pooled at N / looks, has the planned power (as plan_sample_size)."""
    scale = 4.0 * epsilon**2
    n = max(looks, math.ceil(noncentrality_needed(1, level, power) / scale))
    for _ in range(expected.size + 64):  # each step refines the reference partition, at most K - 1 times
        df = _num_cells(expected, math.ceil(n / looks), min_expected) - 1
        needed = math.ceil(noncentrality_needed(df, level, power) / scale) if df >= 1 else 2 * n
        if needed <= n:
            return n
        n = needed
    return n


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def plan_sequential(
    expected,
    epsilon,
    *,
    alpha,
    power=0.9,
    looks=10,
    first_look=500,
    final_share=0.5,
    lambda_=2 / 3,
    min_expected=5.0,
    safety=4.0,
) -> SequentialPlan:
    """Plan a group-sequential test of an exact law that stops at the first decisive look.

    Parameters
    ----------
    expected : array_like, float [K]
        Exact law over the K outcomes of positive probability.
    epsilon : float
        Total variation to detect, in (0, 1], on the reference partition (see Notes).
    alpha : float
        False-alarm rate of the whole design, every look together (the level the fixed test would run at).
    power : float, optional
        Probability of rejecting any alternative at pooled TV ``epsilon`` or more (default 0.9).
    looks : int, optional
        Number of equally spaced looks that may pass, the last at ``max_n`` (default 10).
    first_look : int, optional
        Size of the first rejection-only look; such looks double in size until the first pass look (default 500).
        They make a decoder that is far off fail within a few thousand samples.
    final_share : float, optional
        Share of ``alpha`` and of ``1 - power`` kept for the last look (default 0.5); the rest is split equally over
        the earlier looks (α over every earlier look, β over the earlier pass looks).
    lambda_ : float, optional
        Cressie–Read exponent of the statistic (default 2/3, as :func:`goodness_of_fit`).
    min_expected : float, optional
        Pooling threshold (default 5): every look's cells have at least this expected count.
    safety : float, optional
        The last look is planned at level ``alpha_last / safety`` (default 4, as :func:`plan_sample_size`); the
        tests themselves run at the spent levels.

    Returns
    -------
    SequentialPlan

    Notes
    -----
    **Looks.** Pass looks are at ``n_k = ceil(k max_n / looks)``, k = 1..looks; before them come rejection-only looks
    of ``first_look``, ``2 first_look``, ... samples while they stay below ``n_1 / 1.5``. ``max_n`` is the smallest N
    with ``4 N ε² >= λ*(df_R, α_last / safety, 1 - β_last)`` (:func:`noncentrality_needed`), ``α_last = final_share
    α`` and ``β_last = final_share (1 - power)``: typically 1.1–1.2 × :func:`plan_sample_size`.

    **Partition.** The pass looks all use one reference partition R, :func:`pooled_cells` at ``n_1``, so that every
    cell's expected count is at least ``min_expected`` at every pass look. The rejection-only looks use the
    partition pooled at their own N. Power is claimed for TV measured on R, which is coarser than the fixed plan's
    partition at ``fixed_n`` when the law has many small outcomes: a bug that only moves mass inside a cell of R can
    pass early.

    **False alarms.** Look k rejects when its p-value (upper χ²(df) tail of the pooled statistic, as in
    :func:`goodness_of_fit`) is at most ``α_k``, with ``Σ α_k = alpha``. By the union bound the chance that any
    look rejects an exact decoder is at most ``alpha`` whatever the correlation between looks and whatever an
    early pass stops, as far as each look's χ² p-value is valid (the same large-n approximation as the fixed test,
    measured within 2× of nominal at α = 1e-6).

    **Power.** For an alternative whose TV on R is at least ε, the pooled statistic at look k is approximately
    noncentral χ²(df_R, λ) with ``λ >= 4 n_k ε²`` (Cauchy–Schwarz, see :func:`plan_sample_size`), and it is
    stochastically increasing in λ. Look k < last passes when the statistic is at most the ``β_k`` quantile of
    ncχ²(df_R, 4 n_k ε²) (capped at the rejection threshold), so it passes such an alternative with probability at
    most ``β_k``; the last look passes it with probability at most ``β_last`` by the choice of ``max_n``. By the
    union bound the design rejects it with probability at least ``power``. Both bounds are conservative: looks are
    strongly correlated, so the measured rates are lower.

    Examples
    --------
    >>> plan = plan_sequential(np.full(64, 1 / 64), 0.05, alpha=1e-6)
    >>> plan.schedule[:3], plan.first_pass_look, plan.num_looks
    ((500, 1139, 2277), 1, 11)
    >>> bool(plan.fixed_n < plan.max_n < 1.3 * plan.fixed_n), round(sum(plan.alpha_spent) / 1e-6, 9)
    (True, 1.0)
    """
    expected = as_expected(expected)
    epsilon = as_probability(epsilon, "epsilon", open_right=False)
    alpha = as_probability(alpha, "alpha")
    power = as_probability(power, "power")
    looks, first_look, final_share = _check_design_args(looks, first_look, final_share)
    lambda_ = _lambda_for("cressie-read", lambda_)
    min_expected = as_positive_float(min_expected, "min_expected")
    safety = as_positive_float(safety, "safety")
    if safety < 1.0:
        raise InvalidArgument(f"safety={safety!r}; expected >= 1 (the last look is planned at level alpha / safety).")
    fixed_n = plan_sample_size(expected, epsilon, alpha=alpha, power=power, min_expected=min_expected, safety=safety)
    beta = 1.0 - power
    common = dict(fixed_n=fixed_n, expected=_frozen(expected.copy()), epsilon=epsilon, alpha=alpha, power=power)
    common.update(lambda_=lambda_, min_expected=min_expected, safety=safety)
    if expected.size == 1:  # every sample lands on the only outcome: nothing to test on the support
        cells = (_frozen(np.zeros(1, dtype=np.int64)),)
        return SequentialPlan((fixed_n,), (alpha,), (0.0,), (math.inf,), (math.inf,), (0,), cells, 0, **common)

    early_share = 1.0 - final_share
    beta_last = beta if looks == 1 else beta * final_share
    max_n = _max_n(expected, epsilon, looks, alpha * final_share / safety, 1.0 - beta_last, min_expected)
    main = [math.ceil(k * max_n / looks) for k in range(1, looks + 1)]
    early = []
    while first_look * 2 ** len(early) * 1.5 <= main[0]:
        early.append(first_look * 2 ** len(early))
    schedule = early + main
    num_early, num_looks = len(early), len(early) + looks
    if num_looks == 1:
        alpha_spent = [alpha]
    else:
        alpha_spent = [alpha * early_share / (num_looks - 1)] * (num_looks - 1) + [alpha * final_share]
    beta_spent = [0.0] * num_early + [beta * early_share / max(looks - 1, 1)] * (looks - 1) + [beta_last]

    reference = _pool(expected, float(main[0]), min_expected)
    cells = [_pool(expected, float(n), min_expected) for n in early] + [reference] * looks
    dfs = [int(c.max()) for c in cells]
    reject = [_chi2_isf(a, df) if df > 0 else math.inf for a, df in zip(alpha_spent, dfs)]
    passing = [-math.inf] * num_early
    for k in range(looks - 1):
        n, b, df = schedule[num_early + k], beta_spent[num_early + k], dfs[num_early + k]
        bound = _ncx2_ppf(b, df, 4.0 * n * epsilon**2) if df > 0 else -math.inf
        passing.append(min(bound, reject[num_early + k]))
    passing.append(reject[-1])
    cells = tuple(_frozen(c) for c in cells)
    return SequentialPlan(
        tuple(schedule),
        tuple(alpha_spent),
        tuple(beta_spent),
        tuple(reject),
        tuple(passing),
        tuple(dfs),
        cells,
        num_early,
        **common,
    )
