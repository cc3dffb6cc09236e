"""One function per scenario kind: run it against the decoder and return its evidence."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

import numpy as np

from specverify.certification.acceptance import acceptance_evidence
from specverify.certification.collect import CHUNK, Tally, merge_draws, scenario_seed
from specverify.certification.evidence import ScenarioResult
from specverify.certification.metrics_check import metrics_evidence
from specverify.enums import ScenarioKind
from specverify.oracles.law import exact_law, greedy_outcome
from specverify.protocol import Request
from specverify.stats import (
    battery,
    collision_probability,
    collision_test,
    detectable_tv,
    plan_sample_size,
)

__all__ = [
    "run_sampling",
    "run_greedy",
    "run_collision",
    "run_mixed",
    "check_reproducible",
    "Plan",
    "judge",
    "budget_spent",
]

BATTERY_SIZE = 3  # omnibus + surprisal + max-cell
GREEDY_PROMPTS = 120
MIN_DISAGREEMENT = 0.3  # docs/design.md: the greedy draft's argmax must often disagree with the target's
COLLISION_PAIRS = {"quick": 2000, "standard": 5000, "thorough": 10000}
COLLISION_CHUNK = 2048  # requests per call: pairs never straddle two calls


class Plan:
    """The α budget: each of ``num_tests`` sampling tests gets α/num_tests, split over the battery.

    ``shares`` (set by a budget) gives each scenario a fraction of its plan; ``sequential`` stops sampling
    scenarios early at group-sequential looks (``specverify.stats.plan_sequential``)."""

    def __init__(self, *, alpha, epsilon, power, num_tests, level, seed, sequential=False):
        self.alpha, self.epsilon, self.power, self.level, self.seed = alpha, epsilon, power, level, seed
        self.num_tests = max(1, num_tests)
        self.alpha_scenario = alpha / self.num_tests
        self.alpha_test = self.alpha_scenario / BATTERY_SIZE
        self.sequential = sequential
        self.shares: dict | None = None

    def sample_size(self, law) -> int:
        return int(plan_sample_size(law.probs, self.epsilon, alpha=self.alpha_test, power=self.power))

    def allotted(self, name: str, planned: int) -> int:
        """What the budget lets scenario ``name`` draw of its ``planned`` N (all of it without a budget)."""
        from specverify.certification.budget import allotted

        return planned if self.shares is None else allotted(planned, self.shares.get(name.split("/")[0], 1.0))


MIN_MARGIN = 1e-3  # probability between any reachable row and a processor cut point (docs/design.md)


def unfit_for_float32(scenario) -> str | None:
    """Why a non-toy scenario cannot be run fairly (a processor boundary within ``MIN_MARGIN``), or None.

    Toy scenarios are built with the margin by construction (and tested); other families are checked here, before
    any draw, so a float32 engine is never failed for rounding."""
    if scenario.pair.family == "toy" or scenario.kind == ScenarioKind.MIXED:
        return None
    from specverify.oracles.law import boundary_margin

    target = scenario.models().target
    margin = boundary_margin(target, scenario.prompt, scenario.params)
    if margin < MIN_MARGIN:
        return (
            f"not run: the scenario comes within {margin:.2g} < {MIN_MARGIN:g} of a processor boundary on "
            f"the {scenario.pair.family} family (a float32 engine could be failed for rounding); a bug in the matrix"
        )
    return None


def _decode(law, outcome) -> str:
    tokens, reason = outcome
    return f"{law.text(outcome)!r} {list(tokens)} {reason}"


def judge(
    scenario, law, draws, plan, *, seed, reproduce, started, planned=None, decision=None, draft_law="model"
) -> ScenarioResult:
    """Evidence from observed ``draws`` against the exact ``law`` (battery, TV, worst, impossible, acceptance).

    ``planned``: the scenario's planned N (default ``draws.n``); ``decision``: the sequential decision it stopped
    on, whose any-time-valid p-value replaces the battery's (the battery is then evidence only); ``draft_law``: the
    decoder's (``DecoderHandle.draft_law``), which picks the acceptance expectation its counts are compared with."""
    vec, impossible = law.align(draws.outcomes)
    result = dict(
        name=scenario.name,
        kind=scenario.kind,
        exercises=scenario.exercises,
        covered=True,
        n=draws.n,
        planned_n=draws.n if planned is None else planned,
        num_outcomes=len(law),
        reproduce=reproduce,
        detectable_tv=float(detectable_tv(law.probs, max(draws.n, 1), alpha=plan.alpha_test, power=plan.power)),
    )
    if impossible:
        result.update(
            passed=False,
            pvalue=0.0,
            note="observed outcomes of exact probability 0",
            impossible=tuple((_decode(law, o), c) for o, c in impossible[:5]),
        )
    if vec.sum() > 0:
        bat = battery(vec, law.probs, alpha=plan.alpha_scenario, seed=seed)
        pvalue = min(1.0, BATTERY_SIZE * bat.pvalue_min)
        worst = tuple(
            (_decode(law, law.outcomes[w.index]), int(w.observed), float(w.expected_count), float(w.residual))
            for w in bat.worst
        )
        result.update(
            statistic=float(bat.gof.statistic),
            df=int(bat.gof.df),
            tests=tuple(bat.tests),
            worst=worst,
            tv_estimate=float(bat.tv.estimate),
            tv_interval=tuple(map(float, bat.tv.interval)),
            tv_null_quantile=float(bat.tv.null_quantile),
        )
        if decision is not None:
            pvalue = min(1.0, BATTERY_SIZE * float(decision.pvalue))
            fixed = plan.sample_size(law)
            result.update(
                note=f"sequential: {decision.status} at look {decision.look + 1}, N = {decision.n} "
                f"({decision.n / fixed:.2f}× the fixed plan's {fixed})"
            )
        if not impossible:
            result.update(pvalue=pvalue)
    if draws.accepted:
        result.update(acceptance_evidence(scenario, draws.accepted, law, draft_law, draws.prefill))
    if draws.rounds or draws.violation:
        result.update(metrics=metrics_evidence(scenario, draws, law, alpha=plan.alpha, draft_law=draft_law))
    result["elapsed_s"] = time.perf_counter() - started
    return ScenarioResult(**result)


