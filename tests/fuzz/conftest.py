"""Loads the hypothesis profile for the fuzz tests (``SPECVERIFY_HYPOTHESIS_PROFILE``: ``ci`` default, ``thorough``)."""

import pytest
import torch

from tests.fuzz import _budget


def pytest_report_header(config):
    return (f"specverify fuzz: hypothesis profile {_budget.PROFILE!r} (SPECVERIFY_HYPOTHESIS_PROFILE=ci|thorough; "
            "ci is derandomized: reruns reproduce)")


@pytest.fixture(autouse=True)
def one_torch_thread():
    # one-row torch ops never need a thread pool; on a busy 2-core machine waking one costs milliseconds per call
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
