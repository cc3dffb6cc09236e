"""``certify``: run a configuration's scenarios through the checks table and decide the verdict (docs/design.md).

The loop is the same for every configuration — toy or checkpoint models, a draft family, ``--against``, a user's own
checkpoints, a shard: :func:`certify` builds the ``RunConfig``, the runners and the ``Run``; each scenario goes to
its check (``checks.check_for``) after the capability and float32 gates; then the reproducibility check, and the
verdict rules (``verdict.finish_certificate``).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Callable, Optional

from specverify.certification import checks
from specverify.certification.checks.scenario import gamma_span, reproducibility, run_scenario
from specverify.certification.checks.twosample import against_spec
from specverify.certification.config.run_config import RunConfig, check_names
from specverify.certification.execution.shards import shard_certificate, shard_of
from specverify.certification.matrix.scenarios import run_order
from specverify.certification.results.evidence import Certificate, ScenarioResult
from specverify.certification.results.verdict import error_certificate, finish_certificate
from specverify.certification.run.budget import SAFETY, Allocation, pilot_rate
from specverify.certification.run.collect import Session
from specverify.certification.run.context import AlphaPlan, BudgetSpent, Deadline, Run, matrix_for
from specverify.certification.run.factory import SetupFailure, resolve_factory
from specverify.certification.run.runner import make_runner
from specverify.enums import NotRun, ScenarioKind
from specverify.errors import InvalidArgument, ProtocolViolation

__all__ = ["certify", "run_certification"]

_now = time.perf_counter  # the budget's clock (tests replace it)
_wall = time.perf_counter  # the between-calls deadline's clock (tests replace it: a loaded machine is slower)
_BROKE = "not run: the decoder already broke the protocol"
DRAW_PROGRESS_S = 10.0  # seconds between two progress lines inside one scenario's draws


def certify(
    factory: object,
    *,
    progress: Optional[Callable[[str], None]] = None,
    block_draws: Optional[int] = None,
    resume: Optional[str] = None,
    **options: object,
) -> Certificate:
    """Certify the decoder made by ``factory(target, draft)`` (a callable or ``"module:attr"``).

    Parameters
    ----------
    factory : str or callable
        ``"module:attr"`` of ``factory(target, draft, **engine_options) -> decoder`` (docs/adapters.md).
    progress : callable, optional
        Called with one line per scenario (its position, name, elapsed time and an ETA).
    block_draws : int, optional
        Run in parts (``execution.parts``): each sampling scenario's draws in blocks of this many, decided
        at the merge in block order; the same verdict and seeded counts as without (``--block-draws``).
    resume : str, optional
        A resume file (``execution.resume``, ``--resume PATH``): the counts are written there after
        every decoder call, and a run of the same options with the same path continues where it was killed.
    **options
        Every field of :class:`~specverify.certification.config.run_config.RunConfig` (``level``, ``seed``, ``alpha``,
        ``power``, ``models``, ``drafts``, ``scenarios``, ``isolation``, ``timeout_s``, ``threads``, ``budget_s``,
        ``max_samples``, ``sequential``, ``against``, ``shard``, ``target_dir``/``draft_dir``, ``engine_options``,
        ``engine_config``, ``require*``); ``config=RunConfig(...)`` instead passes one whole. ``specverify
        certify --help`` says what each does; docs/design.md gives the verdict rules.

    A set-up failure (the factory raises, its module raises on import, it returns no decoder, unknown
    ``capabilities``) gives the verdict ``error``: it says nothing about the decoder. A sharded run
    (``shard=(I, N)``) is ``inconclusive`` by itself; its ``shard_info`` is the counts file that
    ``specverify.certification.execution.shards.merge_shards`` turns into one certificate.

    Returns
    -------
    Certificate
        ``verdict`` in exact / greedy-only / approximate / invalid / inconclusive / error, with per-scenario evidence
        and ``command``, the line that reproduces it.
    """
    config = options.pop("config", None)
    if config is None:
        config = RunConfig.create(factory=factory, **options)
    elif options or not isinstance(config, RunConfig):
        raise InvalidArgument(f"config={config!r} must be a RunConfig, given alone (no other options).")
    return run_certification(config, progress, block_draws=block_draws, resume=resume)


def run_certification(
    config: RunConfig,
    progress: Optional[Callable[[str], None]] = None,
    *,
    block_draws: Optional[int] = None,
    resume: Optional[str] = None,
) -> Certificate:
    """:func:`certify` of a ``RunConfig`` already built."""
    started = _now()
    try:
        config = config.with_factory_drafts(resolve_factory(config.factory))
    except SetupFailure as exc:
        return error_certificate(exc.reason, config=config, elapsed_s=_now() - started)
    if block_draws is not None:  # a run in parts (parts.py): the same counts, decided at the merge
        from specverify.certification.execution.parts import check_split, run_parts

        check_split(config, block_draws)
        return run_parts(config, block_draws=block_draws, progress=progress, resume=resume)
    family = matrix_for(config)
    check_names(config.scenarios, family)
    chosen = [family[n] for n in config.scenarios] if config.scenarios else list(family.values())
    if config.shard is not None:
        chosen = [s for s in chosen if shard_of(family.position(s.name), config.shard[1]) == config.shard[0]]
    plan = AlphaPlan(config.alpha, config.level.epsilon, config.power, checks.num_tests(family))
    try:
        journal = None if resume is None else _resume_file(resume, config, progress)
        results, violation, repro, timings, engine = _run_guarded(
            config, family, plan, chosen, progress, started, journal
        )
    except SetupFailure as exc:
        return error_certificate(exc.reason, config=config, elapsed_s=_now() - started)
    cert = finish_certificate(
        results, violation, repro, config=config, matrix=family, elapsed_s=_now() - started, timings=timings,
        engine=engine,
    )  # fmt: skip
    return cert if config.shard is None else shard_certificate(cert, violation)


def _resume_file(path, config, progress):
    """The run's resume file (``resume.py``), saying on ``progress`` what it already holds."""
    from specverify.certification.execution.resume import ResumeFile

    journal = ResumeFile(path, config)
    if progress and journal.resumed:
        flight = ", ".join(f"{n} ({d} draws recorded)" for n, d in journal.in_flight().items()) or "none"
        progress(
            f"specverify: resuming {path}: {len(journal.data['finished'])} scenarios finished; in flight: {flight}"
        )
    return journal


