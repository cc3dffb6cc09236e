"""The batch-composition scenario: a request's law must not depend on how many neighbours it has, or which.

Three tests (three shares of α, as before), each against the exact law (docs/design.md, *Batch composition*):

- ``small``: every draw made in a call of one or two requests. The calls carry nothing but tested draws: ``A`` calls
  of one request and ``A`` calls of two, both requests of the call being draws (distinct seeds) of the small-call
  shape S, so a call of two yields two draws. S is the scenario's request cut to ``SMALL_MAX_TOKENS`` tokens and
  ``SMALL_GAMMA`` drafts: a first-position rejection, a middle rejection and a bonus still occur, and its law has
  few outcomes (40 on the toy pair, against 121), which halves the draws a TV costs. Planned at
  :func:`small_call_epsilon` (twice the level's ε, not below ``SMALL_CALL_FLOOR``).
- ``alone``: the ``A`` draws of the calls of one request on their own (a path taken only at batch size one shows
  here undiluted; ``small`` sees it at a third of its TV).
- ``large``: the scenario's own request R every other request in calls of up to ``LARGE_CALL``, among neighbours
  with other prompts, temperatures and γ, planned at TV ``LARGE_CALL_EPSILON``; large batches are also tested at
  the level's ε by ``mixed-batch``. Neighbours are validated like every completion but not tested. For a decoder
  that declares ``fixed_gamma`` (one engine per γ: vLLM) the neighbours take R's γ, so they share R's engine and
  batch instead of running on three other engines (the plan and the laws are unchanged).

Calls of one or two requests cost one decoder call per one or two draws, so their plan is a compromise between power
and calls (``benchmarks/composition_cost.py`` prints both); the results carry the TV each test could detect.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import replace

from specverify.certification.checks.judge import budget_spent, judge
from specverify.certification.matrix.laws import law_of
from specverify.certification.run.collect import Draws, scenario_seed
from specverify.enums import ScenarioKind
from specverify.errors import check
from specverify.protocol import Request

__all__ = [
    "COMPOSITIONS",
    "LARGE_CALL_EPSILON",
    "SMALL_CALL_FLOOR",
    "SMALL_MAX_TOKENS",
    "SMALL_GAMMA",
    "CompositionCheck",
    "small_call_epsilon",
    "small_call_shape",
    "composition_plan",
]

COMPOSITIONS = ("small", "alone", "large")
LARGE_CALL_EPSILON = 0.2
SMALL_CALL_FLOOR = 0.04  # 2ε at thorough (0.02) would cost 4x the calls of 0.04: ~43,000 calls of one or two
SMALL_MAX_TOKENS = 3
SMALL_GAMMA = 2
LARGE_CALL = 512
_SEED_STRIDE = 1_000_003  # between the compositions' seed ranges (k = 0 calls of one, 1 calls of two, 2 large)


def small_call_epsilon(epsilon: float) -> float:
    """The TV the ``small`` test is planned to detect at a level of TV ``epsilon``: ``max(2ε, SMALL_CALL_FLOOR)``
    (quick 0.1, standard and thorough 0.04), never above ``LARGE_CALL_EPSILON``."""
    check(0 < epsilon <= 1, f"epsilon={epsilon!r} must be a TV in (0, 1], e.g. Level.QUICK.epsilon.")
    return min(LARGE_CALL_EPSILON, max(2.0 * epsilon, SMALL_CALL_FLOOR))


def small_call_shape(scenario) -> object:
    """The request shape the calls of one or two requests draw: ``scenario``'s, cut to ``SMALL_MAX_TOKENS`` tokens
    and ``SMALL_GAMMA`` drafts (never longer than the scenario's own)."""
    cut = min(scenario.params.max_tokens, SMALL_MAX_TOKENS)
    params = replace(scenario.params, max_tokens=cut, min_tokens=min(scenario.params.min_tokens, cut))
    return replace(scenario, params=params, num_draft_tokens=min(scenario.num_draft_tokens, SMALL_GAMMA))


def composition_plan(plan, scenario) -> dict:
    """Planned draws per test and decoder calls of one or two requests under the α ``plan``:
    ``{"small", "alone", "large", "calls_alone", "calls_pairs", "small_epsilon"}``."""
    small_law = law_of(small_call_shape(scenario))
    eps = small_call_epsilon(plan.epsilon)
    alone = math.ceil(plan.sample_size_of(small_law.probs, eps) / 3)
    large = plan.sample_size_of(law_of(scenario).probs, max(plan.epsilon, LARGE_CALL_EPSILON))
    return dict(small=3 * alone, alone=alone, large=large, calls_alone=alone, calls_pairs=alone, small_epsilon=eps)


class CompositionCheck:
    """Three sampling tests (``small``, ``alone``, ``large``: three shares of α); ``alone``'s draws are part of
    ``small``'s (Bonferroni holds under any dependence)."""

    kind = ScenarioKind.COMPOSITION

    def uses_other(self, run) -> bool:
        return False

    def requires(self, scenario, matrix) -> frozenset:
        return scenario.needs() | {"batch"}

    def num_tests(self, scenario) -> int:
        return len(COMPOSITIONS)

    def planned_size(self, run, scenario) -> int:
        """Tested draws the scenario makes: those of the small calls and R's in the large calls."""
        sizes = composition_plan(run.plan, scenario)
        return sizes["small"] + sizes["large"]

    def gamma_span(self, scenario) -> tuple:
        """The (first, last) γ of its calls: the small calls' shape, then R's (the run order)."""
        return small_call_shape(scenario).num_draft_tokens, scenario.num_draft_tokens

    def run(self, run, scenario) -> list:
        return run_composition(run, scenario)


def _neighbours(scenario, base: int, fixed_gamma: bool = False) -> list:
    """R's neighbours in the large calls: other prompts and temperatures, and other γ unless the decoder fixes γ
    per engine (``fixed_gamma``: a neighbour of another γ would run on another engine, never beside R)."""
    prompt = scenario.prompt
    gammas = (scenario.num_draft_tokens,) * 3 if fixed_gamma else (2, 1, 4)
    shapes = [
        (prompt[:1], replace(scenario.params, temperature=0.7), gammas[0]),
        (prompt[::-1], replace(scenario.params, temperature=1.3), gammas[1]),
        (prompt + prompt[:1], scenario.params, gammas[2]),
    ]
    return [
        Request(p, params, gamma, seed=(base + 10_000_019 * (k + 1)) % 2**63)
        for k, (p, params, gamma) in enumerate(shapes)
    ]


def _small_calls(shape, calls: int, seed_of) -> tuple:
    """``calls`` calls of one request and ``calls`` calls of two, every request a draw of ``shape``, as
    ``(requests, positions)`` lists; the i-th draw in calls of ``size`` has seed ``seed_of(size, i)``."""

    def draw(size: int, i: int) -> Request:
        return Request(shape.prompt, shape.params, shape.num_draft_tokens, seed=seed_of(size, i))

    alone = [([draw(1, i)], (0,)) for i in range(calls)]
    return alone, [([draw(2, 2 * j), draw(2, 2 * j + 1)], (0, 1)) for j in range(calls)]


def _large_calls(scenario, n: int, seed_of, neighbours: list) -> list:
    """R every other request in calls of up to ``LARGE_CALL``; R's i-th draw has seed ``seed_of(i)``, and its
    neighbours are seeded only when R is (a decoder that does not declare ``seed`` never receives one)."""
    own = [Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed_of(i)) for i in range(n)]
    per_call, calls = LARGE_CALL // 2, []
    for start in range(0, n, per_call):
        call = []
        for j, r in enumerate(own[start : start + per_call]):
            seed = None if r.seed is None else (start + j) % 2**63
            call += [r, replace(neighbours[j % len(neighbours)], seed=seed)]
        calls.append((call, tuple(range(0, len(call), 2))))
    return calls


