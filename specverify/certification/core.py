"""``certify``: run the scenario matrix against a decoder factory and decide the verdict (docs/design.md rules)."""

from __future__ import annotations

import platform
import time
from dataclasses import replace

from specverify.certification.evidence import Certificate, ScenarioResult
from specverify.certification.runner import factory_name, make_runner
from specverify.certification.scenarios import CORE, matrix, select_scenarios
from specverify.certification.shards import parse_shard, shard_of
from specverify.enums import Level, ScenarioKind, Verdict
from specverify.errors import ProtocolViolation, check

__all__ = ["certify"]

_SAMPLING_KINDS = (ScenarioKind.SAMPLING, ScenarioKind.MIXED, ScenarioKind.COLLISION, ScenarioKind.COMPOSITION)
_now = time.perf_counter  # the budget's clock (tests replace it)


def _num_sampling_tests(scenarios: dict) -> int:
    """m of the α budget, over the family's full matrix (so `--scenario NAME` reproduces the same N and draws)."""
    return sum(_tests_in(s) for s in scenarios.values() if s.kind in _SAMPLING_KINDS)


def _tests_in(scenario) -> int:
    from specverify.certification.composition import COMPOSITIONS

    if scenario.kind == ScenarioKind.MIXED:
        return len(scenario.members)
    return len(COMPOSITIONS) if scenario.kind == ScenarioKind.COMPOSITION else 1


def _versions() -> dict:
    import numpy as np
    import scipy
    import torch

    from specverify import __version__

    return {
        "specverify": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
    }


def _validate(seed, alpha, power, budget_s, timeout_s) -> None:
    check(
        isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**62,
        f"seed={seed!r} must be an int in [0, 2**62).",
    )
    check(isinstance(alpha, float) and 0 < alpha < 0.5, f"alpha={alpha!r} must be a float in (0, 0.5), e.g. 1e-6.")
    check(0.5 <= power < 1, f"power={power!r} must lie in [0.5, 1).")
    check(budget_s is None or budget_s > 0, f"budget_s={budget_s!r} must be None or > 0 seconds.")
    check(timeout_s > 0, f"timeout_s={timeout_s!r} must be > 0 seconds.")


