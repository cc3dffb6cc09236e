"""One scenario through its check, after the capability and float32 gates; the run-level reproducibility check.

What a part of a run (``execution.worker``) runs: a whole scenario through its gates and its check, with the
engine's counters over its calls, or the reproducibility check.
"""

from __future__ import annotations

from specverify.certification import checks
from specverify.certification.checks.judge import unfit_for_float32
from specverify.certification.results.counters import attach_counters
from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.run.context import BudgetSpent
from specverify.enums import NotRun
from specverify.errors import ProtocolViolation

__all__ = ["gate", "run_scenario", "gamma_span", "reproducibility"]


def gate(run, scenario) -> ScenarioResult | None:
    """The skipped result of a scenario the decoder cannot run fairly (an undeclared capability, a float32
    processor boundary too close), or None when it runs."""
    check = checks.check_for(scenario, run.config, run.matrix)
    caps = run.session.decoder(scenario).capabilities
    if check.uses_other(run):
        caps = caps & run.other.decoder(scenario).capabilities
    missing = sorted(checks.requirements(scenario, run.matrix) - caps)
    if missing:
        who = "a decoder does" if check.uses_other(run) else "the decoder does"
        return ScenarioResult.skipped(scenario, NotRun.UNDECLARED, f"not covered: {who} not declare {missing}")
    problem = unfit_for_float32(scenario, run.matrix)
    return ScenarioResult.skipped(scenario, NotRun.UNFIT, problem) if problem else None


def run_scenario(run, scenario) -> list:
    """``scenario``'s results: its gate's skipped result, or its check's results with the engine's counters."""
    skipped = gate(run, scenario)
    if skipped is not None:
        return [skipped]
    check = checks.check_for(scenario, run.config, run.matrix)
    with run.session.counting() as scope:  # the engine's own counters over this scenario's calls
        results = check.run(run, scenario)
        evidence = scope.close(run.session.handles())
    return attach_counters(results, evidence)


def gamma_span(run, scenario) -> tuple:
    """The (first, last) γ of the scenario's calls: its check's ``gamma_span`` where it has one (greedy sends γ 1
    to 4, batch-composition its small calls' γ then the request's), else the scenario's γ."""
    span = getattr(checks.check_for(scenario, run.config, run.matrix), "gamma_span", None)
    return span(scenario) if span else (scenario.num_draft_tokens, scenario.num_draft_tokens)


def reproducibility(run, chosen) -> tuple:
    """The separate reproducibility check on the first chosen scenario's pair: ``(reproducible, note)``; its
    failure, even a protocol violation, is ``reproducible=False``."""
    name = checks.REPRODUCIBILITY_SCENARIO
    home = _matrix_of(run, chosen[0]) if chosen else {}
    if name not in home:
        return None, f"not run: the matrix has no {name} scenario"
    try:
        return checks.check_reproducible(run, home[name])
    except BudgetSpent:
        return None, "not run: budget exhausted"
    except ProtocolViolation as exc:
        return False, f"the check's calls broke the protocol: {exc}"


def _matrix_of(run, scenario):
    """The matrix of the first chosen scenario's pair (its decoder is the one kept for the check)."""
    from specverify.certification.matrix.scenarios import matrix_of

    return run.matrix if run.config.user_pair else matrix_of(scenario.pair)
