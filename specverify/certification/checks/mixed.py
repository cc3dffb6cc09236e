"""The ``mixed`` check: the members' configurations (other scenarios of the matrix) interleaved in each call, on
the mixed scenario's models; one result per member, each against its own exact law."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterator

import numpy as np

from specverify.certification.checks.judge import budget_spent, judge
from specverify.certification.matrix.laws import law_of
from specverify.certification.run.bulk import reseeded
from specverify.certification.run.collect import CHUNK, Tally, scenario_seed
from specverify.enums import ScenarioKind
from specverify.protocol import Request

__all__ = ["MixedCheck"]


class MixedCheck:
    """One sampling test per member (its share of α each), in shuffled calls of up to ``CHUNK`` requests."""

    kind = ScenarioKind.MIXED

    def uses_other(self, run) -> bool:
        return False

    def requires(self, scenario, matrix) -> frozenset:
        needed = scenario.needs() | {"batch"}
        for member in scenario.members:
            needed |= matrix[member].needs()
        return needed

    def num_tests(self, scenario) -> int:
        return len(scenario.members)

    def planned_size(self, run, scenario) -> int:
        return sum(_planned(run, scenario))

    def run(self, run, scenario) -> list:
        started = time.perf_counter()
        handle = run.session.decoder(scenario)
        members = _members(run, scenario)
        laws = _laws(scenario, members)
        planned = [run.plan.sample_size(law) for law in laws]
        sizes = [run.allotted(scenario, n) for n in planned]
        if min(sizes) == 0:
            return [budget_spent(scenario, n, member=m.name) for m, n in zip(members, planned)]
        base = scenario_seed(run.seed, scenario.name)
        looks = _looks(run, laws) if run.config.sequential and sizes == planned else None
        if looks is not None:  # each member's design may draw to its last look (its max_n)
            sizes = [look.design.schedule[-1] for look in looks]
        templates = [Request(m.prompt, m.params, m.num_draft_tokens) for m in members]
        seeded = [handle.seeded and m.seeded for m in members]  # an unseeded member stays unseeded beside seeded ones
        tallies = [Tally(m.num_draft_tokens, handle.prefill_tokens, handle.draft_law) for m in members]
        offset = 0  # requests of the earlier phases: request j of the scenario has seed base + j
        for phase, group in enumerate(_phases(members, handle.fixed_gamma)):
            order = _interleaved(group, [sizes[i] for i in group], (base + phase) % 2**32)
            requests = _requests(templates, order, base + offset, seeded)
            offset += order.size
            done = 0
            for batch, completions in run.session.calls(handle, requests, CHUNK):
                owner = order[done : done + len(batch)]
                done += len(batch)
                for i in group:
                    mine = map(completions.__getitem__, np.flatnonzero(owner == i).tolist())
                    if looks is None:
                        tallies[i].add_all(mine)
                    else:
                        looks[i].add(tallies[i], list(mine), laws[i])
                if looks is not None and not any(looks[i].open for i in group):
                    break  # every member of the phase decided: the calls left are not needed
        if looks is not None:
            sizes = planned = [look.n for look in looks]
        out = []
        for i, member in enumerate(members):
            draws = tallies[i].draws(sizes[i])
            out.append(
                judge(
                    member,
                    laws[i],
                    draws,
                    run.plan,
                    seed=base + i,
                    reproduce=run.reproduce(scenario),
                    started=started,
                    planned=planned[i],
                    draft_law=handle.draft_law,
                    parent=scenario,
                    member=member.name,
                    **({} if looks is None else looks[i].evidence()),
                )
            )
        return out


class _MemberLooks:
    """One member's group-sequential design over its own draws, in the order the shuffled calls return them: a
    look at each ``schedule[k]`` of them, its tally cut there; once decided, its later draws are neighbours only
    (their completions are validated, not tested). Each member's looks see prefixes of its own independent draws, so
    its design's error bounds hold whatever the other members decide."""

    def __init__(self, design, floor: float, alpha: float, fixed: int):
        self.design, self.floor, self.alpha, self.fixed = design, floor, alpha, fixed
        self.look, self.decision, self.held, self.n, self.stopped = 0, None, None, 0, False

    @property
    def open(self) -> bool:
        return not self.stopped and (self.decision is None or self.decision.status == "continue")

    def add(self, tally, completions: list, law) -> None:
        from specverify.certification.checks.judge import look_decision

        while completions and self.open:
            take = self.design.schedule[self.look] - self.n
            tally.add_all(completions[:take])
            self.n += min(take, len(completions))
            completions = completions[take:]
            if self.n < self.design.schedule[self.look]:
                return
            vec, impossible = law.align(tally.outcomes)
            if impossible:  # probability 0 rejects outside α (judge says so); no look needed
                self.stopped = True
                return
            self.decision = look_decision(self.design, law, vec, self.look, previous=self.decision, floor=self.floor)
            if self.decision.held and self.held is None:
                self.held = (self.look, self.decision.pvalue)
            self.look += 1

    def evidence(self) -> dict:
        """``judge``'s sequential arguments."""
        from specverify.certification.checks.sampling import Looks

        if self.decision is None or self.stopped:  # an outcome of probability 0 fails it outside α (judge)
            return {}
        return dict(decision=self.decision, looks=Looks(self.design, self.held, self.alpha), fixed=self.fixed)


