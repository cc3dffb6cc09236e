"""``certify``: run the scenario matrix against a decoder factory and decide the verdict (docs/design.md rules)."""

from __future__ import annotations

import time
from dataclasses import replace

from specverify.certification.evidence import Certificate, ScenarioResult
from specverify.certification.runner import SetupFailure, factory_name, make_runner
from specverify.certification.scenarios import CORE, matrix, matrix_of, select_scenarios
from specverify.certification.shards import parse_shard, shard_of
from specverify.certification.verdict import SAMPLING_KINDS as _SAMPLING_KINDS
from specverify.certification.verdict import error_certificate, finish_certificate, slow_note
from specverify.enums import Level, ScenarioKind, Verdict
from specverify.errors import ProtocolViolation, check

__all__ = ["certify", "finish_certificate"]

_now = time.perf_counter  # the budget's clock (tests replace it)
SEED_LIMIT = 2**62  # certification seeds (request seeds derived from them are 63-bit: protocol.Request)


def _num_sampling_tests(scenarios: dict) -> int:
    """m of the α budget, over the family's full matrix (so `--scenario NAME` reproduces the same N and draws)."""
    return sum(_tests_in(s) for s in scenarios.values() if s.kind in _SAMPLING_KINDS)


def _tests_in(scenario) -> int:
    from specverify.certification.composition import COMPOSITIONS

    if scenario.kind == ScenarioKind.MIXED:
        return len(scenario.members)
    return len(COMPOSITIONS) if scenario.kind == ScenarioKind.COMPOSITION else 1


def _validate(seed, alpha, power, budget_s, timeout_s) -> None:
    check(
        isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < SEED_LIMIT,
        f"seed={seed!r} must be an int in [0, 2**62) (--seed).",
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
    threads: int | None = None,
    extra_flags: tuple = (),
    drafts: str = "ar",
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
    threads : int, optional
        Threads of the worker process (torch and ``OMP_NUM_THREADS``; default 1: tiny tensors, more threads cost
        more). In-process (``isolation="none"``) the caller's setting stays unless ``threads`` is given.
    progress : callable, optional
        Called with one line per scenario (its position, name, elapsed time and an ETA).
    drafts : {"ar", "heads", "markov", "mtp", "ngram", "tree"}
        The draft family whose scenario matrix runs (``--drafts``; toy models): the factory receives that family's
        draft object (``specverify.oracles.drafts``; docs/adapters.md). Default ``"ar"``, the AR toy draft.
    extra_flags : tuple of str
        The caller's command-line flags that do not change the draws (``--require``, ``--counts-out``), kept in
        ``command`` so that it reproduces the whole invocation.

    A set-up failure (the factory raises, its module raises on import, unknown ``capabilities``) gives the verdict
    ``error``: it says nothing about the decoder.

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
    chosen = select_scenarios(scenarios, models, drafts)
    family = matrix(models, drafts)
    shard = _as_shard(shard)
    check(shard is None or drafts == "ar", f"shard={shard!r} with drafts={drafts!r}: shards run the AR matrix only.")
    if shard is not None:
        position = {name: k for k, name in enumerate(family)}
        chosen = [sc for sc in chosen if shard_of(position[sc.name], shard[1]) == shard[0]]
    from specverify.certification.checks import Plan

    started = _now()
    name = factory_name(factory)
    run_flags = _run_flags(models, sequential, max_samples, budget_s, against, alpha, timeout_s, isolation, threads)
    run_flags += [f"--drafts {drafts}"] if drafts != "ar" else []
    base_cmd = " ".join([f"specverify certify {name} --level {level}", *run_flags])
    run_command = " ".join([base_cmd, *(f"--scenario {n}" for n in scenarios or ()), f"--seed {seed}"])
    command = " ".join([run_command, *map(str, extra_flags)])
    plan = Plan(
        alpha=alpha,
        epsilon=level.epsilon,
        power=power,
        num_tests=_num_sampling_tests(family),
        level=level,
        seed=seed,
        sequential=bool(sequential),
    )
    meta = dict(level=level, seed=seed, alpha=alpha, factory=name, command=command)
    try:
        results, violation, repro = _run_guarded(
            factory,
            against,
            name,
            plan,
            chosen,
            family,
            shard,
            budget_s,
            max_samples,
            base_cmd,
            progress,
            dict(isolation=isolation, timeout_s=timeout_s, threads=threads),
            started,
        )
    except SetupFailure as exc:
        return error_certificate(exc.reason, elapsed_s=_now() - started, **meta)
    cert = finish_certificate(results, violation, repro, elapsed_s=_now() - started, drafts=drafts, **meta)
    cert = replace(cert, timings=getattr(plan, "timings", None))
    note = slow_note(results)
    if note and cert.verdict not in (Verdict.INVALID, Verdict.ERROR):
        cert = replace(cert, reason=f"{cert.reason}\n{note}")
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
        command=run_command,
    )
    from specverify.certification.shards import shard_document

    info = shard_document(cert, shard=shard, violation=violation, meta=meta)
    reason = f"shard {shard[0]}/{shard[1]} only: merge every shard's --counts-out with `specverify merge`"
    return replace(
        cert,
        verdict=Verdict.INCONCLUSIVE,
        reason=reason,
        shard_info=info,
        command=" ".join([run_command, f"--shard {shard[0]}/{shard[1]}", *map(str, extra_flags)]),
    )


