"""The α ledger of a certification split over separate calls (pytest items, xdist workers, shards).

``certify`` plans every sampling test at ``alpha / m``, where ``m`` counts the sampling tests of the family's whole
matrix (a mixed scenario counts one test per member, batch-composition one per composition), so a run of one
scenario draws exactly what the full run draws. A test rejected at ``alpha / m`` is a valid rejection on its own
(Bonferroni); whoever gathers the tests of one run decides Holm at the family ``alpha`` once
(``finish_certificate``).

>>> planned_tests("toy") > 1
True
>>> round(per_test_alpha(1e-6, "toy") * planned_tests("toy"), 12)
1e-06
"""

from __future__ import annotations

from specverify.certification.scenarios import matrix
from specverify.certification.verdict import SAMPLING_KINDS
from specverify.enums import ScenarioKind
from specverify.errors import check

__all__ = ["planned_tests", "per_test_alpha"]


def _tests_in(scenario) -> int:
    from specverify.certification.composition import COMPOSITIONS

    if scenario.kind == ScenarioKind.MIXED:
        return len(scenario.members)
    return len(COMPOSITIONS) if scenario.kind == ScenarioKind.COMPOSITION else 1


def planned_tests(models: str = "toy") -> int:
    """``m``: the sampling tests of the ``models`` family's whole matrix (what ``certify`` divides α by)."""
    return max(1, sum(_tests_in(s) for s in matrix(models).values() if s.kind in SAMPLING_KINDS))


def per_test_alpha(alpha: float, models: str = "toy") -> float:
    """The level each sampling test of a run is planned at: ``alpha / planned_tests(models)``."""
    check(
        isinstance(alpha, float) and 0 < alpha < 0.5,
        f"alpha={alpha!r} must be a float in (0, 0.5), e.g. 1e-6.",
    )
    return alpha / planned_tests(models)
