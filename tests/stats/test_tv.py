"""Plug-in TV, its simulated null distribution and the interval for the true TV."""

from __future__ import annotations

import numpy as np
import pytest

from specverify.errors import InvalidArgument
from specverify.stats import tv_estimate

from ._laws import zipf_law


def test_estimate_by_hand():
    result = tv_estimate([60, 30, 10], [0.5, 0.3, 0.2], seed=1)
    assert result.estimate == pytest.approx(0.5 * (0.1 + 0.0 + 0.1), rel=1e-12)
    assert (result.n, result.n_sim, result.confidence) == (100, 200, 0.95)


def test_same_seed_same_result_and_generators_accepted():
    law = zipf_law(30, 1.1)
    counts = np.random.default_rng(3).multinomial(2000, law)
    first, second = tv_estimate(counts, law, seed=5), tv_estimate(counts, law, seed=5)
    assert first == second
    assert tv_estimate(counts, law, seed=np.random.default_rng(5)) == first


def test_null_sample_is_unremarkable():
    law = zipf_law(30, 1.1)
    counts = np.random.default_rng(11).multinomial(5000, law)
    result = tv_estimate(counts, law, seed=2, n_sim=100)
    assert 1 / 101 <= result.pvalue <= 1.0
    assert result.null_mean < result.null_quantile
    low, high = result.interval
    assert low <= result.estimate <= high
    assert low < 0.03  # true TV is 0; the interval's low end sits near it


def test_far_alternative_is_flagged_and_bounded_away_from_zero():
    law = np.full(10, 0.1)
    alternative = np.r_[np.full(5, 0.15), np.full(5, 0.05)]  # TV 0.25
    counts = np.random.default_rng(4).multinomial(5000, alternative)
    result = tv_estimate(counts, law, seed=0, n_sim=100)
    assert result.pvalue == pytest.approx(1 / 101)
    low, high = result.interval
    assert 0.15 < low <= 0.25 <= high < 0.35  # deterministic given the seeds


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"n_sim": 0}, "n_sim=0"), ({"confidence": 1.0}, "confidence=1.0")],
)
def test_validation(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        tv_estimate([1, 1], [0.5, 0.5], seed=0, **kwargs)
    with pytest.raises(InvalidArgument, match="n=0"):
        tv_estimate([0, 0], [0.5, 0.5], seed=0)