def _run_flags(models, sequential, max_samples, budget_s, against, alpha, timeout_s, isolation, threads) -> list:
    """Every flag that changes the run, as the CLI spells it (defaults left out)."""
    flags = [f"--models {models}"] if models != "toy" else []
    flags += ["--sequential"] if sequential else []
    flags += [f"--max-samples {max_samples}"] if max_samples is not None else []
    flags += [f"--budget {budget_s:g}"] if budget_s is not None else []
    flags += [f"--against {against}"] if against else []
    flags += [f"--alpha {alpha:g}"] if alpha != 1e-6 else []
    flags += [f"--isolation {isolation}"] if isolation != "process" else []
    flags += [f"--timeout {timeout_s:g}"] if timeout_s != 120.0 else []
    flags += [f"--threads {threads}"] if threads is not None else []
    return flags


class _Deadline:
    """The runner, refusing new calls once the budget's wall clock is spent (an in-process call cannot be
    interrupted: the budget is enforced between calls)."""

    def __init__(self, runner, budget_s):
        self._runner, self._end = runner, None if budget_s is None else time.perf_counter() + budget_s

    def __getattr__(self, name):
        return getattr(self._runner, name)

    def request(self, op: str, *args: object) -> object:
        if self._end is not None and op in ("call", "sample") and time.perf_counter() > self._end:
            raise _BudgetSpent()
        return self._runner.request(op, *args)


class _BudgetSpent(Exception):
    """The budget ran out between two calls of a scenario."""


def _run_guarded(
    factory, against, name, plan, chosen, family, shard, budget_s, max_samples, base_cmd, progress, runner_kw, started
) -> tuple:
    """Build the runners, run every chosen scenario, close the runners (set-up failures propagate)."""
    from specverify.certification.collect import Session

    runner = make_runner(factory, **runner_kw)
    other_runner = None
    try:
        if against:
            from specverify.certification.twosample import against_spec

            plan.against = against_spec(name, against)
            other_runner = make_runner(plan.against, **runner_kw)
            plan.other = Session(_Deadline(other_runner, budget_s))
        check_repro = shard is None or shard[0] == 1
        session = Session(_Deadline(runner, budget_s))
        if budget_s is not None or max_samples is not None:
            _allocate(session, chosen, plan, family, budget_s, max_samples, started)
        return _run_all(session, chosen, plan, started, budget_s, base_cmd, progress, check_repro)
    finally:
        runner.close()
        if other_runner is not None:
            other_runner.close()


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
        except _BudgetSpent:
            total = 0  # the pilot alone spent the budget
    plan.shares = budget.Allocation(sizes, set(CORE), total)


def _as_shard(shard: object) -> tuple[int, int] | None:
    if shard is None:
        return None
    if isinstance(shard, str):
        return parse_shard(shard)
    check(isinstance(shard, tuple) and len(shard) == 2, f"shard={shard!r} must be (I, N) or 'I/N', e.g. (1, 4).")
    return parse_shard(f"{shard[0]}/{shard[1]}")


def _progress_line(i, total, name, elapsed) -> str:
    eta = f", ETA {elapsed / i * (total - i):.0f} s" if i else ""
    return f"specverify: [{i + 1}/{total}] {name} (elapsed {elapsed:.0f} s{eta})"


def _not_run(scenario, why) -> ScenarioResult:
    return ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=False, note=why)


def _run_all(session, chosen, plan, started, budget_s, base_cmd, progress, check_repro=True) -> tuple:
    results, violation = [], None
    clock = time.perf_counter()
    for i, scenario in enumerate(chosen):
        reproduce = f"{base_cmd} --scenario {scenario.name} --seed {plan.seed}"
        if violation is not None or (budget_s is not None and _now() - started > budget_s):
            why = "not run: the decoder already broke the protocol" if violation else "not run: budget exhausted"
            results.append(_not_run(scenario, why))
            continue
        if progress:
            progress(_progress_line(i, len(chosen), scenario.name, time.perf_counter() - clock))
        try:
            done = _run_one(session, scenario, plan, reproduce)
            results.extend(done)
            if plan.shares is not None:
                plan.shares.spend(scenario.name, sum(r.n or 0 for r in done))
            session.release_unused(chosen[i + 1 :], keep=(chosen[0].pair,))  # the first pair: reproducibility
        except _BudgetSpent:
            results.append(_not_run(scenario, "not run: budget exhausted during the scenario"))
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
    if violation is not None:
        return results, violation, (None, "not run: the decoder broke the protocol")
    repro = _reproducibility(session, chosen, plan, check_repro)
    plan.timings = session.timings(chosen[0]) if chosen else None  # optional decoder.timings(), for `speedup --from`
    return results, violation, repro


def _reproducibility(session, chosen, plan, check_repro) -> tuple:
    """The separate reproducibility check: its failure, even a protocol violation, is ``reproducible=False``."""
    from specverify.certification.checks import check_reproducible

    family = matrix_of(chosen[0].pair) if chosen else {}
    if not check_repro or "temperature-1" not in family:
        return None, "not run in this shard" if not check_repro else "not run"
    try:
        return check_reproducible(session, family["temperature-1"], plan)
    except _BudgetSpent:
        return None, "not run: budget exhausted"
    except ProtocolViolation as exc:
        return False, f"the check's calls broke the protocol: {exc}"


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
        family = matrix_of(scenario.pair)
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
