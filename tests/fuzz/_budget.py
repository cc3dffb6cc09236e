"""Per-test example budgets for the fuzz tests, on top of the hypothesis profile ``conftest.py`` registers and loads.

``ci`` (the default): derandomized, no deadline, no example database, ~10^4 examples summed over the properties
(94 s for ``pytest tests/fuzz`` on two idle cores, inside the project's two-minute fuzz budget). ``thorough``:
random, ten times the examples. Select with ``SPECVERIFY_HYPOTHESIS_PROFILE=thorough``; ``SPECVERIFY_FUZZ_SCALE``
multiplies every budget further (0.4 gives the old, lighter ~4 x 10^3).

The properties whose budget costs seconds are ``fast_and_full``: ``test[fast]`` runs ``FAST_SHARE`` of the budget in
the README's test command (``pytest tests/fuzz``: ~20 s), ``test[full]`` all of it under ``-m slow`` (same seed, same
assertions); ``-m "slow or not slow"`` runs both.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import Phase, given, settings

PROFILE = os.environ.get("SPECVERIFY_HYPOTHESIS_PROFILE", "ci")
SCALE = {"ci": 2.5, "thorough": 25}
EXTRA = float(os.environ.get("SPECVERIFY_FUZZ_SCALE", "1"))
if PROFILE not in SCALE:
    raise ValueError(f"SPECVERIFY_HYPOTHESIS_PROFILE={PROFILE!r} must be one of {sorted(SCALE)!r}.")
if not EXTRA > 0:
    raise ValueError(f"SPECVERIFY_FUZZ_SCALE={EXTRA!r} must be a number > 0.")
FAST_SHARE = 0.25


def examples(n: int, **overrides) -> settings:
    """Settings running ``2.5 n`` examples under ``ci`` (``25 n`` under ``thorough``), times ``SPECVERIFY_FUZZ_SCALE``,
    on top of the loaded profile."""
    return settings(settings.get_profile(PROFILE), max_examples=max(1, round(n * SCALE[PROFILE] * EXTRA)), **overrides)


def search(n: int) -> settings:
    """Settings for hunting a known bug with ``hypothesis.find``: generate only (no shrinking), ``n`` tries."""
    return settings(settings.get_profile(PROFILE), max_examples=n, phases=[Phase.generate], database=None)


def fast_and_full(n: int, *strategies):
    """``@given(*strategies)`` over the decorated property, twice: ``[fast]`` with ``examples(FAST_SHARE * n)``,
    ``[full]`` with ``examples(n)`` under ``@pytest.mark.slow``. Derandomized, both draw from the property's seed."""

    def decorate(prop):
        runs = {"fast": examples(n * FAST_SHARE), "full": examples(n)}
        runs = {budget: budget_settings(given(*strategies)(prop)) for budget, budget_settings in runs.items()}

        def test(budget):
            runs[budget]()

        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(test, attr, getattr(prop, attr))
        return pytest.mark.parametrize("budget", ["fast", pytest.param("full", marks=pytest.mark.slow)])(test)

    return decorate
