"""``@pytest.mark.slow`` tests here (the full certifier run over the zoo, ~25 min) run only when ``-m`` names
``slow``, so that ``pytest tests/quality`` stays within a minute."""

from __future__ import annotations

import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: run with -m slow")
    for item in items:
        if "slow" in item.keywords and HERE in pathlib.Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
