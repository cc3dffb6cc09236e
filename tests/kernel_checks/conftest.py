"""Kernel-check tests run the triton kernels in the interpreter on CPU, or compiled on CUDA when a device is present.

A copy of ``tests/kernels/conftest.py``, so that this directory also runs alone. TRITON_INTERPRET is read when
``specverify.kernels._triton`` defines its kernels, so it is set here, before any test module imports the kernels.
Tests that take the ``device`` fixture are marked ``gpu`` when they run on CUDA. ``@pytest.mark.slow`` tests here run
only when ``-m`` names ``slow``.
"""

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
DEVICE = "cpu" if INTERPRETED else "cuda"


@pytest.fixture
def device() -> str:
    """Where the triton kernels run in this process: 'cpu' (interpreter) or 'cuda'."""
    return DEVICE


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    run_slow = "slow" in (config.getoption("markexpr") or "")
    for item in items:
        if not os.path.abspath(str(item.fspath)).startswith(here + os.sep):
            continue
        if DEVICE == "cuda" and "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow test: run with -m slow"))