def _tally(session, handle, calls) -> tuple:
    """Outcomes and first-round accepted counts of the tested positions of ``calls`` (``(requests, positions)``)."""
    outcomes, accepted = Counter(), Counter()
    for call, positions in calls:
        completions = session.call(handle, call)
        for position in positions:
            comp = completions[position]
            outcomes[(comp.tokens, comp.finish_reason)] += 1
            if comp.accepted:
                accepted[comp.accepted[0]] += 1
    return outcomes, accepted


def run_composition(run, scenario) -> list:
    """One result per test, each against its shape's exact law (members ``small``, ``alone``, ``large``)."""
    started = time.perf_counter()
    session, plan = run.session, run.plan
    handle = session.decoder(scenario)
    base = scenario_seed(run.seed, scenario.name)
    sizes = composition_plan(plan, scenario)
    out = _run_small(run, scenario, handle, base, sizes, started)
    planned = sizes["large"]
    n = run.allotted(scenario, planned)
    if n == 0:
        return out + [budget_spent(scenario, planned, member="large")]
    seed = base + _SEED_STRIDE * 2

    def seed_of(i: int) -> int | None:
        return (seed + i) % 2**63 if handle.seeded else None

    neighbours = _neighbours(scenario, base, getattr(handle, "fixed_gamma", False))
    calls = _large_calls(scenario, n, seed_of, neighbours)
    outcomes, accepted = _tally(session, handle, calls)
    draws = Draws(outcomes, accepted or None, n)
    common = dict(reproduce=run.reproduce(scenario), started=started, draft_law=handle.draft_law)
    return out + [judge(scenario, law_of(scenario), draws, plan, seed=seed, planned=planned, member="large", **common)]


def _run_small(run, scenario, handle, base: int, sizes: dict, started: float) -> list:
    """The ``small`` and ``alone`` results: ``A`` calls of one request and ``A`` of two, all draws of S."""
    shape = small_call_shape(scenario)
    law = law_of(shape)
    calls = run.allotted(scenario, sizes["small"]) // 3
    if calls == 0:
        return [budget_spent(scenario, sizes[m], member=m) for m in ("small", "alone")]

    def seed_of(size: int, i: int) -> int | None:
        return (base + _SEED_STRIDE * (size - 1) + i) % 2**63 if handle.seeded else None

    alone_calls, pair_calls = _small_calls(shape, calls, seed_of)
    outcomes, accepted = _tally(run.session, handle, alone_calls)
    pair_outcomes, pair_accepted = _tally(run.session, handle, pair_calls)
    alone = Draws(outcomes, accepted or None, calls)
    small = Draws(outcomes + pair_outcomes, (accepted + pair_accepted) or None, 3 * calls)
    common = dict(reproduce=run.reproduce(scenario), started=started, draft_law=handle.draft_law, parent=scenario)
    return [
        judge(shape, law, small, run.plan, seed=base, planned=sizes["small"], member="small", **common),
        judge(shape, law, alone, run.plan, seed=base + 1, planned=sizes["alone"], member="alone", **common),
    ]