def certify(
    factory: object,
    *,
    level: Level | str = Level.STANDARD,
    seed: int = 0,
    alpha: float = 1e-6,
    power: float = 0.9,
    scenarios: list | None = None,
    isolation: str = "process",
    timeout_s: float = 120.0,
    budget_s: float | None = None,
    progress: object = None,
    models: str = "toy",
    shard: tuple[int, int] | str | None = None,
    max_samples: int | None = None,
    sequential: bool = False,
    against: str | None = None,
) -> Certificate:
    """Certify the decoder made by ``factory(target, draft)`` (a callable or ``"module:attr"``).

    Parameters
    ----------
    level : Level or {"quick", "standard", "thorough"}
        Each sampling scenario draws enough outcomes to detect a TV of 0.05 / 0.02 / 0.01 with ``power``.
    seed : int
        Seeds every request; the same seed reproduces the run (``--scenario NAME --seed S``).
    alpha : float
        Family false-alarm rate over all scenarios and tests (Bonferroni plan, Holm decision).
    scenarios : list of str, optional
        Names to run (default: all; ``specverify scenarios`` lists them).
    isolation : {"process", "none"}
        Run the decoder in a worker process with a per-call ``timeout_s`` (default), or in this process.
    budget_s : float, optional
        Wall-clock budget in seconds. A pilot measures the decoder's throughput and the budget is allocated as
        samples (core scenarios first); scenarios that get less than their plan, or that the clock stops, make the
        verdict ``inconclusive`` with the TV each could detect. Checked between calls: an in-process call
        (``isolation="none"``) cannot be interrupted.
    max_samples : int, optional
        Total outcomes to allocate across the scenarios instead of (or as well as) a time budget.
    against : str, optional
        Two-sample mode: compare each sampling scenario with this factory's decoder (``"plain"``: the ``plain``
        attribute of the factory's module, or ``"module:attr"``) instead of the exact law.
    sequential : bool
        Stop each sampling scenario at the first decisive look of a group-sequential design (early rejection,
        early pass at the planned power): mean N on exact decoders ≈ 0.3× the fixed plan
        (``benchmarks/sequential_decisions.py``).
    models : {"toy", "checkpoint"}
        The model family (docs/design.md): toy tables (default) or tiny Llama checkpoints an engine can load
        (``hf`` extra; toy-only scenarios are not in that matrix).
    shard : (I, N) or "I/N", optional
        Run only shard I of N (scenario k of the matrix runs on shard k % N + 1; shard 1 also runs the
        reproducibility check). The result is ``inconclusive`` by itself; its ``shard_info`` is the counts file
        ``specverify.certification.shards.merge_shards`` turns into one certificate.

    Returns
    -------
    Certificate
        ``verdict`` in exact / greedy-only / approximate / invalid / inconclusive with per-scenario evidence.
    """
    level = Level.parse(level, "level")
    _validate(seed, alpha, power, budget_s, timeout_s)
    check(
        max_samples is None or (isinstance(max_samples, int) and not isinstance(max_samples, bool) and max_samples > 0),
        f"max_samples={max_samples!r} must be None or an int > 0 (--max-samples).",
    )
    chosen = select_scenarios(scenarios, models)
    family = matrix(models)
    shard = _as_shard(shard)
    if shard is not None:
        position = {name: k for k, name in enumerate(family)}
        chosen = [sc for sc in chosen if shard_of(position[sc.name], shard[1]) == shard[0]]
    from specverify.certification.checks import Plan
    from specverify.certification.collect import Session

    started = _now()
    name = factory_name(factory)
    flags = [f"--models {models}"] if models != "toy" else []
    flags += ["--sequential"] if sequential else []
    flags += [f"--max-samples {max_samples}"] if max_samples is not None else []
    flags += [f"--budget {budget_s:g}"] if budget_s is not None else []
    flags += [f"--against {against}"] if against else []
    base_cmd = " ".join([f"specverify certify {name} --level {level}", *flags])
    plan = Plan(
        alpha=alpha,
        epsilon=level.epsilon,
        power=power,
        num_tests=_num_sampling_tests(family),
        level=level,
        seed=seed,
        sequential=bool(sequential),
    )
    runner = make_runner(factory, isolation=isolation, timeout_s=timeout_s)
    other_runner = None
    try:
        if against:
            from specverify.certification.twosample import against_spec

            plan.against = against_spec(name, against)
            other_runner = make_runner(plan.against, isolation=isolation, timeout_s=timeout_s)
            plan.other = Session(other_runner)
        check_repro = shard is None or shard[0] == 1
        session = Session(runner)
        if budget_s is not None or max_samples is not None:
            _allocate(session, chosen, plan, family, budget_s, max_samples, started)
        results, violation, repro = _run_all(session, chosen, plan, started, budget_s, base_cmd, progress, check_repro)
    finally:
        runner.close()
        if other_runner is not None:
            other_runner.close()
    command = f"{base_cmd} --seed {seed}"
    cert = finish_certificate(
        results,
        violation,
        repro,
        level=level,
        seed=seed,
        alpha=alpha,
        factory=name,
        command=command,
        elapsed_s=_now() - started,
    )
    if shard is None:
        return cert
    meta = dict(
        factory=name,
        level=str(level),
        seed=seed,
        alpha=alpha,
        power=power,
        models=models,
        num_shards=shard[1],
        scenarios_requested=list(scenarios) if scenarios else None,
        matrix_order=list(family),
        command=command,
    )
    from specverify.certification.shards import shard_document

    info = shard_document(cert, shard=shard, violation=violation, meta=meta)
    reason = f"shard {shard[0]}/{shard[1]} only: merge every shard's --counts-out with `specverify merge`"
    return replace(
        cert,
        verdict=Verdict.INCONCLUSIVE,
        reason=reason,
        shard_info=info,
        command=f"{command} --shard {shard[0]}/{shard[1]}",
    )