def run_sampling(session, scenario, plan, reproduce) -> ScenarioResult:
    started = time.perf_counter()
    handle = session.decoder(scenario)
    law = exact_law(handle.pair.target, scenario.prompt, scenario.params)
    seed = scenario_seed(plan.seed, scenario.name)
    seeded = handle.seeded and scenario.seeded
    request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed if seeded else None)
    planned = plan.sample_size(law)
    n = plan.allotted(scenario.name, planned)
    if n == 0:
        return budget_spent(scenario, planned)
    decision = None
    if plan.sequential:  # under a budget, the design's looks up to the N allotted (its p-value is any-time valid)
        draws, decision = _draw_sequential(session, handle, request, law, plan, cap=None if n == planned else n)
        if decision is not None and decision.status != "continue":
            planned = draws.n  # the design ran to its decision (it never continues past its last look)
    if decision is None:
        draws = session.draw(handle, request, n)
    return judge(
        scenario,
        law,
        draws,
        plan,
        seed=seed,
        reproduce=reproduce,
        started=started,
        planned=planned,
        decision=decision,
        draft_law=handle.draft_law,
    )


def budget_spent(scenario, planned: int) -> ScenarioResult:
    return ScenarioResult(
        scenario.name,
        scenario.kind,
        scenario.exercises,
        covered=False,
        planned_n=planned,
        note="not run: budget exhausted (the share left would detect nothing)",
    )


def _draw_sequential(session, handle, request, law, plan, cap=None) -> tuple:
    """Draw look by look until the group-sequential design rejects or passes (or, with ``cap``, until the last look
    within ``cap`` draws: the decision may then be ``continue``; None when the first look is beyond it); chunk c of
    a seeded request uses its own derived seed, so no draw repeats (no protocol change)."""
    from specverify.stats import plan_sequential, sequential_decision

    design = plan_sequential(law.probs, plan.epsilon, alpha=plan.alpha_test, power=plan.power)
    draws, decision, done = None, None, 0
    if cap is not None and design.schedule[0] > cap:
        return None, None
    for look, target_n in enumerate(design.schedule):
        if cap is not None and target_n > cap:
            break
        seed = None if request.seed is None else (request.seed + 7919 * look) % 2**63
        draws = merge_draws(draws, session.draw(handle, replace(request, seed=seed), target_n - done))
        done = target_n
        vec, impossible = law.align(draws.outcomes)
        if impossible:
            break
        decision = sequential_decision(design, vec, look, previous=decision)
        if decision.status != "continue":
            break
    return draws, decision