def _run_guarded(config, family, plan, chosen, progress, started, journal=None) -> tuple:
    """Build the runners and the ``Run``, run every chosen scenario, close the runners (set-up failures propagate)."""
    end = None if config.budget_s is None else _wall() + config.budget_s
    runners = [make_runner(config.factory, config)]
    try:
        if config.against:
            runners.append(make_runner(against_spec(config.factory_name, config.against), config))
        sessions = [Session(Deadline(r, end, clock=lambda: _wall())) for r in runners]
        run = Run(config, family, plan, sessions[0], sessions[1] if config.against else None, started=started)
        if config.budget_s is not None or config.max_samples is not None:
            run = replace(run, allocation=_allocate(run, chosen))
        return _run_all(run, chosen, progress, journal)
    finally:
        for runner in runners:
            runner.close()


def _allocate(run, chosen) -> Allocation:
    """A time and/or sample budget as each scenario's share of its plan (core scenarios first)."""
    sizes = {s.name: _planned_size(run, s) for s in chosen}
    total = run.config.max_samples if run.config.max_samples is not None else sum(sizes.values())
    first = next((s for s in chosen if s.kind == ScenarioKind.SAMPLING), None)
    if run.config.budget_s is not None and first is not None:
        try:
            if checks.requirements(first, run.matrix) <= run.session.decoder(first).capabilities:
                rate = pilot_rate(run.session, first, run.seed)
                left = max(0.0, run.config.budget_s - (_now() - run.started))
                total = min(total, int(rate * left * SAFETY))
        except ProtocolViolation:
            pass  # the run itself finds and reports it, with the scenario that shows it
        except BudgetSpent:
            total = 0  # the pilot alone spent the budget
    return Allocation(sizes, set(run.matrix.core), total)


def _planned_size(run, scenario) -> int:
    """The scenario's planned outcomes; 0 when planning it already broke the protocol (a pilot's calls): the run
    itself meets the violation again in that scenario and reports it there."""
    try:
        return checks.check_for(scenario, run.config, run.matrix).planned_size(run, scenario)
    except (ProtocolViolation, BudgetSpent):
        return 0