def _allocate(session, chosen, plan, family, budget_s, max_samples, started) -> None:
    """Turn a time and/or sample budget into each scenario's share of its plan (``plan.shares``)."""
    from specverify.certification import budget

    sizes = budget.planned_sizes(chosen, plan, family)
    total = max_samples if max_samples is not None else sum(sizes.values())
    first = next((sc for sc in chosen if sc.kind == ScenarioKind.SAMPLING), None)
    if budget_s is not None and first is not None:
        try:
            if first.requires() <= session.decoder(first).capabilities:
                rate = budget.pilot_rate(session, first, plan)
                left = max(0.0, budget_s - (_now() - started))
                total = min(total, int(rate * left * budget.SAFETY))
        except ProtocolViolation:
            pass  # the run itself finds and reports it, with the scenario that shows it
    plan.shares = budget.allocate(sizes, set(CORE), total)


def _as_shard(shard: object) -> tuple[int, int] | None:
    if shard is None:
        return None
    if isinstance(shard, str):
        return parse_shard(shard)
    check(isinstance(shard, tuple) and len(shard) == 2, f"shard={shard!r} must be (I, N) or 'I/N', e.g. (1, 4).")
    return parse_shard(f"{shard[0]}/{shard[1]}")


def finish_certificate(results, violation, repro, *, level, seed, alpha, factory, command, elapsed_s) -> Certificate:
    """Holm over the sampling scenarios, the verdict rules, the certificate (shared by certify and the merge)."""
    results = _apply_holm(results, alpha)
    verdict, reason = _verdict(results, violation)
    spec = [r.accepted_observed for r in results if r.accepted_observed]
    versions = _versions()
    return Certificate(
        verdict=verdict,
        reason=reason,
        level=level,
        seed=seed,
        alpha=alpha,
        epsilon=level.epsilon,
        elapsed_s=elapsed_s,
        version=versions["specverify"],
        factory=factory,
        scenarios=tuple(results),
        reproducible=repro[0],
        reproducibility_note=repro[1],
        speculation_observed=(any(sum(v for m, v in a.items() if m > 0) > 0 for a in spec) if spec else None),
        versions=versions,
        command=command,
    )


def _run_all(session, chosen, plan, started, budget_s, base_cmd, progress, check_repro=True) -> tuple:
    from specverify.certification.checks import check_reproducible

    results, violation, repro = [], None, (None, "not checked")
    for i, scenario in enumerate(chosen):
        reproduce = f"{base_cmd} --scenario {scenario.name} --seed {plan.seed}"
        if violation is not None or (budget_s is not None and _now() - started > budget_s):
            why = "not run: the decoder already broke the protocol" if violation else "not run: budget exhausted"
            results.append(ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=False, note=why))
            continue
        if progress:
            progress(f"[{i + 1}/{len(chosen)}] {scenario.name}")
        try:
            results.extend(_run_one(session, scenario, plan, reproduce))
        except ProtocolViolation as exc:
            violation = f"{scenario.name}: {exc}\nReproduce: {reproduce}"
            results.append(
                ScenarioResult(
                    scenario.name,
                    scenario.kind,
                    scenario.exercises,
                    covered=True,
                    passed=False,
                    violation=str(exc),
                    reproduce=reproduce,
                    note="protocol violation",
                )
            )
    family = matrix(chosen[0].pair.family) if chosen else {}
    if violation is None and check_repro and "temperature-1" in family:
        try:
            repro = check_reproducible(session, family["temperature-1"], plan)
        except ProtocolViolation as exc:
            violation = f"reproducibility check: {exc}"
    return results, violation, repro


