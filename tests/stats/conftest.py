"""Shared fixtures for the statistics tests; ``@pytest.mark.slow`` tests here run only when ``-m`` names ``slow``."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from ._laws import zipf_law

HERE = pathlib.Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: run with -m slow")
    for item in items:
        if "slow" in item.keywords and HERE in pathlib.Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture
def uneven_law() -> np.ndarray:
    """256 outcomes, probabilities from ~0.39 down to ~1e-5: most cells pooled at a few thousand samples."""
    return zipf_law(256, 1.6)
