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
    "sequential_alone_epsilon",
    "small_looks",
    "small_prefix",
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


def sequential_alone_epsilon(epsilon: float) -> float:
    """The TV the ``alone`` test's sequential design is planned at: √2 × ``small``'s (quick 0.14, standard and
    thorough 0.057), below the √3 × that the fixed plan's ``A`` draws detect (0.17, 0.069). At √3 the design's
    early passes cost the calls-of-one defect of TV 0.04 half its power at standard (0.66 → 0.36, simulated); at
    √2 it is caught more often than by the fixed plan, for less than half its calls on an exact decoder
    (``benchmarks/composition_sequential.py``)."""
    return min(LARGE_CALL_EPSILON, math.sqrt(2.0) * small_call_epsilon(epsilon))


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


def _small_calls(shape, calls: int, seed_of, singles=None, doubles=None) -> tuple:
    """Calls of one request (the i-th for i in ``singles``, default ``range(calls)``) and of two (the j-th for j in
    ``doubles``), every request a draw of ``shape``, as ``(requests, positions)`` lists; the i-th draw in calls of
    ``size`` has seed ``seed_of(size, i)`` (the j-th call of two holds draws 2j and 2j + 1)."""

    def draw(size: int, i: int) -> Request:
        return Request(shape.prompt, shape.params, shape.num_draft_tokens, seed=seed_of(size, i))

    singles = range(calls) if singles is None else singles
    doubles = range(calls) if doubles is None else doubles
    alone = [([draw(1, i)], (0,)) for i in singles]
    return alone, [([draw(2, 2 * j), draw(2, 2 * j + 1)], (0, 1)) for j in doubles]


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


def _outcomes(session, handle, calls) -> list:
    """``(outcome, first-round accepted count or None)`` of every tested position of ``calls``, in order (sent
    through :meth:`Session.call_each`: no round trip to the worker between two calls)."""
    out = []
    for (_, positions), completions in zip(calls, session.call_each(handle, [call for call, _ in calls])):
        for position in positions:
            comp = completions[position]
            out.append(((comp.tokens, comp.finish_reason), comp.accepted[0] if comp.accepted else None))
    return out


def _as_draws(drawn: list) -> Draws:
    """``Draws`` of ``(outcome, accepted)`` pairs (:func:`_outcomes`)."""
    outcomes = Counter(o for o, _ in drawn)
    accepted = Counter(a for _, a in drawn if a is not None)
    return Draws(outcomes, accepted or None, len(drawn))


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
    """The ``small`` and ``alone`` results: calls of one request and of two, all draws of S (fixed plan: ``A`` of
    each; under sequential looks: :func:`small_looks`, as many as the two designs ask for)."""
    shape = small_call_shape(scenario)
    law = law_of(shape)
    calls = run.allotted(scenario, sizes["small"]) // 3

    def seed_of(size: int, i: int) -> int | None:
        return (base + _SEED_STRIDE * (size - 1) + i) % 2**63 if handle.seeded else None

    if calls == 0:
        return [budget_spent(scenario, sizes[m], member=m) for m in ("small", "alone")]
    stream = _CallStream(run.session, handle, shape, seed_of)
    decisions = None
    if run.config.sequential and calls == sizes["calls_alone"]:  # a budget's cut share keeps the fixed plan
        decisions = small_looks(law, run.plan, sizes, stream.more)
    else:
        stream.more(calls, calls)
    small, alone = stream.draws(decisions)
    common = dict(reproduce=run.reproduce(scenario), started=started, draft_law=handle.draft_law, parent=scenario)
    out = []
    for member, draws, seed in (("small", small, base), ("alone", alone, base + 1)):
        _, decision, looks = decisions[member] if decisions else (None, None, None)
        planned = sizes[member] if decision is None or decision.status == "continue" else draws.n
        out.append(
            judge(
                shape,
                law,
                draws,
                run.plan,
                seed=seed,
                planned=planned,
                member=member,
                decision=decision,
                looks=looks,
                fixed=sizes[member],
                **common,
            )  # fmt: skip
        )
    return out


class _CallStream:
    """The calls of one and of two requests of a composition run, in order: ``alone[i]`` the outcome and first-round
    accepted count of the i-th call of one, ``pairs[2j]``, ``pairs[2j + 1]`` those of the j-th call of two."""

    def __init__(self, session, handle, shape, seed_of):
        self.session, self.handle, self.shape, self.seed_of = session, handle, shape, seed_of
        self.alone: list = []
        self.pairs: list = []

    def more(self, alone: int, pairs: int) -> tuple:
        """Make calls until there are ``alone`` calls of one and ``pairs`` calls of two; returns the outcome lists
        (``alone``, ``pairs`` flattened)."""
        have_alone, have_pairs = len(self.alone), len(self.pairs) // 2
        singles, doubles = _small_calls(self.shape, 0, self.seed_of, range(have_alone, alone), range(have_pairs, pairs))
        self.alone += _outcomes(self.session, self.handle, singles)
        self.pairs += _outcomes(self.session, self.handle, doubles)
        return [o for o, _ in self.alone], [o for o, _ in self.pairs]

    def draws(self, decisions) -> tuple:
        """``(small, alone)`` as ``Draws``: every call made (fixed plan), or the prefixes each design stopped at."""
        n_small = 3 * len(self.alone) if decisions is None else decisions["small"][0]
        n_alone = len(self.alone) if decisions is None else decisions["alone"][0]
        return _as_draws(small_prefix(self.alone, self.pairs, n_small)), _as_draws(self.alone[:n_alone])


