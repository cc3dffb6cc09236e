"""The α ledger of a certification split over separate calls (pytest items, xdist workers, shards).

``certify`` plans every sampling test at ``alpha / m``, where ``m`` counts the sampling tests of the family's whole
matrix (``checks.num_tests``: a mixed scenario counts one test per member, batch-composition one per composition),
so a run of one scenario draws exactly what the full run draws. A test rejected at ``alpha / m`` is a valid
rejection on its own (Bonferroni); whoever gathers the tests of one run decides Holm at the family ``alpha`` once
(``verdict.finish_certificate``).

>>> planned_tests("toy") > 1
True
>>> round(per_test_alpha(1e-6, "toy") * planned_tests("toy"), 12)
1e-06
"""

from __future__ import annotations

from specverify.certification.checks import num_tests
from specverify.certification.config.options import parse_option
from specverify.certification.matrix.scenarios import matrix
from specverify.enums import DraftFamily, ModelFamily

__all__ = ["planned_tests", "per_test_alpha"]


def planned_tests(models: str = ModelFamily.TOY, drafts: str = DraftFamily.AR) -> int:
    """``m``: the sampling tests of the family's whole matrix (what ``certify`` divides α by)."""
    return num_tests(matrix(models, drafts))


def per_test_alpha(alpha: float, models: str = ModelFamily.TOY, drafts: str = DraftFamily.AR) -> float:
    """The level each sampling test of a run is planned at: ``alpha / planned_tests(models, drafts)``."""
    return parse_option("alpha", alpha) / planned_tests(models, drafts)