def _run_one(session, scenario, plan, reproduce) -> list:
    from specverify.certification import checks

    missing = sorted(scenario.requires() - session.decoder(scenario).capabilities)
    if missing:
        return [
            ScenarioResult(
                scenario.name,
                scenario.kind,
                scenario.exercises,
                covered=False,
                note=f"not covered: the decoder does not declare {missing}",
            )
        ]
    problem = checks.unfit_for_float32(scenario)
    if problem:
        return [ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=False, note=problem)]
    if scenario.kind == ScenarioKind.MIXED:
        family = matrix(scenario.pair.family)
        members = [family[m] for m in scenario.members]
        return checks.run_mixed(session, scenario, members, plan, reproduce)
    if scenario.kind == ScenarioKind.SAMPLING and getattr(plan, "other", None) is not None:
        from specverify.certification.twosample import run_two_sample

        return [run_two_sample(session, plan.other, scenario, plan, reproduce, against=plan.against)]
    if scenario.kind == ScenarioKind.COMPOSITION:
        from specverify.certification.composition import run_composition

        return run_composition(session, scenario, plan, reproduce)
    run = {
        ScenarioKind.SAMPLING: checks.run_sampling,
        ScenarioKind.GREEDY: checks.run_greedy,
        ScenarioKind.COLLISION: checks.run_collision,
    }[scenario.kind]
    return [run(session, scenario, plan, reproduce)]


def _apply_holm(results, alpha) -> list:
    """Sampling-type scenarios pass or fail by Holm at the family α; impossible outcomes fail outright."""
    import numpy as np

    from specverify.stats import holm

    idx = [
        i
        for i, r in enumerate(results)
        if r.kind in _SAMPLING_KINDS and r.covered and r.violation is None and r.pvalue is not None
    ]
    if not idx:
        return results
    passed = holm(np.array([results[i].pvalue for i in idx]), alpha)
    out = list(results)
    for i, ok in zip(idx, passed):
        out[i] = replace(out[i], passed=bool(ok) and not out[i].impossible)
    return out


def _verdict(results, violation) -> tuple:
    if violation is not None:
        return Verdict.INVALID, violation
    greedy_fail = [r for r in results if r.kind == ScenarioKind.GREEDY and r.passed is False]
    if greedy_fail:
        r = greedy_fail[0]
        return Verdict.APPROXIMATE, (
            f"{r.name}: greedy output differs from the target's: {r.mismatches[0]}. Reproduce: {r.reproduce}"
        )
    sampling_fail = [r for r in results if r.passed is False]
    if sampling_fail:
        r = sampling_fail[0]
        why = r.note or f"law rejected (p = {r.pvalue:.3g})"
        return Verdict.GREEDY_ONLY, f"{r.name}: {why}. Reproduce: {r.reproduce}"
    not_run = [r.name for r in results if not r.covered]
    core_missing = [c for c in CORE if c not in {r.name for r in results if r.covered}]
    if core_missing:
        return Verdict.INCONCLUSIVE, (
            f"core scenarios not covered: {core_missing} (declare their capabilities, or run "
            "them: `specverify scenarios` lists them)"
        )
    short = [r for r in results if r.covered and r.kind in _SAMPLING_KINDS and r.n < r.planned_n]
    if short or any("budget" in r.note for r in results if not r.covered):
        detail = "; ".join(
            f"{r.name}: N = {r.n} of {r.planned_n}, detects TV ≥ {r.detectable_tv:.3f}" for r in short[:4]
        )
        return Verdict.INCONCLUSIVE, (
            "the budget ran out before every scenario reached its planned N" + (f" ({detail})" if detail else "")
        )
    coverage = f" (not covered: {not_run})" if not_run else ""
    return Verdict.EXACT, f"every covered scenario reached its planned N and passed{coverage}"
