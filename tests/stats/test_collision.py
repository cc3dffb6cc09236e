"""Collision test over disjoint pairs: exact binomial p-values against scipy.stats.binomtest."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats import collision_probability, collision_test


def test_collision_probability_by_hand():
    assert collision_probability([0.5, 0.25, 0.25]) == pytest.approx(0.375, rel=1e-15)
    assert collision_probability(np.full(4, 0.25)) == pytest.approx(0.25, rel=1e-15)


@pytest.mark.parametrize(
    ("num_pairs", "num_collisions", "collision_prob"),
    [
        (1000, 250, 0.25),  # exactly the mean
        (1000, 230, 0.25),
        (1000, 290, 0.25),
        (500, 0, 0.01),
        (500, 17, 0.01),
        (37, 37, 1 / 3),
        (2000, 1, 0.4),
        (1, 0, 0.5),
        (1, 1, 0.999),
        (10_000, 10_000, 0.9),
    ],
)
def test_matches_scipy_binomtest(num_pairs, num_collisions, collision_prob):
    result = collision_test(num_pairs, num_collisions, collision_prob)
    reference = stats.binomtest(num_collisions, num_pairs, collision_prob).pvalue
    assert result.pvalue == pytest.approx(reference, rel=1e-10, abs=1e-300)
    assert result.statistic == num_collisions
    assert result.expected == pytest.approx(num_pairs * collision_prob, rel=1e-15)


def test_matches_scipy_binomtest_on_random_inputs():
    rng = np.random.default_rng(123)
    for _ in range(120):
        num_pairs = int(rng.integers(1, 3000))
        prob = float(rng.uniform(0.001, 0.999))
        spread = 4 * np.sqrt(num_pairs * prob * (1 - prob)) + 1
        k = int(np.clip(round(num_pairs * prob + rng.uniform(-spread, spread)), 0, num_pairs))
        reference = stats.binomtest(k, num_pairs, prob).pvalue
        assert collision_test(num_pairs, k, prob).pvalue == pytest.approx(reference, rel=1e-10, abs=1e-300)


def test_certain_collisions():
    assert collision_test(5, 5, 1.0).pvalue == 1.0
    assert collision_test(5, 4, 1.0).pvalue == 0.0


def test_shared_rng_is_caught():
    # every pair replays one stream: all pairs collide, against Σp² = 0.1
    assert collision_test(200, 200, 0.1).pvalue < 1e-150


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 0, 0.5), "num_pairs=0"),
        ((10, -1, 0.5), "num_collisions=-1"),
        ((10, 11, 0.5), "num_collisions=11 exceeds num_pairs=10"),
        ((10, 1, 0.0), "collision_prob=0.0"),
        ((10, 1, 1.5), "collision_prob=1.5"),
        ((10.0, 1, 0.5), "num_pairs=10.0"),
    ],
)
def test_validation(args, match):
    with pytest.raises(InvalidArgument, match=match):
        collision_test(*args)
