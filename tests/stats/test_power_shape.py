"""power_against / sample_size_against: the two-moment model of the pooled test's power against one alternative."""

import numpy as np
import pytest
from scipy import stats

from specverify.errors import InvalidArgument
from specverify.stats import pooled_cells, power_against, sample_size_against
from specverify.stats.gof import _power_divergence


def simulated_power(p, q, n, alpha, reps=20000, seed=0):
    cells = pooled_cells(p, n)
    num = int(cells.max()) + 1
    onehot = np.zeros((p.size, num))
    onehot[np.arange(p.size), cells] = 1.0
    counts = np.random.default_rng(seed).multinomial(n, q, size=reps) @ onehot
    statistic = _power_divergence(counts, n * (p @ onehot), 2.0 / 3.0)
    return float(np.mean(statistic > stats.chi2.isf(alpha, num - 1)))


def zipf(size):
    p = 1.0 / np.arange(1, size + 1) ** 1.1
    return p / p.sum()


def test_at_the_null_the_power_is_the_level():
    p = zipf(40)
    for n in (200, 5000):
        assert power_against(p, p, n, alpha=1e-3) == pytest.approx(1e-3, rel=0.1)  # finite-N moments move it a little


@pytest.mark.parametrize("shape", ["sparse", "tilt"])
def test_power_matches_simulation(shape):
    p = zipf(60)
    q = p.copy()
    if shape == "sparse":  # mass moved onto the rarest outcome: far from local, where the noncentral chi2 is off
        q[0] -= 0.04
        q[-1] += 0.04
    else:
        q[:30] *= 1.05
        q[30:] *= (1 - q[:30].sum()) / q[30:].sum()
    for n in (300, 800):
        model = power_against(p, q, n, alpha=1e-3)
        assert abs(model - simulated_power(p, q, n, 1e-3)) < 0.03, (shape, n, model)


def test_sample_size_reaches_the_power_and_no_less():
    p, q = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.35, 0.3, 0.2, 0.15])
    n = sample_size_against(p, q, alpha=1e-6, power=0.9)
    assert power_against(p, q, n, alpha=1e-6) >= 0.9
    assert power_against(p, q, int(n * 0.97), alpha=1e-6) < 0.9


def test_invalid_arguments_say_what_to_pass():
    p = [0.5, 0.5]
    with pytest.raises(InvalidArgument, match="alternative="):
        power_against(p, [0.5, 0.6], 10, alpha=0.01)
    with pytest.raises(InvalidArgument, match="alternative="):
        power_against(p, [1.0], 10, alpha=0.01)
    with pytest.raises(InvalidArgument, match="alpha="):
        power_against(p, p, 10, alpha=1.5)
    with pytest.raises(InvalidArgument, match="n="):
        power_against(p, p, 0, alpha=0.01)
    with pytest.raises(InvalidArgument, match="power="):
        sample_size_against(p, [0.4, 0.6], alpha=0.1, power=0.05)
    with pytest.raises(InvalidArgument, match="max_n="):
        sample_size_against(p, p, alpha=0.01, max_n=1000)
