"""Shared fixtures for the statistics tests."""

from __future__ import annotations

import numpy as np
import pytest

from ._laws import zipf_law


@pytest.fixture
def uneven_law() -> np.ndarray:
    """256 outcomes, probabilities from ~0.39 down to ~1e-5: most cells pooled at a few thousand samples."""
    return zipf_law(256, 1.6)