def run_mixed(session, scenario, members, plan, reproduce) -> list:
    """Members' configurations interleaved in each call, on the mixed scenario's models; one result per member."""
    started = time.perf_counter()
    handle = session.decoder(scenario)
    laws = [exact_law(handle.pair.target, m.prompt, m.params) for m in members]
    planned = [plan.sample_size(law) for law in laws]
    sizes = [plan.allotted(scenario.name, n) for n in planned]
    if min(sizes) == 0:
        return [
            budget_spent(replace(m, name=f"{scenario.name}/{m.name}", kind=ScenarioKind.MIXED), n)
            for m, n in zip(members, planned)
        ]
    base = scenario_seed(plan.seed, scenario.name)
    order = [i for i in range(len(members)) for _ in range(sizes[i])]
    np.random.default_rng(base % 2**32).shuffle(order)
    requests = [
        Request(
            members[i].prompt,
            members[i].params,
            members[i].num_draft_tokens,
            seed=(base + j) % 2**63 if handle.seeded else None,
        )
        for j, i in enumerate(order)
    ]
    tallies = [Tally(m.num_draft_tokens) for m in members]
    completions = session.call_in_chunks(handle, requests, CHUNK)
    for i, (_, comp) in zip(order, completions):
        tallies[i].add(comp)
    out = []
    for i, member in enumerate(members):
        named = replace(member, name=f"{scenario.name}/{member.name}", kind=ScenarioKind.MIXED, pair=scenario.pair)
        draws = tallies[i].draws(sizes[i])
        out.append(
            judge(
                named,
                laws[i],
                draws,
                plan,
                seed=base + i,
                reproduce=reproduce,
                started=started,
                planned=planned[i],
                draft_law=handle.draft_law,
            )
        )
    return out


def run_greedy(session, scenario, plan, reproduce) -> ScenarioResult:
    """Temperature 0 on many prompts, drafts that often disagree with the target argmax: compared exactly."""
    started = time.perf_counter()
    handle = session.decoder(scenario)
    target, draft = handle.pair.target, handle.pair.draft
    rng = np.random.default_rng(scenario_seed(plan.seed, scenario.name) % 2**32)
    tokens = [t for t in range(target.vocab.size) if t != target.vocab.eos_token_id]
    prompts = [tuple(int(t) for t in rng.choice(tokens, size=int(rng.integers(1, 6)))) for _ in range(GREEDY_PROMPTS)]
    if scenario.pair.family != "toy":  # float32 engines: keep only prompts whose greedy path has a clear argmax
        from specverify.oracles.law import boundary_margin

        prompts = [p for p in prompts if boundary_margin(target, p, scenario.params) >= MIN_MARGIN]
    requests = [Request(p, scenario.params, 1 + i % 4) for i, p in enumerate(prompts)]
    mismatches, histories = [], []
    answers = [("", pair) for pair in session.call_in_chunks(handle, requests, handle.requests_per_call(len(requests)))]
    if "batch" in handle.capabilities:  # some prompts alone too: batch-size code paths must agree (bugs.md)
        answers += [(" (alone)", (r, session.call(handle, [r])[0])) for r in requests[: scenario.alone_prompts]]
    for how, (req, comp) in answers:
        want = greedy_outcome(target, req.prompt, req.params)
        if not how:
            histories += [req.prompt + want[0][:i] for i in range(len(want[0]))]
        if (comp.tokens, comp.finish_reason) != want:
            mismatches.append(
                f"prompt {list(req.prompt)} γ={req.num_draft_tokens}{how}: got {list(comp.tokens)} "
                f"{comp.finish_reason}, greedy target gives {list(want[0])} {want[1]}"
            )
    agree = target.logits(histories).argmax(-1) == draft.logits(histories).argmax(-1)
    disagree, positions = int((~agree).sum()), len(histories)
    rate = disagree / max(positions, 1)
    note = (
        f"{len(requests)} prompts{' (batched and alone)' if len(answers) > len(requests) else ''}; draft argmax "
        f"disagrees with the target at {rate:.0%} of positions (needs ≥ {MIN_DISAGREEMENT:.0%} to exercise "
        f"rejections: {'ok' if rate >= MIN_DISAGREEMENT else 'TOO LOW'})"
    )
    return ScenarioResult(
        name=scenario.name,
        kind=ScenarioKind.GREEDY,
        exercises=scenario.exercises,
        covered=True,
        passed=not mismatches,
        n=len(requests),
        planned_n=len(requests),
        note=note,
        mismatches=tuple(mismatches[:5]),
        reproduce=reproduce,
        elapsed_s=time.perf_counter() - started,
    )


