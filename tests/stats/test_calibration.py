"""False-alarm rate of the pooled tests on multinomial draws from the exact law itself (test the tester).

Bounds are deterministic given the seed and were chosen so that a correctly calibrated test (true rate ≤ 2α, and
≥ α/2) would violate them with probability below 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specverify.stats import goodness_of_fit, pooled_cells
from specverify.stats.gof import _power_divergence

METHODS = {"pearson": 1.0, "cressie-read": 2 / 3}


def _pooled_pvalues(draws: np.ndarray, law: np.ndarray, n: int, lambda_: float) -> np.ndarray:  # [B, K] -> [B]
    cells = pooled_cells(law, n)
    onehot = np.eye(cells.max() + 1)[cells]  # [K, C]
    observed = draws @ onehot  # [B, C]
    statistic = _power_divergence(observed, n * (law @ onehot), lambda_)
    return stats.chi2.sf(statistic, onehot.shape[1] - 1)


def _null_pvalues(law, n, method, draws, seed, chunk=20_000):  # -> [draws]
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, draws, chunk):
        samples = rng.multinomial(n, law, size=min(chunk, draws - start))  # [chunk, K]
        out.append(_pooled_pvalues(samples, law, n, METHODS[method]))
        if start == 0:  # the vectorised path is the public function
            for row, pvalue in zip(samples[:20], out[0][:20]):
                assert goodness_of_fit(row, law, method=method).pvalue == pytest.approx(pvalue, rel=1e-9, abs=1e-300)
    return np.concatenate(out)


def _bounds(alpha: float, draws: int) -> tuple[float, float]:
    upper = stats.binom.isf(1e-6, draws, 2 * alpha) / draws
    lower = stats.binom.ppf(1e-6, draws, alpha / 2) / draws
    return lower, upper


@pytest.mark.parametrize("method", sorted(METHODS))
def test_false_alarm_rate_at_one_percent(uneven_law, method):
    n, alpha, draws = 3000, 1e-2, 4000
    assert pooled_cells(uneven_law, n).max() + 1 < 100  # most of the 256 outcomes are pooled
    rate = np.mean(_null_pvalues(uneven_law, n, method, draws, seed=1234) <= alpha)
    lower, upper = _bounds(alpha, draws)
    assert lower <= rate <= upper


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("n", [1000, 20_000])
def test_false_alarm_rate_is_within_the_safety_factor(uneven_law, method, n):
    draws = 200_000
    pvalues = _null_pvalues(uneven_law, n, method, draws, seed=n)
    for alpha in (1e-2, 1e-3):
        rate = np.mean(pvalues <= alpha)
        lower, upper = _bounds(alpha, draws)
        assert lower <= rate <= upper, f"false-alarm rate {rate:.2e} at nominal {alpha:.0e}"
