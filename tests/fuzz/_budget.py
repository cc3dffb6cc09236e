"""Per-test example budgets for the fuzz tests, on top of the hypothesis profile ``conftest.py`` registers and loads.

``ci`` (the default): derandomized, no deadline, no example database, ~10^4 examples summed over the properties
(94 s for ``pytest tests/fuzz`` on two idle cores, inside the project's two-minute fuzz budget). ``thorough``:
random, ten times the examples. Select with ``SPECVERIFY_HYPOTHESIS_PROFILE=thorough``; ``SPECVERIFY_FUZZ_SCALE``
multiplies every budget further (0.4 gives the old, lighter ~4 x 10^3).
"""

from __future__ import annotations

import os

from hypothesis import Phase, settings

PROFILE = os.environ.get("SPECVERIFY_HYPOTHESIS_PROFILE", "ci")
SCALE = {"ci": 2.5, "thorough": 25}
EXTRA = float(os.environ.get("SPECVERIFY_FUZZ_SCALE", "1"))
if PROFILE not in SCALE:
    raise ValueError(f"SPECVERIFY_HYPOTHESIS_PROFILE={PROFILE!r} must be one of {sorted(SCALE)!r}.")
if not EXTRA > 0:
    raise ValueError(f"SPECVERIFY_FUZZ_SCALE={EXTRA!r} must be a number > 0.")


def examples(n: int, **overrides) -> settings:
    """Settings running ``2.5 n`` examples under ``ci`` (``25 n`` under ``thorough``), times ``SPECVERIFY_FUZZ_SCALE``,
    on top of the loaded profile."""
    return settings(settings.get_profile(PROFILE), max_examples=max(1, round(n * SCALE[PROFILE] * EXTRA)), **overrides)


def search(n: int) -> settings:
    """Settings for hunting a known bug with ``hypothesis.find``: generate only (no shrinking), ``n`` tries."""
    return settings(settings.get_profile(PROFILE), max_examples=n, phases=[Phase.generate], database=None)