def run_collision(session, scenario, plan, reproduce) -> ScenarioResult:
    """Disjoint pairs (2i, 2i+1) of identical unseeded requests in one call collide at rate Σp² when independent."""
    started = time.perf_counter()
    handle = session.decoder(scenario)
    law = exact_law(handle.pair.target, scenario.prompt, scenario.params)
    pairs = COLLISION_PAIRS.get(plan.level, 2000)
    requests = [Request(scenario.prompt, scenario.params, scenario.num_draft_tokens) for _ in range(2 * pairs)]
    outcomes = Counter()
    collisions, previous = 0, None
    for i, (_, comp) in enumerate(session.call_in_chunks(handle, requests, COLLISION_CHUNK)):
        outcome = (comp.tokens, comp.finish_reason)
        outcomes[outcome] += 1
        if i % 2:
            collisions += int(outcome == previous)
        previous = outcome
    _, impossible = law.align(outcomes)
    rate = collision_probability(law.probs)
    test = collision_test(pairs, collisions, rate)
    expected = pairs * rate
    note = f"{collisions} collisions in {pairs} pairs; independent requests expect {expected:.1f} (Σp² = {rate:.4f})"
    if test.pvalue < plan.alpha_scenario:
        note += (
            ": too many — identical unseeded requests share or replay randomness"
            if collisions > expected
            else ": too few — the law of unseeded requests is wrong (repeats rarer than the exact law gives)"
        )
    return ScenarioResult(
        name=scenario.name,
        kind=ScenarioKind.COLLISION,
        exercises=scenario.exercises,
        covered=True,
        passed=None,
        n=pairs,
        planned_n=pairs,
        pvalue=0.0 if impossible else float(test.pvalue),
        statistic=float(collisions),
        note=note,
        reproduce=reproduce,
        impossible=tuple((_decode(law, o), c) for o, c in impossible[:5]),
        elapsed_s=time.perf_counter() - started,
    )


def check_reproducible(session, scenario, plan) -> tuple:
    """Same seed -> same output, alone, inside a mixed batch (when the decoder declares ``batch``), and again.

    Never sends more requests per call than the decoder declared. Returns (ok, note)."""
    handle = session.decoder(scenario)
    if not handle.seeded:
        return None, "not checked: the decoder does not declare the 'seed' capability"
    batched = "batch" in handle.capabilities
    others = [
        Request(scenario.prompt, replace(scenario.params, temperature=0.7), 1),
        Request(scenario.prompt[:1], scenario.params, 2),
    ]
    for i in range(4):
        req = Request(
            scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=scenario_seed(plan.seed, "repro", i)
        )
        runs = [session.call(handle, [req])[0]]
        if batched:
            runs.append(session.call(handle, [others[0], req, others[1]])[1])
        runs.append(session.call(handle, [req])[0])
        outs = {(c.tokens, c.finish_reason) for c in runs}
        if len(outs) > 1:
            where = "alone / in a batch / again" if batched else "alone / again"
            return False, f"seed {req.seed}: outputs differ {where}: {sorted(outs)}"
    if batched:
        return True, "4 seeds gave identical outputs alone, in a mixed batch and on a second call"
    return True, "4 seeds gave identical outputs alone and on a second call (no 'batch': not checked in a batch)"
