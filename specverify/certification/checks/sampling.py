"""The ``sampling`` check: one request shape drawn N times (fixed plan, or group-sequential looks) against its
exact law."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from specverify.certification.checks.judge import budget_spent, judge, look_decision
from specverify.certification.matrix.laws import law_of
from specverify.certification.run.collect import merge_draws, scenario_seed
from specverify.certification.run.context import BATTERY_SIZE
from specverify.enums import ScenarioKind
from specverify.protocol import Request

__all__ = ["SamplingCheck"]


class SamplingCheck:
    """Law vs exact law: the pooled battery at the scenario's α share, N planned to detect the level's TV."""

    kind = ScenarioKind.SAMPLING

    def uses_other(self, run) -> bool:
        return False

    def requires(self, scenario, matrix) -> frozenset:
        return scenario.needs()

    def num_tests(self, scenario) -> int:
        return 1

    def planned_size(self, run, scenario) -> int:
        return run.plan.sample_size(law_of(scenario))

    def run(self, run, scenario) -> list:
        started = time.perf_counter()
        handle = run.session.decoder(scenario)
        law = law_of(scenario)
        seed = scenario_seed(run.seed, scenario.name)
        seeded = handle.seeded and scenario.seeded
        request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed if seeded else None)
        planned = run.plan.sample_size(law)
        n = run.allotted(scenario, planned)
        if n == 0:
            return [budget_spent(scenario, planned)]
        decision = looks = None
        if run.config.sequential:  # under a budget, the looks up to the N allotted (the p-value is any-time valid)
            draws, decision, looks = _draw_sequential(run, handle, request, law, cap=None if n == planned else n)
            if decision is not None and decision.status != "continue":
                planned = draws.n  # the design ran to its decision (it never continues past its last look)
        if decision is None:
            draws = run.session.draw(handle, request, n)
        result = judge(
            scenario,
            law,
            draws,
            run.plan,
            seed=seed,
            reproduce=run.reproduce(scenario),
            started=started,
            planned=planned,
            decision=decision,
            looks=looks,
            draft_law=handle.draft_law,
        )
        return [result]


def _draw_sequential(run, handle, request, law, cap=None) -> tuple:
    """Draw look by look until the group-sequential design rejects or passes (or, with ``cap``, until the last look
    within ``cap`` draws: the decision may then be ``continue``; None when the first look is beyond it). Look k draws
    the next stretch of the request's stream (``start`` = the draws so far), so the looks never repeat a draw and a
    seeded scenario's first N draws are the fixed plan's.

    An early pass needs the scenario's p-value (the battery's Bonferroni factor times the design's any-time p-value)
    above the family α: Holm rejects nothing above α, so a pass is never undone, and a scenario with strong
    evidence against it (p at or below α) is never passed early: it draws on to the design's last look (its
    largest N, about the fixed plan's). Returns ``(draws, decision, looks)``; ``looks`` is :class:`Looks`."""
    from specverify.stats import plan_sequential

    plan = run.plan
    design = plan_sequential(law.probs, plan.epsilon, alpha=plan.alpha_test, power=plan.power)
    floor = min(plan.alpha / BATTERY_SIZE, 0.5)
    draws, decision, done, held = None, None, 0, None
    if cap is not None and design.schedule[0] > cap:
        return None, None, None
    for look, target_n in enumerate(design.schedule):
        if cap is not None and target_n > cap:
            break
        draws = merge_draws(draws, run.session.draw(handle, request, target_n - done, start=done))
        done = target_n
        vec, impossible = law.align(draws.outcomes)
        if impossible:
            break
        decision = look_decision(design, law, vec, look, previous=decision, floor=floor)
        if decision.held and held is None:
            held = (look, decision.pvalue)
        if decision.status != "continue":
            break
    return draws, decision, Looks(design, held, plan.alpha)


@dataclass(frozen=True)
class Looks:
    """What the certificate says of a sequential scenario: its design, the first look whose early pass the p-value
    floor held back (``(look, design p-value)``, None if none) and the floor (the family α)."""

    design: object
    held: Optional[tuple]
    floor: float
