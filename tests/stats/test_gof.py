"""Pooling and the pooled power-divergence tests, against formulas written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats import goodness_of_fit, homogeneity_test, pooled_cells

# -- pooled_cells -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "n", "cells"),
    [
        # n p = [1, 2, 3, 94]: the three small ones reach 6 >= 5 together
        ([0.01, 0.02, 0.03, 0.94], 100, [0, 0, 0, 1]),
        # n p = [87.5, 6, 1, 1, 4.5]: sorted 1, 1, 4.5 -> one group (6.5); then 6 and 87.5 alone
        ([0.875, 0.06, 0.01, 0.01, 0.045], 100, [2, 1, 0, 0, 0]),
        # n p = [50, 30, 17, 2, 1]: the small ones total 3 < 5 -> leftover joins the smallest cell (17)
        ([0.5, 0.3, 0.17, 0.02, 0.01], 100, [2, 1, 0, 0, 0]),
        # n p = [2, 3, 4, 6, 85]: 2 + 3 = 5 closes a group, 4 is left over and joins it (5 < 6)
        ([0.02, 0.03, 0.04, 0.06, 0.85], 100, [0, 0, 0, 1, 2]),
        # ties are broken by index: n p = 3 each, groups {0, 1} and {2, 3}
        ([0.25, 0.25, 0.25, 0.25], 12, [0, 0, 1, 1]),
        # n p = 2 each: {0, 1, 2} reaches 6, {3} is left over and joins it
        ([0.25, 0.25, 0.25, 0.25], 8, [0, 0, 0, 0]),
        # too few samples for two cells
        ([0.5, 0.3, 0.2], 1, [0, 0, 0]),
        # nothing to pool
        ([0.5, 0.5], 100, [0, 1]),
    ],
)
def test_pooled_cells_examples(expected, n, cells):
    assert pooled_cells(expected, n).tolist() == cells


def test_pooled_cells_min_expected_changes_threshold():
    # n p = [1, 2, 3, 94]; with min_expected=2: 1 + 2 = 3 forms a group, 3 stands alone
    assert pooled_cells([0.01, 0.02, 0.03, 0.94], 100, min_expected=2).tolist() == [0, 0, 1, 2]


@settings(derandomize=True, max_examples=100, deadline=None)
@given(
    weights=st.lists(st.floats(1e-4, 1.0), min_size=1, max_size=40),
    n=st.integers(1, 5000),
    min_expected=st.sampled_from([1.0, 5.0, 10.0]),
)
def test_pooled_cells_invariants(weights, n, min_expected):
    expected = np.asarray(weights) / np.sum(weights)
    cells = pooled_cells(expected, n, min_expected=min_expected)
    num_cells = cells.max() + 1
    assert sorted(set(cells.tolist())) == list(range(num_cells))  # contiguous ids
    totals = n * np.bincount(cells, weights=expected)
    if num_cells > 1:
        assert totals.min() >= min_expected * (1 - 1e-12)
    # outcomes large enough on their own and not absorbing a leftover stay alone
    big = n * expected >= min_expected
    sizes = np.bincount(cells)
    assert np.sum(sizes[cells[big]] == 1) >= big.sum() - 1


def test_pooled_cells_ignores_counts_and_permutes_with_outcomes():
    expected = np.array([0.4, 0.001, 0.3, 0.002, 0.2, 0.097])
    permutation = np.array([3, 0, 5, 1, 4, 2])
    cells = pooled_cells(expected, 1000)
    permuted = pooled_cells(expected[permutation], 1000)
    assert permuted.tolist() == cells[permutation].tolist()  # distinct probabilities: no ties to break


# -- goodness_of_fit: hand-computed values ----------------------------------------------------------------------------

LAW3 = np.array([0.2, 0.3, 0.5])
COUNTS3 = np.array([25, 25, 50])  # n = 100, expected counts 20, 30, 50


def test_pearson_three_outcomes_by_hand():
    result = goodness_of_fit(COUNTS3, LAW3, method="pearson")
    statistic = (25 - 20) ** 2 / 20 + (25 - 30) ** 2 / 30 + 0.0  # = 1.25 + 5/6
    assert result.statistic == pytest.approx(statistic, rel=1e-12)
    assert result.df == 2 and result.num_cells == 3 and result.n == 100 and result.method == "pearson"
    # chi-square with 2 df has survival function exp(-x / 2)
    assert result.pvalue == pytest.approx(math.exp(-statistic / 2), rel=1e-12)


def test_cressie_read_three_outcomes_by_hand():
    lam = 2 / 3
    result = goodness_of_fit(COUNTS3, LAW3)
    observed, expected = COUNTS3.astype(float), 100 * LAW3
    statistic = 2 / (lam * (lam + 1)) * sum(o * ((o / e) ** lam - 1) for o, e in zip(observed, expected))
    assert result.statistic == pytest.approx(statistic, rel=1e-12)
    assert result.pvalue == pytest.approx(math.exp(-statistic / 2), rel=1e-12)
    assert result.method == "cressie-read"


def test_likelihood_ratio_by_hand_and_zero_count():
    counts, law = np.array([0, 40, 60]), np.array([0.1, 0.4, 0.5])  # expected 10, 40, 50
    result = goodness_of_fit(counts, law, lambda_=0)
    statistic = 2 * (40 * math.log(40 / 40) + 60 * math.log(60 / 50))
    assert result.statistic == pytest.approx(statistic, rel=1e-12)
    pearson = goodness_of_fit(counts, law, method="pearson", lambda_=0.123)  # lambda_ ignored for Pearson
    assert pearson.statistic == pytest.approx(10 + 0 + 100 / 50, rel=1e-12)


def test_pooled_statistic_by_hand():
    law = np.array([0.01, 0.02, 0.03, 0.44, 0.5])  # n = 100: cells {0, 1, 2} (expected 6), {3} (44), {4} (50)
    counts = np.array([3, 0, 7, 40, 50])  # pooled observed 10, 40, 50
    result = goodness_of_fit(counts, law, method="pearson")
    statistic = (10 - 6) ** 2 / 6 + (40 - 44) ** 2 / 44 + 0.0
    assert result.num_cells == 3 and result.df == 2
    assert result.cells.tolist() == [0, 0, 0, 1, 2]
    assert result.statistic == pytest.approx(statistic, rel=1e-12)


def test_one_cell_gives_pvalue_one():
    result = goodness_of_fit([1, 0, 0], [0.5, 0.3, 0.2])
    assert (result.pvalue, result.df, result.num_cells, result.statistic) == (1.0, 0, 1, 0.0)


def test_tiny_pvalues_keep_an_accurate_log():
    law = np.array([0.5, 0.5])
    result = goodness_of_fit([100_000, 0], law, method="pearson")  # statistic = 100000, df = 1
    assert result.pvalue == 0.0
    assert result.log_pvalue == pytest.approx(stats.norm.logsf(math.sqrt(100_000)) + math.log(2), rel=1e-9)
    # 3 outcomes: df = 2, log sf = -x / 2 exactly
    law3 = np.array([0.25, 0.25, 0.5])
    result = goodness_of_fit([0, 0, 4000], law3, method="pearson")  # expected 1000, 1000, 2000
    statistic = 1000 + 1000 + 2000**2 / 2000
    assert result.statistic == pytest.approx(statistic, rel=1e-12)
    assert result.log_pvalue == pytest.approx(-statistic / 2, rel=1e-12)


def test_moderate_pvalues_log_matches_scipy():
    law = np.full(10, 0.1)
    counts = np.array([30, 5, 10, 10, 10, 10, 10, 10, 5, 10])
    result = goodness_of_fit(counts, law, method="pearson")
    assert result.log_pvalue == pytest.approx(math.log(stats.chi2.sf(result.statistic, 9)), rel=1e-12)


def test_result_is_frozen_and_cells_read_only():
    result = goodness_of_fit(COUNTS3, LAW3)
    with pytest.raises(AttributeError):
        result.pvalue = 0.5
    with pytest.raises(ValueError):
        result.cells[0] = 7


# -- validation -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "expected", "kwargs", "match"),
    [
        ([1, 2], [0.2, 0.3, 0.5], {}, r"counts=.*shape \(2,\); expected shape \(3,\)"),
        ([1, -2, 3], LAW3, {}, "non-negative"),
        ([1.5, 2, 3], LAW3, {}, "integer counts"),
        ([1, 2, 3], [0.2, 0.3, 0.6], {}, "sums to"),
        ([1, 2, 3], [0.5, 0.5, 0.0], {}, "strictly positive"),
        ([1, 2, 3], [0.5, np.nan, 0.5], {}, "NaN or inf"),
        ([[1, 2, 3]], [[0.2, 0.3, 0.5]], {}, "1-D"),
        ([0, 0, 0], LAW3, {}, "n=0"),
        (COUNTS3, LAW3, {"method": "chi2"}, "method='chi2'"),
        (COUNTS3, LAW3, {"lambda_": -1}, "lambda_=-1"),
        (COUNTS3, LAW3, {"min_expected": 0}, "min_expected=0"),
    ],
)
def test_goodness_of_fit_rejects_bad_arguments(counts, expected, kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        goodness_of_fit(counts, expected, **kwargs)


def test_invalid_argument_is_a_value_error():
    with pytest.raises(ValueError):
        pooled_cells([0.5, 0.5], 0)


def test_expected_within_tolerance_is_accepted():
    assert goodness_of_fit(COUNTS3, LAW3 + np.array([3e-10, 0, 0])).df == 2


# -- homogeneity ------------------------------------------------------------------------------------------------------


def test_homogeneity_matches_contingency_formula():
    a, b = np.array([30, 50, 20]), np.array([20, 60, 40])  # every expected count >= 5: no pooling
    result = homogeneity_test(a, b)
    table = np.stack([a, b]).astype(float)
    expected = np.outer(table.sum(1), table.sum(0)) / table.sum()
    statistic = float(np.sum((table - expected) ** 2 / expected))
    assert result.statistic == pytest.approx(statistic, rel=1e-12)
    assert result.df == 2 and result.n == 220 and result.method == "pearson-homogeneity"
    assert result.pvalue == pytest.approx(math.exp(-statistic / 2), rel=1e-12)


def test_homogeneity_pools_by_combined_counts():
    a, b = np.array([100, 1, 2, 0, 97]), np.array([95, 2, 3, 0, 100])
    # combined 195, 3, 5, 0, 197; smaller sample n = 200 of 400: expected 97.5, 1.5, 2.5, 0, 98.5
    # sorted: 0 (idx 3), 1.5 (idx 1), 2.5 (idx 2) -> one group reaching 4 < 5: left over, joins the smallest cell
    result = homogeneity_test(a, b)
    assert result.cells.tolist() == [0, 0, 0, 0, 1]
    assert result.num_cells == 2


def test_homogeneity_rejects_empty_sample_and_shape_mismatch():
    with pytest.raises(InvalidArgument, match="n_b=0"):
        homogeneity_test([1, 2], [0, 0])
    with pytest.raises(InvalidArgument, match="counts_b"):
        homogeneity_test([1, 2], [1, 2, 3])
