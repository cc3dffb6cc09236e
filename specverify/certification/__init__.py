"""Certification: the scenario matrix, the α plan, the worker runner and the verdict.

``specverify.certify`` is the entry point; this package holds its parts. Importing it stays light (no torch): the
oracles and the statistics are imported when a certification runs.
"""

from specverify.certification.core import certify
from specverify.certification.evidence import Certificate, ScenarioResult
from specverify.certification.runner import DecoderFailure
from specverify.certification.scenarios import CORE, SCENARIOS, CertificationScenario, scenario_names

__all__ = [
    "certify",
    "Certificate",
    "ScenarioResult",
    "CertificationScenario",
    "SCENARIOS",
    "CORE",
    "DecoderFailure",
    "scenario_names",
]