def _progress_line(i, total, name, elapsed) -> str:
    eta = f", ETA {elapsed / i * (total - i):.0f} s" if i else ""
    return f"specverify: [{i + 1}/{total}] {name} (elapsed {elapsed:.0f} s{eta})"


def _run_all(run, chosen, progress, journal=None) -> tuple:
    """Run the scenarios in :func:`~matrix.scenarios.run_order` (by pair, then γ: an engine that
    fixes γ per instance restarts on every change), or as given under a time budget (the order is then the
    priority: core first); the results are listed in ``chosen``'s (matrix) order."""
    order = chosen if run.config.budget_s is not None else run_order(chosen, gammas=lambda s: gamma_span(run, s))
    by_name, violation, clock, budget = {}, None, time.perf_counter(), run.config.budget_s
    for i, scenario in enumerate(order):
        results = by_name.setdefault(scenario.name, [])
        if violation is not None or (budget is not None and _now() - run.started > budget):
            why, note = (NotRun.BROKE, _BROKE) if violation else (NotRun.BUDGET, "not run: budget exhausted")
            results.append(ScenarioResult.skipped(scenario, why, note))
            continue
        kept = None if journal is None else journal.finished(scenario.name)
        if kept is not None:  # --resume: finished before
            results.extend(kept)
            if run.allocation is not None:
                run.allocation.spend(scenario.name, sum(r.n or 0 for r in kept))
            continue
        if progress:
            progress(_progress_line(i, len(order), scenario.name, time.perf_counter() - clock))
        try:
            head = _progress_line(i, len(order), scenario.name, 0).split(" (")[0]
            with _recording(run, journal, scenario.name, progress and _draw_progress(progress, head)):
                done = run_scenario(run, scenario)
            if journal is not None:
                journal.finish(scenario.name, done)
            results.extend(done)
            if run.allocation is not None:
                run.allocation.spend(scenario.name, sum(r.n or 0 for r in done))
            for session in filter(None, (run.session, run.other)):  # the first pair: reproducibility
                session.release_unused(order[i + 1 :], keep=(chosen[0].pair,))
        except BudgetSpent:
            results.append(ScenarioResult.skipped(scenario, NotRun.BUDGET, "not run: budget exhausted mid-scenario"))
        except ProtocolViolation as exc:
            violation = f"{scenario.name}: {exc}\nReproduce: {run.reproduce(scenario)}"
            if journal is not None:  # not evidence: a resume asks the decoder again from the last recorded call
                journal.interrupted(violation)
            broke = ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=True, passed=False)
            results.append(
                replace(broke, violation=str(exc), reproduce=run.reproduce(scenario), note="protocol violation")
            )
    results = [r for name in dict.fromkeys(s.name for s in chosen) for r in by_name.get(name, [])]
    if violation is not None:
        return results, violation, (None, "not run: the decoder broke the protocol"), None, None
    repro = None if journal is None else journal.reproducibility()
    if repro is None:
        repro = reproducibility(run, chosen)
        if journal is not None:
            journal.record_reproducibility(repro)
    timings = run.session.timings(chosen[0]) if chosen else None  # decoder.timings(), for `speedup --from`
    engine = run.session.run_engine_info(chosen[0]) if chosen else None  # after the calls, state over the run
    return results, violation, repro, timings, engine


@contextlib.contextmanager
def _recording(run, journal, name, on_draws=None):
    """While ``name`` runs: its draws recorded in the resume file (``Session.journal``), and ``on_draws`` told
    of each call's progress."""
    sessions = [x for x in (run.session, run.other) if x is not None]
    for side, session in enumerate(sessions):
        session.journal = None if journal is None else journal.journal(name, side)
        session.on_draws = on_draws or None
    try:
        yield
    finally:
        for session in sessions:
            session.journal = session.on_draws = None


def _draw_progress(progress, head: str):
    """A ``Session.on_draws`` that says, at most every ``DRAW_PROGRESS_S`` seconds, how far a long draw is:
    ``specverify: [3/12] temperature-1: 40 960 of 65 536 draws`` (of the look being drawn, under sequential looks)."""
    last = [time.perf_counter()]

    def report(done: int, upto: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= DRAW_PROGRESS_S:
            last[0] = now
            progress(f"{head}: {done:,} of {upto:,} draws".replace(",", " "))

    return report
