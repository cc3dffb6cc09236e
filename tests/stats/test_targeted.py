"""Surprisal, max-cell and residuals, against values computed by hand or from scipy's one-sided tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats import max_cell_test, surprisal_test, worst_outcomes

from ._laws import zipf_law


def test_surprisal_by_hand():
    # surprisals log2 * [1, 2, 2]; entropy 1.5 log2; variance (0.5 + 2 - 2.25) log²2 = 0.25 log²2
    # observed mean (40 + 2 * 60) / 100 log2 = 1.6 log2; z = 0.1 / sqrt(0.25 / 100) = 2
    result = surprisal_test([40, 30, 30], [0.5, 0.25, 0.25])
    assert result.statistic == pytest.approx(2.0, rel=1e-12)
    assert result.pvalue == pytest.approx(math.erfc(2 / math.sqrt(2)), rel=1e-12)
    assert result.mean_surprisal == pytest.approx(1.6 * math.log(2), rel=1e-12)
    assert result.null_mean == pytest.approx(1.5 * math.log(2), rel=1e-12)
    assert result.null_std == pytest.approx(0.5 * math.log(2) / 10, rel=1e-12)
    assert result.n == 100


def test_surprisal_of_a_uniform_law_is_uninformative():
    result = surprisal_test([10, 0, 0, 0, 5], np.full(5, 0.2))
    assert (result.statistic, result.pvalue) == (0.0, 1.0)


def test_surprisal_catches_a_temperature_bug():
    law = zipf_law(50, 1.2)
    hot = law ** (1 / 1.1)
    hot /= hot.sum()
    counts = np.random.default_rng(7).multinomial(20_000, hot)
    result = surprisal_test(counts, law)
    assert result.statistic > 0 and result.pvalue < 1e-6  # hotter law: more surprising samples


def test_max_cell_by_hand():
    # two fair outcomes, 9 of 10 on the first: P(X >= 9) = 11 / 1024, doubled, then times K = 2
    result = max_cell_test([9, 1], [0.5, 0.5])
    assert result.statistic == pytest.approx(22 / 1024, rel=1e-12)
    assert result.pvalue == pytest.approx(44 / 1024, rel=1e-12)
    assert (result.index, result.observed, result.expected_count) == (0, 9, 5.0)  # tie: lowest index


def test_max_cell_matches_one_sided_binomial_tests():
    law = np.array([0.7, 0.2, 0.05, 0.05])
    counts = np.array([640, 230, 75, 55])  # n = 1000; outcome 2 is the most extreme
    n = counts.sum()
    per_outcome = [
        min(1.0, 2 * min(stats.binomtest(c, n, p, alternative=s).pvalue for s in ("less", "greater")))
        for c, p in zip(counts, law)
    ]
    result = max_cell_test(counts, law)
    assert result.index == int(np.argmin(per_outcome))
    assert result.statistic == pytest.approx(min(per_outcome), rel=1e-10)
    assert result.pvalue == pytest.approx(min(1.0, 4 * min(per_outcome)), rel=1e-10)


def test_max_cell_caps_at_one_and_handles_extremes():
    assert max_cell_test([5, 5], [0.5, 0.5]).pvalue == 1.0
    extreme = max_cell_test([0, 10_000], [0.5, 0.5])
    assert 0.0 <= extreme.pvalue < 1e-300


def test_worst_outcomes_by_hand():
    law = np.array([0.5, 0.3, 0.2])
    counts = np.array([40, 38, 22])  # n = 100
    residuals = [(c - 100 * p) / math.sqrt(100 * p * (1 - p)) for c, p in zip(counts, law)]
    result = worst_outcomes(counts, law, k=2)
    assert [r.index for r in result] == [0, 1]  # |-2.0| > |1.746| > |0.5|
    assert result[0].residual == pytest.approx(residuals[0], rel=1e-12)
    assert result[1].residual == pytest.approx(residuals[1], rel=1e-12)
    assert (result[0].observed, result[0].expected_count) == (40, 50.0)
    assert len(worst_outcomes(counts, law, k=10)) == 3


def test_worst_outcome_of_a_certain_law_has_zero_residual():
    assert worst_outcomes([7], [1.0])[0].residual == 0.0


@pytest.mark.parametrize("function", [surprisal_test, max_cell_test, worst_outcomes])
def test_targeted_tests_validate(function):
    with pytest.raises(InvalidArgument, match="n=0"):
        function([0, 0], [0.5, 0.5])
    with pytest.raises(InvalidArgument, match="shape"):
        function([1, 2, 3], [0.5, 0.5])


def test_worst_outcomes_validates_k():
    with pytest.raises(InvalidArgument, match="k=0"):
        worst_outcomes([1, 2], [0.5, 0.5], k=0)
