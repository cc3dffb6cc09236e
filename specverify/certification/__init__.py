"""Certification: the run configuration, the scenario matrices, the checks table, the worker runner, the verdict.

``specverify.certify`` is the entry point (``pipeline.py``); this package holds its parts (docs/design.md draws
their layout). Importing it stays light (no torch): the oracles and the statistics are imported when a
certification runs.
"""

from specverify._lazy import lazy_exports
from specverify.certification.config.run_config import RunConfig
from specverify.certification.matrix.scenarios import CORE, SCENARIOS, CertificationScenario, scenario_names
from specverify.certification.results.evidence import Certificate, ScenarioResult

__all__ = [
    "certify",
    "RunConfig",
    "Certificate",
    "ScenarioResult",
    "CertificationScenario",
    "SCENARIOS",
    "CORE",
    "DecoderFailure",
    "scenario_names",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"certify": "specverify.certification.execution.certify", "DecoderFailure": "specverify.certification.run.runner"},
    __all__,
)
