"""Project-wide test configuration: slow tests run only when ``-m`` names ``slow``."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
# TRITON_INTERPRET (no CUDA) before any test module is collected: triton reads it when it defines its own jit
# functions, and a module collected before tests/kernels may import triton (transformers' generation utilities do);
# set later, the kernels run interpreted but call triton.language's compiled helpers and fail
import tests._triton_env  # noqa: E402, F401

pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(config, items):
    """A bare ``pytest`` leaves ``@pytest.mark.slow`` out, as the README's command does; ``-m slow`` runs them."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
