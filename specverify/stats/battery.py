"""The per-scenario test battery and Holm's step-down procedure across scenarios."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_expected, as_probability
from specverify.stats.gof import GofResult, goodness_of_fit
from specverify.stats.prefix import PREFIX_FAMILIES, PrefixScoreResult, prefix_directions, prefix_score_test
from specverify.stats.targeted import (
    MaxCellResult,
    OutcomeResidual,
    SurprisalResult,
    max_cell_test,
    surprisal_test,
    worst_outcomes,
)
from specverify.stats.tv import TVResult, tv_estimate

__all__ = ["BatteryResult", "battery", "battery_directions", "side_pvalues", "holm", "BATTERY_TESTS"]

BATTERY_TESTS = ("cressie-read", "surprisal", "max-cell") + tuple(f"prefix-{family}" for family in PREFIX_FAMILIES)


@dataclass(frozen=True)
class BatteryResult:
    """Result of :func:`battery`.

    Attributes
    ----------
    passed : bool
        True when no test of the battery rejects at ``alpha_per_test``.
    tests : tuple of (str, float)
        ``(name, pvalue)`` for each test that ran, in the order of ``BATTERY_TESTS`` (the prefix tests run only
        with ``directions``).
    pvalue_min : float
        Smallest p-value of the battery.
    alpha_per_test : float
        ``alpha / len(BATTERY_TESTS)``: the level each test is run at (Bonferroni inside the battery; the split is
        the same whether or not the prefix tests ran, so a plan never depends on it).
    gof, surprisal, max_cell : GofResult, SurprisalResult, MaxCellResult
        The full results of the first three tests.
    prefix : tuple of PrefixScoreResult
        The prefix score tests (empty without ``directions``).
    tv : TVResult
        Plug-in TV beside its null distribution (reported, not used for ``passed``).
    worst : tuple of OutcomeResidual
        The five outcomes with the largest standardised residuals.
    """

    passed: bool
    tests: tuple[tuple[str, float], ...]
    pvalue_min: float
    alpha_per_test: float
    gof: GofResult
    surprisal: SurprisalResult
    max_cell: MaxCellResult
    tv: TVResult
    worst: tuple[OutcomeResidual, ...]
    prefix: tuple[PrefixScoreResult, ...] = ()


def battery_directions(outcomes, expected) -> dict:
    """``{family: D}`` of every prefix family for a law's ``outcomes``: computed once per law, passed to
    :func:`battery` and :func:`side_pvalues` at every look.

    Parameters
    ----------
    outcomes : sequence of (tokens, finish_reason)
        The law's outcomes (``ExactLaw.outcomes``).
    expected : array_like, float [K]
        Their exact probabilities.

    Returns
    -------
    dict or None
        ``{family: numpy.ndarray [K, d]}`` for every family of ``PREFIX_FAMILIES``; None above
        ``MAX_PREFIX_OUTCOMES`` outcomes (the prefix tests then do not run; the level stays split five ways).

    Notes
    -----
    See :func:`prefix_directions`; the cost is one pass over every step of every outcome (Python), so make it once.
    The dense directions take K × d floats (d about depth × vocabulary), hence the cap on K (every toy and
    checkpoint scenario has at most a few thousand outcomes).
    """
    if len(outcomes) > MAX_PREFIX_OUTCOMES:
        return None
    return {family: prefix_directions(outcomes, expected, family) for family in PREFIX_FAMILIES}


def side_pvalues(counts, expected, directions=None) -> tuple:
    """The fixed-N p-values of every test of the battery but the omnibus: what a sequential look adds to its omnibus.

    Parameters
    ----------
    counts : array_like, int [K]
        Counts at the look.
    expected : array_like, float [K]
        Exact law.
    directions : dict, optional
        From :func:`battery_directions`; without it the prefix tests do not run.

    Returns
    -------
    tuple of float
        In ``BATTERY_TESTS`` order: surprisal, max-cell, then the prefix tests.

    Notes
    -----
    Each is a fixed-N p-value, valid at one look; :func:`~specverify.stats.sequential.sequential_decision` spends
    the level over the looks. A look's level is tiny (α / (k m) spent over the looks), so the surprisal test counts
    only from the n at which its normal tail is within 2× there (``_surprisal_fits``: n ≥ (γ z³ / 6)² at z = 6, γ
    the skewness of the surprisal; before it, p = 1), and the prefix tests only on directions of effective count
    ≥ 1000 (:func:`~specverify.stats.prefix.prefix_score_test`).
    """
    surprisal = surprisal_test(counts, expected).pvalue if _surprisal_fits(counts, expected) else 1.0
    out = [surprisal, max_cell_test(counts, expected).pvalue]
    out += [r.pvalue for r in _prefix_tests(counts, expected, directions)]
    return tuple(float(p) for p in out)


MAX_PREFIX_OUTCOMES = 50_000  # above this many outcomes the prefix tests do not run (memory of the directions)
LOOK_Z = 6.0  # the normal quantile a look's level reaches (α of 1e-9 or so): where tail errors matter


def _surprisal_fits(counts, expected) -> bool:
    """Whether n is large enough for the surprisal test's normal tail at a look's tiny level: the relative error
    of the tail at z is about ``|γ| z³ / (6 √n)`` (γ the skewness of -log p(X)), at most 1 (a 2× tail) from
    ``n >= (γ z³ / 6)²`` at z = ``LOOK_Z``. A look before that does not count the test (p = 1): the omnibus and
    max-cell tests still decide it, and the scenario's later looks count it."""
    probs = np.asarray(expected, dtype=np.float64)
    surprisal = -np.log(probs)
    centred = surprisal - probs @ surprisal
    variance = float(probs @ centred**2)
    if variance <= 0:
        return True  # constant surprisal: the test returns p = 1 itself
    skew = float(probs @ centred**3) / variance**1.5
    return int(np.sum(counts)) >= (abs(skew) * LOOK_Z**3 / 6) ** 2


