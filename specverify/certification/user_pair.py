"""Two-sample certification on a user's own checkpoints (``--target DIR --draft DIR``): no exact law exists.

The speculative decoder and the same engine's plain path (``--against``) run the same small scenarios on the
user's pair; each sampling scenario is a homogeneity χ² between the two samples. With no exact law, N is planned
from a pilot of the plain path: the observed outcomes' frequencies stand in for the law in ``plan_sample_size``
(two samples of n have the noise of one of n / 2, so each side draws twice the plan). Outcomes stay few — top-k 3
or min-p 0.3 (at temperature 1 and 0.7: engines declare one or the other), 2–3 new tokens — so the plan is
affordable on a large model. The speculative side's first-round accepted counts are kept as evidence. Greedy
output is compared between the two paths on a few prompts.

The verdict can never be ``exact``: agreement with the engine's own plain path is evidence against a speculation
bug, not a proof that the plain path samples the canonical law (that needs the exact law of the toy or
checkpoint family). A passing run is therefore ``inconclusive`` with the reason saying what agreed; a rejected
scenario gives ``greedy-only``, a greedy mismatch ``approximate``, as the rules of docs/design.md have it.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

import numpy as np

from specverify.certification.collect import Session, scenario_seed
from specverify.certification.evidence import ScenarioResult
from specverify.certification.scenarios import CertificationScenario
from specverify.enums import Level, ScenarioKind, Verdict
from specverify.errors import InvalidArgument, ProtocolViolation, check
from specverify.params import SamplingParams
from specverify.protocol import Request

__all__ = ["USER_PILOT", "certify_user_pair", "user_scenarios"]

USER_PILOT = 2000  # plain-path draws that stand in for the law when planning N (not used as evidence)
GREEDY_PROMPTS = 8


def _p(temperature: float = 1.0, **kw) -> SamplingParams:
    return SamplingParams(temperature=temperature, **kw)


def user_scenarios(spec, vocab) -> tuple[list, list]:
    """(scenarios, greedy prompts) on a user pair: prompts of two ordinary token ids drawn from the vocabulary."""
    ordinary = [i for i, text in enumerate(vocab.strings) if text.strip()]
    if len(ordinary) < 4:
        raise InvalidArgument(
            f"--target={spec.target!r}: its tokenizer decodes fewer than 4 ids to visible text; the prompts need "
            "ordinary tokens"
        )
    rng = np.random.default_rng(20261201)
    prompts = [tuple(int(t) for t in rng.choice(ordinary, size=2)) for _ in range(1 + GREEDY_PROMPTS)]

    def scenario(name, kind, exercises, params, gamma) -> CertificationScenario:
        return CertificationScenario(name, kind, exercises, params, gamma, prompts[0], spec)

    sampling = ScenarioKind.SAMPLING
    scenarios = [
        scenario("user-top-k", sampling, "speculation vs plain, top-k 3", _p(top_k=3, max_tokens=3), 3),
        scenario("user-min-p", sampling, "speculation vs plain, min-p 0.3", _p(min_p=0.3, max_tokens=3), 2),
        scenario("user-top-k-t0.7", sampling, "temperature 0.7, top-k 3", _p(0.7, top_k=3, max_tokens=2), 1),
        scenario("user-min-p-t0.7", sampling, "temperature 0.7, min-p 0.3", _p(0.7, min_p=0.3, max_tokens=2), 1),
        scenario("user-greedy", ScenarioKind.GREEDY, "greedy equality, speculation vs plain", _p(0, max_tokens=4), 3),
    ]
    return scenarios, prompts[1:]


def _outcomes(session, handle, request, n) -> Counter:
    return session.draw(handle, request, n).outcomes


def _sampling(sessions, handles, scenario, plan, reproduce) -> ScenarioResult:
    from specverify.stats import detectable_tv, homogeneity_test, plan_sample_size

    started = time.perf_counter()
    (spec_session, plain_session), (spec_handle, plain_handle) = sessions, handles
    seeds = [scenario_seed(plan["seed"], scenario.name, salt) for salt in (0, 1, 2)]

    def request(seed, handle) -> Request:
        return Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed if handle.seeded else None)

    pilot_n = USER_PILOT if plan["max_samples"] is None else min(USER_PILOT, plan["max_samples"])
    pilot = _outcomes(plain_session, plain_handle, request(seeds[2], plain_handle), pilot_n)
    law = np.array(sorted(pilot.values()), dtype=np.float64) / pilot_n
    planned = 2 * int(plan_sample_size(law, plan["epsilon"], alpha=plan["alpha_test"], power=plan["power"]))
    n = planned if plan["max_samples"] is None else min(planned, plan["max_samples"])
    drawn = spec_session.draw(spec_handle, request(seeds[0], spec_handle), n)
    here = drawn.outcomes
    there = _outcomes(plain_session, plain_handle, request(seeds[1], plain_handle), n)
    outcomes = sorted(set(here) | set(there))
    test = homogeneity_test([here[o] for o in outcomes], [there[o] for o in outcomes])
    vocab = spec_handle.pair.vocab
    gaps = sorted(outcomes, key=lambda o: -abs(here[o] - there[o]))[:5]
    worst = tuple((f"{vocab.text(o[0])!r} {list(o[0])} {o[1]}", int(here[o]), float(there[o]), 0.0) for o in gaps)
    return ScenarioResult(
        name=scenario.name,
        kind=scenario.kind,
        exercises=scenario.exercises,
        covered=True,
        n=n,
        planned_n=planned,
        statistic=float(test.statistic),
        df=int(test.df),
        pvalue=float(test.pvalue),
        detectable_tv=float(detectable_tv(law, max(n // 2, 1), alpha=plan["alpha_test"], power=plan["power"])),
        worst=worst,
        num_outcomes=len(outcomes),
        note=f"two-sample against {plan['against']} on user checkpoints (N planned from a {pilot_n}-draw pilot of "
        f"the plain path, {len(pilot)} outcomes seen): homogeneity χ² over {test.num_cells} cells (worst: "
        "speculative vs plain counts)",
        reproduce=reproduce,
        accepted_observed=None if not drawn.accepted else {int(m): int(c) for m, c in sorted(drawn.accepted.items())},
        elapsed_s=time.perf_counter() - started,
    )


def _greedy(sessions, handles, scenario, prompts, reproduce) -> ScenarioResult:
    started = time.perf_counter()
    answers = []
    for session, handle in zip(sessions, handles):
        requests = [Request(p, scenario.params, 1 + i % 3) for i, p in enumerate(prompts)]
        answers.append([session.call(handle, [r])[0] for r in requests])
    mismatches = [
        f"prompt {list(p)}: speculative {list(a.tokens)} {a.finish_reason}, plain {list(b.tokens)} {b.finish_reason}"
        for p, a, b in zip(prompts, *answers)
        if (a.tokens, a.finish_reason) != (b.tokens, b.finish_reason)
    ]
    return ScenarioResult(
        name=scenario.name,
        kind=scenario.kind,
        exercises=scenario.exercises,
        covered=True,
        passed=not mismatches,
        n=len(prompts),
        planned_n=len(prompts),
        note="; ".join(mismatches[:3]) or f"{len(prompts)} prompts, speculative output equals plain output",
        reproduce=reproduce,
        elapsed_s=time.perf_counter() - started,
    )


def certify_user_pair(
    factory,
    target_dir,
    draft_dir,
    *,
    against="plain",
    level=Level.QUICK,
    seed=0,
    alpha=1e-6,
    power=0.9,
    isolation="process",
    timeout_s=120.0,
    max_samples=None,
    progress=None,
) -> object:
    """Two-sample certificate of ``factory`` on the user's checkpoint directories (see the module docstring)."""
    from specverify.certification.runner import SetupFailure, factory_name, make_runner
    from specverify.certification.twosample import against_spec
    from specverify.certification.verdict import error_certificate, finish_certificate
    from specverify.oracles.user import UserPairSpec

    level = Level.parse(level, "level")
    check(isinstance(against, str) and against, f"--against={against!r}: --target/--draft need --against (e.g. plain).")
    check(
        max_samples is None or (isinstance(max_samples, int) and max_samples >= 200),
        f"--max-samples={max_samples!r} must be an int >= 200 per side.",
    )
    spec = UserPairSpec(str(target_dir), str(draft_dir))
    pair = spec.build()
    name = factory_name(factory)
    scenarios, prompts = user_scenarios(spec, pair.vocab)
    base = f"specverify certify {name} --level {level} --target {spec.target} --draft {spec.draft} --against {against}"
    command = f"{base} --seed {seed}"
    meta = dict(level=level, seed=seed, alpha=alpha, factory=name, command=command)
    started = time.perf_counter()
    sampling = [s for s in scenarios if s.kind == ScenarioKind.SAMPLING]
    plan = dict(
        seed=seed,
        epsilon=level.epsilon,
        power=power,
        alpha_test=alpha / len(sampling),  # one homogeneity test per sampling scenario (Bonferroni plan, Holm)
        against=against,
        max_samples=max_samples,
    )
    runners = []
    try:
        for spec_name in (factory, against_spec(name, against)):
            runners.append(make_runner(spec_name, isolation=isolation, timeout_s=timeout_s))
        sessions = [Session(r) for r in runners]
        results, violation = [], None
        for scenario in scenarios:
            reproduce = f"{base} --seed {seed}"
            if progress:
                progress(f"specverify: {scenario.name} (elapsed {time.perf_counter() - started:.0f} s)")
            handles = [s.decoder(scenario) for s in sessions]
            missing = sorted(scenario.requires() - (handles[0].capabilities & handles[1].capabilities))
            if missing:
                results.append(
                    ScenarioResult(
                        scenario.name,
                        scenario.kind,
                        scenario.exercises,
                        covered=False,
                        note=f"not covered: a decoder does not declare {missing}",
                    )
                )
                continue
            try:
                if scenario.kind == ScenarioKind.GREEDY:
                    results.append(_greedy(sessions, handles, scenario, prompts, reproduce))
                else:
                    results.append(_sampling(sessions, handles, scenario, plan, reproduce))
            except ProtocolViolation as exc:
                violation = f"{scenario.name}: {exc}\nReproduce: {reproduce}"
                results.append(replace(_blank(scenario), covered=True, passed=False, violation=str(exc)))
                break
    except SetupFailure as exc:
        return error_certificate(exc.reason, elapsed_s=time.perf_counter() - started, **meta)
    finally:
        for runner in runners:
            runner.close()
    cert = finish_certificate(
        results, violation, (None, "not run (user checkpoints)"), elapsed_s=time.perf_counter() - started, **meta
    )
    agreed = violation is None and all(r.passed for r in cert.scenarios if r.covered)
    if cert.verdict == Verdict.INCONCLUSIVE and agreed:
        covered = [r.name for r in results if r.covered]
        reason = (
            f"no exact law on user checkpoints, so never exact: the speculative path agreed with {against} on "
            f"{covered} (two-sample, planned power {power} at TV {level.epsilon}); certify the engine on "
            "`--models checkpoint` for a verdict against the exact law"
        )
        cert = replace(cert, reason=reason)
    return cert


def _blank(scenario) -> ScenarioResult:
    return ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=False)
