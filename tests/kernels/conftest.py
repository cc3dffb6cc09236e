"""Kernel tests run the triton kernels in the interpreter on CPU, or compiled on CUDA (``tests/_triton_env.py``)."""

import os

from tests._triton_env import DEVICE, HAS_CUDA, INTERPRETED, device, mark_gpu_items  # noqa: F401


def pytest_collection_modifyitems(config, items):
    mark_gpu_items(items, os.path.dirname(__file__))
