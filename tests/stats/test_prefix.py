"""Prefix score tests: centred directions, their null law, their power on a bug repeated at every prefix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats import (
    BATTERY_TESTS,
    battery,
    battery_directions,
    goodness_of_fit,
    plan_sequential,
    prefix_directions,
    prefix_score_test,
    sequential_decision,
)
from specverify.stats.prefix import PREFIX_FAMILIES


def tree_law(vocab=3, depth=3, seed=0, boost=0.0):
    """A law over every token sequence of ``depth`` tokens with its own conditional law at each prefix (seeded
    Dirichlet rows); ``boost`` moves that much conditional mass onto token 0 at every prefix."""
    rng = np.random.default_rng(seed)
    rows = {}
    outcomes, probs = [], []
    for tokens in itertools.product(range(vocab), repeat=depth):
        p = 1.0
        for t in range(depth):
            prefix = tokens[:t]
            if prefix not in rows:
                rows[prefix] = rng.dirichlet(np.full(vocab, 2.0))
            row = rows[prefix] * (1 - boost)
            row[0] += boost
            p *= row[tokens[t]]
        outcomes.append((tokens, "length"))
        probs.append(p)
    probs = np.asarray(probs)
    return outcomes, probs / probs.sum()


@pytest.mark.parametrize("family", PREFIX_FAMILIES)
def test_directions_are_centred_under_the_law(family):
    outcomes, probs = tree_law()
    directions = prefix_directions(outcomes, probs, family)
    assert directions.shape[0] == len(outcomes)
    assert np.abs(probs @ directions).max() < 1e-12


def test_a_single_child_prefix_adds_nothing():
    outcomes = [((0, 1), "length"), ((1, 1), "length")]  # the second token is forced: only the first step counts
    directions = prefix_directions(outcomes, [0.25, 0.75], "token")
    assert np.count_nonzero(np.abs(directions).sum(axis=0) > 1e-12) == 2  # token 0 and token 1 at depth 0


@pytest.mark.parametrize("family", PREFIX_FAMILIES)
def test_null_pvalues_are_uniform(family):
    outcomes, probs = tree_law(seed=1)
    directions = prefix_directions(outcomes, probs, family)
    counts = np.random.default_rng(2).multinomial(5_000, probs, size=2_000)
    pvalues = np.array([prefix_score_test(c, probs, directions).pvalue for c in counts])
    # Kolmogorov–Smirnov against U(0, 1): a seeded draw, rejected only at 1e-6
    assert stats.kstest(pvalues, "uniform").pvalue > 1e-6
    assert prefix_score_test(counts[0], probs, directions).df >= 2


def test_a_bug_at_every_prefix_is_caught_by_the_token_family_before_the_omnibus():
    outcomes, probs = tree_law(vocab=4, depth=4, seed=3)
    _, buggy = tree_law(vocab=4, depth=4, seed=3, boost=0.01)
    directions = battery_directions(outcomes, probs)
    rejected = {"prefix-token": 0, "cressie-read": 0}
    rng = np.random.default_rng(4)
    for counts in rng.multinomial(40_000, buggy, size=50):
        result = battery(counts, probs, alpha=1e-3, seed=0, directions=directions)
        pvalues = dict(result.tests)
        for name in rejected:
            rejected[name] += pvalues[name] <= result.alpha_per_test
    # 256 outcomes: the omnibus spreads the bug over ~200 pooled cells, the token family adds it up over 12 df
    # (seeded: 39 of 50 against 6 of 50)
    assert rejected["prefix-token"] >= 30 and rejected["cressie-read"] <= 20


def test_battery_runs_the_prefix_tests_with_directions():
    outcomes, probs = tree_law()
    counts = np.random.default_rng(5).multinomial(2_000, probs)
    result = battery(counts, probs, alpha=1e-6, seed=0, directions=battery_directions(outcomes, probs))
    assert [name for name, _ in result.tests] == list(BATTERY_TESTS)
    assert [r.family for r in result.prefix] == list(PREFIX_FAMILIES)
    assert result.alpha_per_test == pytest.approx(1e-6 / len(BATTERY_TESTS), rel=1e-15)


def test_battery_size_of_the_certifier_is_the_battery():
    from specverify.certification.run.context import BATTERY_SIZE

    assert BATTERY_SIZE == len(BATTERY_TESTS)


def test_sequential_decision_rejects_on_another_test():
    law = np.full(4, 0.25)
    plan = plan_sequential(law, 0.2, alpha=1e-3, looks=4)
    counts = [15, 14, 14, 14]
    assert sequential_decision(plan, counts, 0).status != "reject"
    decision = sequential_decision(plan, counts, 0, others=(0.5, 1e-9))
    assert decision.status == "reject" and decision.pvalue <= plan.alpha
    with pytest.raises(InvalidArgument, match="others="):
        sequential_decision(plan, counts, 0, others=(1.5,))


def test_validation():
    outcomes, probs = tree_law()
    with pytest.raises(InvalidArgument, match="family="):
        prefix_directions(outcomes, probs, "bogus")
    with pytest.raises(InvalidArgument, match="outcomes has"):
        prefix_directions(outcomes[:-1], probs, "token")
    directions = prefix_directions(outcomes, probs, "rank")
    with pytest.raises(InvalidArgument, match="directions has shape"):
        prefix_score_test(np.ones(len(probs), dtype=int), probs, directions[:-1])
    with pytest.raises(InvalidArgument, match="n=0"):
        prefix_score_test(np.zeros(len(probs), dtype=int), probs, directions)
    with pytest.raises(InvalidArgument, match="directions="):
        battery(np.ones(len(probs), dtype=int), probs, alpha=1e-3, seed=0, directions={"token": directions})


def test_omnibus_reference_is_unchanged_by_directions():
    outcomes, probs = tree_law()
    counts = np.random.default_rng(6).multinomial(3_000, probs)
    with_prefix = battery(counts, probs, alpha=1e-3, seed=0, directions=battery_directions(outcomes, probs))
    assert with_prefix.gof.statistic == goodness_of_fit(counts, probs).statistic


def rare_token_law():
    """vocab 4, depth 3, each prefix's row Dirichlet(0.3): many tokens of conditional probability below 1 %."""
    rng = np.random.default_rng(0)
    rows, outcomes, probs = {}, [], []
    for tokens in itertools.product(range(4), repeat=3):
        p = 1.0
        for t in range(3):
            if tokens[:t] not in rows:
                rows[tokens[:t]] = rng.dirichlet(np.full(4, 0.3))
            p *= rows[tokens[:t]][tokens[t]]
        if p > 1e-12:
            outcomes.append((tokens, "length"))
            probs.append(p)
    probs = np.asarray(probs)
    return outcomes, probs / probs.sum()