def _looks(run, laws) -> list:
    """Each member's design at the level's ε and the per-test α (``stats.plan_sequential``), as the sampling check
    plans a scenario's; the pass floor is the family α over the battery (``checks.sampling``)."""
    from specverify.certification.run.context import BATTERY_SIZE
    from specverify.stats import plan_sequential

    plan = run.plan
    floor = min(plan.alpha / BATTERY_SIZE, 0.5)
    return [
        _MemberLooks(
            plan_sequential(law.probs, plan.epsilon, alpha=plan.alpha_test, power=plan.power),
            floor,
            plan.alpha,
            plan.sample_size(law),
        )
        for law in laws
    ]


def _interleaved(group: list, sizes: list, seed: int) -> np.ndarray:
    """The member of each request: the members' requests in rounds, one of each member still drawing per round, in a
    random order within the round (each member's j-th request sorts at j + U(0, 1)). Every member thus progresses at
    the same rate while it has requests left, and each call mixes all of them. With the proportional shuffle it
    replaced, a member of few draws (``mixed-kinds``' greedy one: 114 against some 100,000) had its last request near
    the end of the stream, so the calls ran to the end before every member had decided (a standard vLLM run sent
    about 220,000 requests for 28,000 tested draws).
    The order depends on the seed alone, never on an outcome, so every member's looks still see prefixes of its own
    independent draws."""
    member = np.repeat(group, sizes)
    rank = np.concatenate([np.arange(n, dtype=np.float64) for n in sizes])
    keys = rank + np.random.default_rng(seed).random(member.size)
    return member[np.argsort(keys, kind="stable")]


def _phases(members, fixed_gamma: bool) -> list:
    """The members drawn together, as lists of member indices: all of them in every call, except for a decoder that
    fixes γ per engine (``fixed_gamma``: vLLM runs each γ on an engine of its own, one live at a time), which gets
    one phase per γ in the members' order. Such an engine runs a call's requests of each γ as a batch of their own
    anyway, so a call of one γ shows it every batch a mixed call would, without an engine switch per call (on
    vLLM ``mixed-kinds`` switched between γ 3 and γ 1 at every call)."""
    if not fixed_gamma:
        return [list(range(len(members)))]
    gammas = list(dict.fromkeys(m.num_draft_tokens for m in members))
    return [[i for i, m in enumerate(members) if m.num_draft_tokens == g] for g in gammas]


def _requests(templates: list, order: np.ndarray, base: int, seeded: list) -> Iterator[Request]:
    """Request j is a copy of ``templates[order[j]]`` with seed ``base + j`` (None where its member is unseeded:
    ``seeded[member]``), made a call's worth at a time: the few hundred thousand a scenario draws never live at once
    (each one alive at a full collection is walked by it)."""
    for start in range(0, order.size, CHUNK):
        part = order[start : start + CHUNK].tolist()
        seeds = [(base + j) % 2**63 if seeded[i] else None for j, i in zip(range(start, start + len(part)), part)]
        yield from reseeded(map(templates.__getitem__, part), seeds)


def _members(run, scenario) -> list:
    """The member scenarios, drawn on the mixed scenario's model pair."""
    return [replace(run.matrix[m], pair=scenario.pair) for m in scenario.members]


def _laws(scenario, members) -> list:
    return [law_of(scenario, m.prompt, m.params) for m in members]


def _planned(run, scenario) -> list:
    return [run.plan.sample_size(law) for law in _laws(scenario, _members(run, scenario))]
