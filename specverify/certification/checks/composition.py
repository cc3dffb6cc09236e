"""The batch-composition scenario: a request's law must not depend on how many neighbours it has, or which.

One request shape R (seeded draws ``base + i``) is sent three ways, and each way's outcomes are tested against the
exact law on their own: ``alone`` (one request per call), ``pairs`` (R beside one different neighbour) and
``large`` (R every other request in calls of up to 512, among neighbours with other prompts, temperatures and
γ). Each is planned to detect a TV of ``SMALL_CALL_EPSILON`` (or the level's ε if larger): calls of one or two
requests cost a decoder call each, and a batch-size code path that changes the law usually changes it a lot;
large batches are also tested at the level's ε by ``mixed-batch``. Neighbours are validated like every completion
but not tested.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

from specverify.certification.checks.judge import budget_spent, judge
from specverify.certification.collect import Draws, scenario_seed
from specverify.certification.laws import law_of
from specverify.enums import ScenarioKind
from specverify.protocol import Request

__all__ = ["COMPOSITIONS", "SMALL_CALL_EPSILON", "CompositionCheck"]

COMPOSITIONS = ("alone", "pairs", "large")
SMALL_CALL_EPSILON = 0.2
LARGE_CALL = 512


def _planned(law, plan) -> int:
    return plan.sample_size_of(law.probs, max(plan.epsilon, SMALL_CALL_EPSILON))


def _law(scenario):
    return law_of(scenario)


class CompositionCheck:
    """One sampling test per composition (``alone``, ``pairs``, ``large``: three shares of α)."""

    kind = ScenarioKind.COMPOSITION

    def uses_other(self, run) -> bool:
        return False

    def requires(self, scenario, matrix) -> frozenset:
        return scenario.needs() | {"batch"}

    def num_tests(self, scenario) -> int:
        return len(COMPOSITIONS)

    def planned_size(self, run, scenario) -> int:
        """Outcomes of R the scenario draws over its three compositions."""
        return len(COMPOSITIONS) * _planned(_law(scenario), run.plan)

    def run(self, run, scenario) -> list:
        return run_composition(run, scenario)


def _neighbours(scenario, base: int) -> list:
    prompt = scenario.prompt
    shapes = [
        (prompt[:1], replace(scenario.params, temperature=0.7), 2),
        (prompt[::-1], replace(scenario.params, temperature=1.3), 1),
        (prompt + prompt[:1], scenario.params, 4),
    ]
    return [
        Request(p, params, gamma, seed=(base + 10_000_019 * (k + 1)) % 2**63)
        for k, (p, params, gamma) in enumerate(shapes)
    ]


def _calls(scenario, composition: str, n: int, seed_of, neighbours: list) -> list:
    """The calls of one composition as ``(requests, positions of R's draws)``; R's i-th draw has seed ``seed_of(i)``."""
    own = [Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed_of(i)) for i in range(n)]
    if composition == "alone":
        return [([r], (0,)) for r in own]
    if composition == "pairs":  # R first or second, beside each neighbour in turn
        return [
            ([neighbours[i % len(neighbours)], r], (1,)) if i % 2 else ([r, neighbours[i % len(neighbours)]], (0,))
            for i, r in enumerate(own)
        ]
    per_call, calls = LARGE_CALL // 2, []
    for start in range(0, n, per_call):
        call = []
        for j, r in enumerate(own[start : start + per_call]):
            call += [r, replace(neighbours[j % len(neighbours)], seed=(start + j) % 2**63)]
        calls.append((call, tuple(range(0, len(call), 2))))
    return calls


def run_composition(run, scenario) -> list:
    """One result per composition, each R-law against the exact law (members ``alone``, ``pairs``, ``large``)."""
    started = time.perf_counter()
    session, plan = run.session, run.plan
    handle = session.decoder(scenario)
    law = _law(scenario)
    base = scenario_seed(run.seed, scenario.name)
    neighbours = _neighbours(scenario, base)
    out = []
    for k, composition in enumerate(COMPOSITIONS):
        planned = _planned(law, plan)
        n = run.allotted(scenario, planned)
        if n == 0:
            out.append(budget_spent(scenario, planned, member=composition))
            continue
        seed = base + 1_000_003 * k

        def seed_of(i: int, s: int = seed) -> int | None:
            return (s + i) % 2**63 if handle.seeded else None

        outcomes, accepted = Counter(), Counter()
        for call, positions in _calls(scenario, composition, n, seed_of, neighbours):
            completions = session.call(handle, call)
            for position in positions:
                comp = completions[position]
                outcomes[(comp.tokens, comp.finish_reason)] += 1
                if comp.accepted:
                    accepted[comp.accepted[0]] += 1
        draws = Draws(outcomes, accepted or None, n)
        out.append(
            judge(
                scenario,
                law,
                draws,
                plan,
                seed=seed,
                reproduce=run.reproduce(scenario),
                started=started,
                planned=planned,
                draft_law=handle.draft_law,
                member=composition,
            )
        )
    return out