def _prefix_tests(counts, expected, directions) -> tuple:
    if directions is None:
        return ()
    if not isinstance(directions, dict) or set(directions) != set(PREFIX_FAMILIES):
        raise InvalidArgument(
            f"directions={directions!r:.80}; expected {{family: D}} for every family of {PREFIX_FAMILIES}: make it "
            "with battery_directions(outcomes, expected)."
        )
    return tuple(prefix_score_test(counts, expected, directions[f], family=f) for f in PREFIX_FAMILIES)


def battery(counts, expected, *, alpha, seed, min_expected=5.0, directions=None) -> BatteryResult:
    """Run the omnibus, surprisal, max-cell and prefix tests on one scenario's counts, Bonferroni-combined at ``alpha``.

    Parameters
    ----------
    counts : array_like, int [K]
        How many of the n samples hit each outcome.
    expected : array_like, float [K]
        Exact law over the same K outcomes.
    alpha : float
        Level of the whole battery for this scenario (e.g. from :func:`family_alpha_per_test` with ``num_tests=1``).
    seed : int or numpy.random.Generator
        Seed of the TV simulations (the tests themselves are deterministic).
    min_expected : float, optional
        Pooling threshold of the omnibus test (default 5).
    directions : dict, optional
        The law's prefix directions from :func:`battery_directions`; without them the prefix tests do not run (a
        law with no outcomes to read, e.g. a synthetic one) and the battery keeps its level split five ways.

    Returns
    -------
    BatteryResult

    Notes
    -----
    The tests are Cressie–Read λ = 2/3 on pooled cells (:func:`goodness_of_fit`), the mean-surprisal z test
    (:func:`surprisal_test`), the max-cell binomial test (:func:`max_cell_test`) and the two prefix score tests
    (:func:`prefix_score_test`: each position's token given its prefix, and its rank in the conditional law), each
    at ``alpha / len(BATTERY_TESTS)``: the battery's false-alarm rate is at most ``alpha`` under any dependence
    between them, as far as each test's own p-value is valid (see their Notes: pooled χ², the normal surprisal tail
    and the prefix tests' χ² are approximations at tiny α, which is why :func:`plan_sample_size` plans with a safety
    factor). ``tv`` and ``worst`` are descriptive.

    Examples
    --------
    >>> result = battery([300, 300, 400], [0.3, 0.3, 0.4], alpha=1e-3, seed=0)
    >>> result.passed, [name for name, _ in result.tests]
    (True, ['cressie-read', 'surprisal', 'max-cell'])
    >>> law = ([((0,), "length"), ((1,), "length")], [0.5, 0.5])
    >>> result = battery([50, 50], law[1], alpha=1e-3, seed=0, directions=battery_directions(*law))
    >>> [name for name, _ in result.tests][3:]
    ['prefix-token', 'prefix-rank']
    """
    alpha = as_probability(alpha, "alpha")
    expected = as_expected(expected)
    gof = goodness_of_fit(counts, expected, method="cressie-read", min_expected=min_expected)
    surprisal = surprisal_test(counts, expected)
    max_cell = max_cell_test(counts, expected)
    prefix = _prefix_tests(counts, expected, directions)
    pvalues = (gof.pvalue, surprisal.pvalue, max_cell.pvalue) + tuple(r.pvalue for r in prefix)
    tests = tuple(zip(BATTERY_TESTS, pvalues))
    alpha_per_test = alpha / len(BATTERY_TESTS)
    pvalue_min = min(pvalue for _, pvalue in tests)
    tv = tv_estimate(counts, expected, seed=seed)
    worst = tuple(worst_outcomes(counts, expected, k=5))
    passed = bool(pvalue_min > alpha_per_test)
    return BatteryResult(passed, tests, pvalue_min, alpha_per_test, gof, surprisal, max_cell, tv, worst, prefix)


def holm(pvalues, alpha) -> np.ndarray:
    """Holm's step-down procedure: which hypotheses survive at family-wise level ``alpha``.

    Parameters
    ----------
    pvalues : array_like, float [m]
        One p-value per hypothesis (e.g. per scenario), each in [0, 1].
    alpha : float
        Family-wise error rate in (0, 1).

    Returns
    -------
    numpy.ndarray, bool [m]
        True where the hypothesis is NOT rejected (the scenario passed).

    Notes
    -----
    Sort the p-values ascending; reject ``p_(i)`` while ``p_(i) <= alpha / (m - i + 1)`` (i from 1), stop at the
    first that fails; ties keep their input order. Controls the family-wise error rate at ``alpha`` under any
    dependence, and rejects everything Bonferroni rejects.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03, 0.005], 0.05).tolist()
    [False, True, True, False]
    """
    alpha = as_probability(alpha, "alpha")
    try:
        values = np.asarray(pvalues, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"pvalues={pvalues!r} is not numeric; pass a 1-D array of p-values.") from error
    if values.ndim != 1 or not np.all((values >= 0) & (values <= 1)):
        raise InvalidArgument(
            f"pvalues={pvalues!r}; expected a 1-D array of p-values in [0, 1] (no NaN). Check the tests that made them."
        )
    size = values.size
    order = np.argsort(values, kind="stable")
    thresholds = alpha / (size - np.arange(size))  # alpha / m, alpha / (m - 1), ..., alpha
    failing = values[order] > thresholds
    num_rejected = int(np.argmax(failing)) if failing.any() else size
    passed = np.ones(size, dtype=bool)
    passed[order[:num_rejected]] = False
    return passed
