"""Hypothesis profiles for the fuzz tests, chosen with ``SPECVERIFY_HYPOTHESIS_PROFILE`` (``ci`` default, ``thorough``).

``ci``: derandomized (reruns reproduce), no deadline (busy CI machines), no example database. ``thorough``: random,
ten times the examples (``tests/fuzz/_budget.py`` scales each test's budget).
"""

from hypothesis import HealthCheck, settings

from tests.fuzz import _budget
from tests.helpers import one_torch_thread  # noqa: F401 (autouse: every fuzz test)

_SLOW_OK = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
    max_examples=100,
)
settings.register_profile("thorough", deadline=None, print_blob=True, suppress_health_check=_SLOW_OK, max_examples=1000)
settings.load_profile(_budget.PROFILE)


def pytest_report_header(config):
    return (
        f"specverify fuzz: hypothesis profile {_budget.PROFILE!r}, budget scale {_budget.EXTRA:g} "
        "(SPECVERIFY_HYPOTHESIS_PROFILE=ci|thorough, SPECVERIFY_FUZZ_SCALE)"
    )