def test_rare_directions_are_left_out_so_the_level_holds():
    outcomes, probs = rare_token_law()
    directions = prefix_directions(outcomes, probs, "token")
    counts = np.random.default_rng(1).multinomial(3_000, probs, size=4_000)

    def rejections(**kwargs):
        return sum(prefix_score_test(c, probs, directions, **kwargs).pvalue <= 0.01 for c in counts)

    # 40 expected at level 0.01; the binomial's 1e-6 upper quantile is 73. Seeded: 47 with the guard, 104 without
    # it (a token seen a few times, standardised by its tiny variance, has a Poisson tail)
    assert rejections() <= 73
    assert rejections(min_effective=0.0) > 73
    with pytest.raises(InvalidArgument, match="min_effective="):
        prefix_score_test(counts[0], probs, directions, min_effective=-1)


def test_no_prefix_tests_above_the_outcome_cap(monkeypatch):
    import sys

    battery_module = sys.modules["specverify.stats.battery"]  # the package's `battery` is the function
    outcomes, probs = tree_law()
    monkeypatch.setattr(battery_module, "MAX_PREFIX_OUTCOMES", len(outcomes) - 1)
    assert battery_directions(outcomes, probs) is None
    result = battery(np.random.default_rng(0).multinomial(500, probs), probs, alpha=1e-3, seed=0, directions=None)
    assert [name for name, _ in result.tests] == list(BATTERY_TESTS[:3])
