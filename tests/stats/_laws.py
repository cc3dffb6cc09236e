"""Exact laws shared by the statistics tests."""

from __future__ import annotations

import numpy as np


def zipf_law(size: int, exponent: float) -> np.ndarray:  # [size], decreasing; many tiny outcomes for large exponents
    weights = 1.0 / np.arange(1, size + 1) ** exponent
    return weights / weights.sum()
