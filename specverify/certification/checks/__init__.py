"""One check per scenario kind, and the run-level checks — the table ``certify`` loops over.

=============  ==========================  ===========================  =========================  ===============
kind           check                       requires (beyond its params)  planned size (outcomes)    tests in α plan
=============  ==========================  ===========================  =========================  ===============
sampling       ``SamplingCheck``           —                             N of its exact law         1
greedy         ``GreedyCheck``             —                             its prompts (120)          0
collision      ``CollisionCheck``          ``batch``                     2 × pairs of the level     1
mixed          ``MixedCheck``              ``batch``, members' params    Σ members' N               one per member
composition    ``CompositionCheck``        ``batch``                     small + large (below)      3
=============  ==========================  ===========================  =========================  ===============

Composition plans its calls of one or two requests at ``max(2ε, 0.04)`` on a shape cut to three tokens (tested as
``small``, and the calls of one alone as ``alone``) and its large calls at TV 0.2 (``large``); its planned size is
the tested draws of both (``checks.composition.composition_plan``).

Run-level: ``TwoSampleCheck`` replaces the sampling check under ``--against`` (and on a user's own checkpoints,
where there is no exact law: its N then comes from a pilot); ``check_reproducible`` runs once after the scenarios.
Every check has ``requires(scenario, matrix)``, ``num_tests(scenario)``, ``planned_size(run, scenario)``,
``uses_other(run)`` (whether it also draws from the ``--against`` decoder) and ``run(run, scenario)`` → a list of
``ScenarioResult``.
"""

from __future__ import annotations

from specverify.certification.checks.collision import CollisionCheck
from specverify.certification.checks.composition import CompositionCheck
from specverify.certification.checks.greedy import GreedyCheck
from specverify.certification.checks.mixed import MixedCheck
from specverify.certification.checks.reproducible import REPRODUCIBILITY_SCENARIO, check_reproducible
from specverify.certification.checks.sampling import SamplingCheck
from specverify.certification.checks.twosample import TwoSampleCheck
from specverify.enums import ScenarioKind

__all__ = [
    "CHECKS",
    "TWO_SAMPLE",
    "check_for",
    "requirements",
    "num_tests",
    "check_reproducible",
    "REPRODUCIBILITY_SCENARIO",
]

CHECKS = {
    ScenarioKind.SAMPLING: SamplingCheck(),
    ScenarioKind.GREEDY: GreedyCheck(),
    ScenarioKind.COLLISION: CollisionCheck(),
    ScenarioKind.MIXED: MixedCheck(),
    ScenarioKind.COMPOSITION: CompositionCheck(),
}
TWO_SAMPLE = TwoSampleCheck()


def check_for(scenario, config, matrix) -> object:
    """The check that runs ``scenario`` in this configuration: two-sample for sampling scenarios under
    ``--against`` or without an exact law, else its kind's."""
    if scenario.kind == ScenarioKind.SAMPLING and (config.against or not matrix.exact_law):
        return TWO_SAMPLE
    return CHECKS[scenario.kind]


def requirements(scenario, matrix) -> frozenset:
    """The capabilities a decoder must declare for ``scenario`` of ``matrix`` to run."""
    return frozenset(CHECKS[scenario.kind].requires(scenario, matrix))


def num_tests(matrix) -> int:
    """``m`` of the α plan: the sampling tests of the whole matrix (so ``--scenario NAME`` draws what the full run
    draws)."""
    return max(1, sum(CHECKS[s.kind].num_tests(s) for s in matrix.values()))
