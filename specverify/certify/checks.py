"""One function per scenario kind: run it against the decoder and return its evidence."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from specverify.certify.acceptance import first_round_acceptance_law
from specverify.certify.collect import counts_vector, scenario_seed
from specverify.certify.evidence import ScenarioResult
from specverify.oracles import exact_law, greedy_outcome
from specverify.protocol import Request
from specverify.stats import (battery, collision_probability, collision_test, detectable_tv, goodness_of_fit,
                              plan_sample_size)

__all__ = ["run_sampling", "run_greedy", "run_collision", "run_mixed", "check_reproducible", "Plan"]

BATTERY_SIZE = 3  # omnibus + surprisal + max-cell
GREEDY_PROMPTS = 120
COLLISION_PAIRS = {"quick": 2000, "standard": 5000, "thorough": 10000}


class Plan:
    """The α budget: each of ``num_tests`` sampling tests gets α/num_tests, split over the battery."""

    def __init__(self, *, alpha, epsilon, power, num_tests, level, seed):
        self.alpha, self.epsilon, self.power, self.level, self.seed = alpha, epsilon, power, level, seed
        self.num_tests = max(1, num_tests)
        self.alpha_scenario = alpha / self.num_tests
        self.alpha_test = self.alpha_scenario / BATTERY_SIZE

    def sample_size(self, law) -> int:
        return int(plan_sample_size(law.probs, self.epsilon, alpha=self.alpha_test, power=self.power))


def _decode(law, outcome) -> str:
    tokens, reason = outcome
    return f"{law.text(outcome)!r} {list(tokens)} {reason}"


def _judge(scenario, law, outcomes, accepted, plan, n, planned, seed, reproduce, started, extra=None):
    """Evidence from observed counts against the exact law (battery, TV, worst, impossible, acceptance)."""
    vec, impossible = counts_vector(outcomes, law)
    result = dict(name=scenario.name, kind=scenario.kind, exercises=scenario.exercises, covered=True, n=n,
                  planned_n=planned, num_outcomes=len(law), reproduce=reproduce,
                  detectable_tv=float(detectable_tv(law.probs, max(n, 1), alpha=plan.alpha_test, power=plan.power)))
    if impossible:
        impossible.sort(key=lambda oc: -oc[1])
        result.update(passed=False, pvalue=0.0, note="observed outcomes of exact probability 0",
                      impossible=tuple((_decode(law, o), c) for o, c in impossible[:5]))
    if vec.sum() > 0:
        bat = battery(vec, law.probs, alpha=plan.alpha_scenario, seed=seed)
        pvalue = min(1.0, BATTERY_SIZE * bat.pvalue_min)
        worst = tuple((_decode(law, law.outcomes[w.index]), int(w.observed), float(w.expected_count),
                       float(w.residual)) for w in bat.worst)
        result.update(statistic=float(bat.gof.statistic), df=int(bat.gof.df), tests=tuple(bat.tests), worst=worst,
                      tv_estimate=float(bat.tv.estimate), tv_interval=tuple(map(float, bat.tv.interval)),
                      tv_null_quantile=float(bat.tv.null_quantile))
        if not impossible:
            result.update(pvalue=pvalue)
    if accepted:
        result.update(_acceptance_evidence(scenario, accepted, law))
    result.update(extra or {})
    result["elapsed_s"] = time.perf_counter() - started
    return ScenarioResult(**result)


def _acceptance_evidence(scenario, accepted, law) -> dict:
    target, draft = scenario.models()
    expected = first_round_acceptance_law(target, draft, law.prompt, law.params, scenario.gamma)
    observed = np.array([accepted.get(m, 0) for m in range(scenario.gamma + 1)])
    support = expected > 0
    pvalue = None
    if observed[~support].sum() == 0 and support.sum() > 1:
        pvalue = float(goodness_of_fit(observed[support], expected[support]).pvalue)
    return dict(accepted_observed={int(m): int(c) for m, c in enumerate(observed)},
                accepted_expected=tuple(float(e) for e in expected), accepted_pvalue=pvalue)


def run_sampling(session, scenario, plan, reproduce) -> ScenarioResult:
    started = time.perf_counter()
    target, _ = scenario.models()
    key, (caps, has_sample) = session.decoder(scenario)
    law = exact_law(target, scenario.prompt, scenario.params)
    n = plan.sample_size(law)
    seed = scenario_seed(plan.seed, scenario.name)
    request = Request(scenario.prompt, scenario.params, scenario.gamma, seed=seed if "seed" in caps else None)
    outcomes, accepted = session.draw(key, caps, has_sample, request, n, target.vocab)
    return _judge(scenario, law, outcomes, accepted, plan, n, n, seed, reproduce, started)


def run_mixed(session, scenario, members, plan, reproduce) -> list:
    """Members' configurations interleaved in each call, on the mixed scenario's models; one result per member."""
    started = time.perf_counter()
    target, _ = scenario.models()
    key, (caps, _) = session.decoder(scenario)
    laws = [exact_law(target, m.prompt, m.params) for m in members]
    sizes = [plan.sample_size(law) for law in laws]
    seeded = "seed" in caps
    base = scenario_seed(plan.seed, scenario.name)
    counts = [dict() for _ in members]
    accepted = [dict() for _ in members]
    order = [i for i in range(len(members)) for _ in range(sizes[i])]
    np.random.default_rng(base % 2**32).shuffle(order)
    chunk = 8192
    for start in range(0, len(order), chunk):
        part = order[start:start + chunk]
        reqs = [Request(members[i].prompt, members[i].params, members[i].gamma,
                        seed=(base + start + j) % 2**63 if seeded else None) for j, i in enumerate(part)]
        for i, comp in zip(part, session.call(key, reqs, target.vocab)):
            outcome = (comp.tokens, comp.finish_reason)
            counts[i][outcome] = counts[i].get(outcome, 0) + 1
            if comp.accepted:
                accepted[i][comp.accepted[0]] = accepted[i].get(comp.accepted[0], 0) + 1
    out = []
    for i, member in enumerate(members):
        named = replace(member, name=f"{scenario.name}/{member.name}", kind="mixed",
                        vocab_size=scenario.vocab_size, target_seed=scenario.target_seed,
                        eos_bias=scenario.eos_bias, draft_distance=scenario.draft_distance,
                        draft_seed=scenario.draft_seed, target_scale=scenario.target_scale,
                        target_zero=scenario.target_zero, draft_zero=scenario.draft_zero)
        out.append(_judge(named, laws[i], counts[i], accepted[i] or None, plan, sizes[i], sizes[i], base + i,
                          reproduce, started))
    return out


def run_greedy(session, scenario, plan, reproduce) -> ScenarioResult:
    """Temperature 0 on many prompts, drafts that often disagree with the target argmax: compared exactly."""
    started = time.perf_counter()
    target, draft = scenario.models()
    key, (caps, _) = session.decoder(scenario)
    rng = np.random.default_rng(scenario_seed(plan.seed, scenario.name) % 2**32)
    tokens = [t for t in range(target.vocab.size) if t != target.vocab.eos_token_id]
    prompts = [tuple(int(t) for t in rng.choice(tokens, size=int(rng.integers(1, 6)))) for _ in range(GREEDY_PROMPTS)]
    requests = [Request(p, scenario.params, 1 + i % 4) for i, p in enumerate(prompts)]
    if "batch" in caps:
        completions = session.call(key, requests, target.vocab)
    else:
        completions = [session.call(key, [r], target.vocab)[0] for r in requests]
    mismatches, histories = [], []
    for req, comp in zip(requests, completions):
        want = greedy_outcome(target, req.prompt, req.params)
        histories += [req.prompt + want[0][:i] for i in range(len(want[0]))]
        if (comp.tokens, comp.finish_reason) != want:
            mismatches.append(f"prompt {list(req.prompt)} γ={req.num_draft_tokens}: got {list(comp.tokens)} "
                              f"{comp.finish_reason}, greedy target gives {list(want[0])} {want[1]}")
    agree = target.logits(histories).argmax(-1) == draft.logits(histories).argmax(-1)
    disagree, positions = int((~agree).sum()), len(histories)
    note = f"{len(requests)} prompts; draft argmax disagrees with the target at {disagree / max(positions, 1):.0%} " \
           "of positions"
    return ScenarioResult(name=scenario.name, kind="greedy", exercises=scenario.exercises, covered=True,
                          passed=not mismatches, n=len(requests), planned_n=len(requests), note=note,
                          mismatches=tuple(mismatches[:5]), reproduce=reproduce,
                          elapsed_s=time.perf_counter() - started)


def run_collision(session, scenario, plan, reproduce) -> ScenarioResult:
    """Disjoint pairs (2i, 2i+1) of identical unseeded requests in one call collide at rate Σp² when independent."""
    started = time.perf_counter()
    target, _ = scenario.models()
    key, (caps, _) = session.decoder(scenario)
    law = exact_law(target, scenario.prompt, scenario.params)
    pairs = COLLISION_PAIRS.get(plan.level, 2000)
    collisions, outcomes = 0, {}
    for start in range(0, pairs, 1024):
        size = min(1024, pairs - start)
        reqs = [Request(scenario.prompt, scenario.params, scenario.gamma) for _ in range(2 * size)]
        comps = session.call(key, reqs, target.vocab)
        for a, b in zip(comps[0::2], comps[1::2]):
            collisions += int((a.tokens, a.finish_reason) == (b.tokens, b.finish_reason))
        for c in comps:
            o = (c.tokens, c.finish_reason)
            outcomes[o] = outcomes.get(o, 0) + 1
    _, impossible = counts_vector(outcomes, law)
    rate = collision_probability(law.probs)
    test = collision_test(pairs, collisions, rate)
    note = f"{collisions} collisions in {pairs} pairs; independent requests expect {pairs * rate:.1f} (Σp² = {rate:.4f})"
    return ScenarioResult(name=scenario.name, kind="collision", exercises=scenario.exercises, covered=True,
                          passed=None, n=pairs, planned_n=pairs, pvalue=0.0 if impossible else float(test.pvalue),
                          statistic=float(collisions), note=note, reproduce=reproduce,
                          impossible=tuple((_decode(law, o), c) for o, c in impossible[:5]),
                          elapsed_s=time.perf_counter() - started)


def check_reproducible(session, scenario, plan) -> tuple:
    """Same seed -> same output, alone, inside a mixed batch, and again. Returns (ok, note)."""
    target, _ = scenario.models()
    key, (caps, _) = session.decoder(scenario)
    if "seed" not in caps:
        return None, "not checked: the decoder does not declare the 'seed' capability"
    others = [Request(scenario.prompt, replace(scenario.params, temperature=0.7), 1),
              Request(scenario.prompt[:1], scenario.params, 2)]
    for i in range(4):
        req = Request(scenario.prompt, scenario.params, scenario.gamma, seed=scenario_seed(plan.seed, "repro", i))
        alone = session.call(key, [req], target.vocab)[0]
        batched = session.call(key, [others[0], req, others[1]], target.vocab)[1]
        again = session.call(key, [req], target.vocab)[0]
        outs = {(c.tokens, c.finish_reason) for c in (alone, batched, again)}
        if len(outs) > 1:
            return False, f"seed {req.seed}: outputs differ alone / in a batch / again: {sorted(outs)}"
    return True, "4 seeds gave identical outputs alone, in a mixed batch and on a second call"
