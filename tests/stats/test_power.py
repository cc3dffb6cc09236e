"""Sample-size planning: the noncentral χ² model, round trips and a simulation at the planned N."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats import (
    detectable_tv,
    family_alpha_per_test,
    goodness_of_fit,
    noncentrality_needed,
    plan_sample_size,
    pooled_cells,
)
from tests.helpers import flat_tilt

from ._laws import zipf_law


@pytest.mark.parametrize(("df", "level", "power"), [(1, 0.05, 0.8), (10, 1e-3, 0.9), (255, 2.5e-7, 0.9)])
def test_noncentrality_needed_solves_the_power_equation(df, level, power):
    noncentrality = noncentrality_needed(df, level, power)
    critical = stats.chi2.isf(level, df)
    assert stats.ncx2.sf(critical, df, noncentrality) == pytest.approx(power, abs=1e-9)


def test_noncentrality_textbook_value():
    # df = 1: the statistic is (Z + sqrt(λ))², so power 0.8 at level 0.05 needs sqrt(λ) = z_0.975 + z_0.8 (minus a
    # negligible lower-tail term)
    expected = (stats.norm.isf(0.025) + stats.norm.isf(0.2)) ** 2
    assert noncentrality_needed(1, 0.05, 0.8) == pytest.approx(expected, rel=1e-3)


def test_plan_without_pooling_is_the_closed_form():
    law = np.full(64, 1 / 64)
    epsilon, alpha = 0.05, 1e-4
    n = plan_sample_size(law, epsilon, alpha=alpha)
    assert pooled_cells(law, n).max() == 63  # every outcome its own cell
    assert n == math.ceil(noncentrality_needed(63, alpha / 4, 0.9) / (4 * epsilon**2))


def test_safety_is_a_division_of_alpha():
    law = zipf_law(100, 1.2)
    assert plan_sample_size(law, 0.03, alpha=1e-5) == plan_sample_size(law, 0.03, alpha=2.5e-6, safety=1)


@pytest.mark.parametrize("law", [np.full(8, 1 / 8), zipf_law(256, 1.6), zipf_law(1000, 1.1)])
@pytest.mark.parametrize("epsilon", [0.01, 0.05, 0.2])
def test_plan_and_detectable_tv_round_trip(law, epsilon):
    n = plan_sample_size(law, epsilon, alpha=1e-6)
    assert detectable_tv(law, n, alpha=1e-6) <= epsilon
    # N covers the df that pooling gives at N itself
    df = pooled_cells(law, n).max()
    assert n >= noncentrality_needed(int(df), 1e-6 / 4, 0.9) / (4 * epsilon**2)
    # and the plan for the TV detectable at N needs no more than N (+1: ceil of a float that rounds up)
    assert plan_sample_size(law, detectable_tv(law, n, alpha=1e-6), alpha=1e-6) <= n + 1


def test_plan_grows_as_epsilon_and_alpha_shrink():
    law = zipf_law(256, 1.6)
    sizes = [plan_sample_size(law, eps, alpha=1e-6) for eps in (0.2, 0.1, 0.05, 0.02)]
    assert sizes == sorted(sizes)
    assert plan_sample_size(law, 0.05, alpha=1e-8) > plan_sample_size(law, 0.05, alpha=1e-4)


def test_single_outcome_law():
    n = plan_sample_size([1.0], 0.02, alpha=1e-6, power=0.9)
    assert n == math.ceil(math.log(0.1) / math.log(0.98))
    assert detectable_tv([1.0], n, alpha=1e-6) <= 0.02
    assert plan_sample_size([1.0], 1.0, alpha=1e-6) == 1


def test_detectable_tv_is_infinite_with_one_cell():
    assert detectable_tv(np.full(4, 0.25), 2, alpha=1e-3) == math.inf


@pytest.mark.parametrize("method", ["pearson", "cressie-read"])
def test_planned_n_detects_a_flat_tilt(method):
    law, epsilon, alpha, power, draws = zipf_law(40, 1.3), 0.1, 1e-3, 0.9, 300
    n = plan_sample_size(law, epsilon, alpha=alpha, power=power)
    alternative = flat_tilt(law, pooled_cells(law, n), epsilon)
    assert 0.5 * np.abs(alternative - law).sum() == pytest.approx(epsilon)
    samples = np.random.default_rng(20240607).multinomial(n, alternative, size=draws)  # [draws, K]
    rejected = sum(goodness_of_fit(row, law, method=method).pvalue <= alpha / 4 for row in samples)
    # if the true power were >= 0.9, fewer than this many acceptances happen with probability < 1e-6;
    # allow a further 0.03 for the noncentral χ² approximation (measured within ~6 % in N)
    floor = stats.binom.ppf(1e-6, draws, power) / draws - 0.03
    assert rejected / draws >= floor


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0, "alpha": 1e-3}, "epsilon=0.0"),
        ({"epsilon": 1.5, "alpha": 1e-3}, "epsilon=1.5"),
        ({"epsilon": 0.1, "alpha": 0.0}, "alpha=0.0"),
        ({"epsilon": 0.1, "alpha": 1e-3, "power": 1.0}, "power=1.0"),
        ({"epsilon": 0.1, "alpha": 1e-3, "safety": 0.5}, "safety=0.5"),
        ({"epsilon": 0.1, "alpha": 1e-3, "min_expected": -1.0}, "min_expected=-1.0"),
    ],
)
def test_plan_rejects_bad_arguments(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        plan_sample_size([0.5, 0.5], **kwargs)


def test_detectable_tv_rejects_bad_n():
    with pytest.raises(InvalidArgument, match="n=0"):
        detectable_tv([0.5, 0.5], 0, alpha=1e-3)


def test_family_alpha_per_test():
    assert family_alpha_per_test(1e-3, 10, 4) == pytest.approx(2.5e-5, rel=1e-15)
    with pytest.raises(InvalidArgument, match="num_scenarios=0"):
        family_alpha_per_test(1e-3, 0, 4)
    with pytest.raises(InvalidArgument, match="alpha=2"):
        family_alpha_per_test(2, 1, 1)


def test_the_plans_noncentral_sf_is_scipys_bit_for_bit():
    from scipy import stats as scipy_stats

    from specverify.stats.power import _ncx2_sf

    for df in (1, 7, 38, 250):
        critical = float(scipy_stats.chi2.isf(1e-9, df))
        for nc in (0.0, 1e-6, 0.5, 3.0, 47.25, critical, 10 * critical):
            assert _ncx2_sf(critical, df, nc) == float(scipy_stats.ncx2.sf(critical, df, nc)), (df, nc)


def test_the_plans_quantiles_are_scipys_bit_for_bit():
    from scipy import stats as scipy_stats

    from specverify.stats.power import _chi2_isf, _ncx2_ppf

    for df in (1, 7, 38, 250):
        for q in (1e-12, 1e-7, 0.05, 0.5, 0.95):
            assert _chi2_isf(q, df) == float(scipy_stats.chi2.isf(q, df)), (df, q)
            for nc in (0.0, 0.3, 12.0, 400.0):
                assert _ncx2_ppf(q, df, nc) == float(scipy_stats.ncx2.ppf(q, df, nc)), (df, q, nc)
