"""What kernel tests share: TRITON_INTERPRET set before any kernel is defined, and where the kernels run.

``specverify.kernels._triton`` reads TRITON_INTERPRET when it defines its kernels, so the conftests of
``tests/kernels`` and ``tests/kernel_checks`` import this module first. Tests that take the ``device`` fixture are
marked ``gpu`` when they run on CUDA (slow tests are left out by the root conftest).
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


def mark_gpu_items(items, directory: str) -> None:
    """Mark the tests under ``directory`` that take ``device`` as ``gpu`` when they run on CUDA."""
    here = os.path.abspath(directory) + os.sep
    for item in items:
        if DEVICE == "cuda" and os.path.abspath(str(item.fspath)).startswith(here):
            if "device" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.gpu)
