"""Certification: scenarios, the α budget, the worker runner and the verdict."""

from specverify.certify.core import LEVELS, certify
from specverify.certify.evidence import VERDICTS, Certificate, ScenarioResult
from specverify.certify.runner import DecoderFailure
from specverify.certify.scenarios import CORE, SCENARIOS, Scenario, scenario_names

__all__ = ["certify", "Certificate", "ScenarioResult", "Scenario", "SCENARIOS", "CORE", "LEVELS", "VERDICTS",
           "DecoderFailure", "scenario_names"]
