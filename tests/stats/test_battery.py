"""The per-scenario battery and Holm's step-down procedure."""

from __future__ import annotations

import numpy as np
import pytest

from specverify.errors import InvalidArgument
from specverify.stats import battery, holm

from ._laws import zipf_law


@pytest.mark.parametrize(
    ("pvalues", "alpha", "passed"),
    [
        # sorted .005 <= .05/4 reject; .01 <= .05/3 reject; .03 > .05/2 stop
        ([0.01, 0.04, 0.03, 0.005], 0.05, [False, True, True, False]),
        # .01 <= .05/3 reject; .03 > .025 stop: .04 survives although it is below .05
        ([0.01, 0.04, 0.03], 0.05, [False, True, True]),
        # all rejected: .01 <= .0167, .02 <= .025, .04 <= .05
        ([0.04, 0.01, 0.02], 0.05, [False, False, False]),
        # the smallest already fails its threshold: nothing rejected
        ([0.02, 0.03], 0.02, [True, True]),
        # ties: both .0125 <= .05/4 and .05/3
        ([0.0125, 0.0125, 0.9, 0.9], 0.05, [False, False, True, True]),
        ([], 0.05, []),
    ],
)
def test_holm_textbook_examples(pvalues, alpha, passed):
    assert holm(pvalues, alpha).tolist() == passed


def test_holm_rejects_at_least_what_bonferroni_rejects():
    pvalues = np.random.default_rng(0).uniform(0, 0.02, size=50)
    assert not np.any(holm(pvalues, 0.05) & (pvalues <= 0.05 / 50))


@pytest.mark.parametrize(("pvalues", "match"), [([0.1, 1.2], r"pvalues="), ([[0.1]], "1-D"), ([np.nan], "NaN")])
def test_holm_validation(pvalues, match):
    with pytest.raises(InvalidArgument, match=match):
        holm(pvalues, 0.05)
    with pytest.raises(InvalidArgument, match="alpha=0"):
        holm([0.5], 0)


def test_battery_passes_a_null_sample():
    law = zipf_law(100, 1.2)
    counts = np.random.default_rng(8).multinomial(20_000, law)
    result = battery(counts, law, alpha=1e-6, seed=1)
    assert result.passed
    assert [name for name, _ in result.tests] == ["cressie-read", "surprisal", "max-cell"]
    assert result.alpha_per_test == pytest.approx(1e-6 / 5, rel=1e-15)  # split five ways with or without prefix tests
    assert result.pvalue_min == min(p for _, p in result.tests)
    assert result.tests[0][1] == result.gof.pvalue and result.gof.method == "cressie-read"
    assert len(result.worst) == 5 and result.tv.n == 20_000


def test_battery_fails_a_temperature_bug_through_surprisal():
    law = zipf_law(100, 1.2)
    cold = law ** (1 / 0.8)
    cold /= cold.sum()
    counts = np.random.default_rng(9).multinomial(20_000, cold)
    result = battery(counts, law, alpha=1e-6, seed=1)
    assert not result.passed
    assert result.surprisal.pvalue <= result.alpha_per_test


def test_battery_fails_a_sparse_bug_through_max_cell():
    law = zipf_law(100, 1.2)
    counts = np.random.default_rng(10).multinomial(20_000, law)
    counts[97] += 60  # one rare outcome, ~13 expected, seen ~73 times
    result = battery(counts, law, alpha=1e-6, seed=1)
    assert not result.passed
    assert result.max_cell.index == 97 and result.max_cell.pvalue <= result.alpha_per_test
    assert result.worst[0].index == 97


def test_battery_is_reproducible_and_validates():
    law = np.array([0.3, 0.3, 0.4])
    assert battery([30, 30, 40], law, alpha=0.01, seed=3).tv == battery([30, 30, 40], law, alpha=0.01, seed=3).tv
    with pytest.raises(InvalidArgument, match="alpha=1.5"):
        battery([30, 30, 40], law, alpha=1.5, seed=3)


def test_a_look_counts_the_surprisal_test_only_where_its_normal_tail_holds():
    from specverify.stats import side_pvalues, surprisal_test

    law = zipf_law(100, 1.2)  # skewed surprisal: rare outcomes of large -log p
    cold = law ** (1 / 0.8)
    cold /= cold.sum()
    rng = np.random.default_rng(11)
    small, large = rng.multinomial(200, cold), rng.multinomial(20_000, cold)
    assert surprisal_test(small, law).pvalue < 0.5 and side_pvalues(small, law)[0] == 1.0  # not counted at n = 200
    assert side_pvalues(large, law)[0] == surprisal_test(large, law).pvalue <= 1e-6
    assert len(side_pvalues(large, law)) == 2  # no prefix tests without directions