def small_prefix(alone: list, pairs: list, n: int) -> list:
    """The first ``n`` draws of ``small``'s stream: a call of one's draw, then the two draws of a call of two, in
    turn (draw i: ``alone[i // 3]`` when i % 3 == 0, else ``pairs[2 (i // 3) + i % 3 - 1]``). Needs ``ceil(n / 3)``
    calls of one and ``(n + 1) // 3`` calls of two; the fixed plan's 3A draws are every call made."""
    check(
        len(alone) >= -(-n // 3) and len(pairs) >= 2 * ((n + 1) // 3),
        f"n={n!r} needs {-(-n // 3)} calls of one and {(n + 1) // 3} of two: {len(alone)} and {len(pairs) // 2} made",
    )
    return [alone[i // 3] if i % 3 == 0 else pairs[2 * (i // 3) + i % 3 - 1] for i in range(n)]


def small_looks(law, plan, sizes: dict, more) -> dict:
    """Both small-call tests under group-sequential looks (``stats.plan_sequential``), each on a prefix of its own
    stream of draws: ``small`` at its planned TV on :func:`small_prefix`'s stream (calls of one and of two in
    turn), ``alone`` at :func:`sequential_alone_epsilon` on the calls of one. Looks are
    taken in order of the calls they need, so the two designs share every call of one either needs; a test stops at
    its decision and its draws past that prefix are not its evidence. Each design's error bounds hold on its own
    stream whatever the other test does (its looks see prefixes of one sequence of independent draws; the other
    test only decides how far past them calls are made).

    ``more(alone, pairs)`` makes calls until there are ``alone`` calls of one and ``pairs`` of two and returns the
    outcome lists (``alone``, ``pairs`` flattened). Returns ``{member: (draws used, decision, Looks)}``: the
    decision is None when an outcome of probability 0 stopped the test (it fails outside α: ``judge``)."""
    from specverify.certification.checks.sampling import Looks
    from specverify.certification.run.context import BATTERY_SIZE
    from specverify.stats import plan_sequential

    eps = {"small": sizes["small_epsilon"]}
    eps["alone"] = sequential_alone_epsilon(plan.epsilon)
    designs = {m: plan_sequential(law.probs, eps[m], alpha=plan.alpha_test, power=plan.power) for m in eps}
    floor = min(plan.alpha / BATTERY_SIZE, 0.5)
    state = {m: dict(look=0, decision=None, held=None, n=0, stopped=False) for m in designs}

    def needs(member: str) -> tuple:
        n = designs[member].schedule[state[member]["look"]]
        return (n, 0) if member == "alone" else (-(-n // 3), (n + 1) // 3)

    alone, pairs = [], []
    while open_ := [m for m in designs if _open(state[m])]:
        member = min(open_, key=lambda m: sum(needs(m)))  # the look that needs the fewest calls first
        want_alone, want_pairs = needs(member)
        alone, pairs = more(max(want_alone, len(alone)), max(want_pairs, len(pairs) // 2))
        n = designs[member].schedule[state[member]["look"]]
        seen = alone[:n] if member == "alone" else small_prefix(alone, pairs, n)
        _look(state[member], designs[member], law, seen, floor)
    return {
        m: (
            state[m]["n"],
            None if state[m]["stopped"] else state[m]["decision"],
            Looks(designs[m], state[m]["held"], plan.alpha),
        )
        for m in designs
    }


def _open(state: dict) -> bool:
    """Whether a member's design draws on: no decision yet, or ``continue`` (never after its last look, which
    always decides) and no outcome of probability 0 seen."""
    decision = state["decision"]
    return not state["stopped"] and (decision is None or decision.status == "continue")


def _look(state: dict, design, law, outcomes: list, floor: float) -> None:
    """One look of a member's design on its first ``schedule[look]`` draws (``outcomes``). An outcome of exact
    probability 0 stops the member there (it rejects outside α: ``judge`` says so)."""
    from specverify.certification.checks.judge import look_decision

    vec, impossible = law.align(Counter(outcomes))
    state["n"] = len(outcomes)
    if impossible:
        state["stopped"] = True
        return
    look = state["look"]
    decision = look_decision(design, law, vec, look, previous=state["decision"], floor=floor)
    if decision.held and state["held"] is None:
        state["held"] = (look, decision.pvalue)
    state["decision"], state["look"] = decision, look + 1
