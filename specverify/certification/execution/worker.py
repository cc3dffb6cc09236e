"""The one place a part runs: :class:`PartWorker` keeps a process's decoders from one part to the next (engines are
slow to start) and turns each part into its document, whichever executor asked (here, a shard, a Ray actor, a
pytest item).

A **part document** (JSON-able, kind ``specverify-part``) holds the part, the identity of its run (``run``: the
configuration's ``RunConfig``; ``block_draws``), the command that reproduces the run, and what the part found:

- a whole scenario: ``results`` (its ``ScenarioResult``\\ s, a gate's skipped one, or ``not run: budget
  exhausted``);
- a block: ``draws`` (its counts, ``run.tally`` JSON), ``draft_law`` and ``counters`` (the engine's counter window);
- the reproducibility part: ``reproducible``, ``timings`` and ``engine`` (the decoder's ``engine_info``);
- always ``violation`` (a protocol violation with how to reproduce it, never raised; the part's results then say
  which scenario broke), ``error`` (the factory or adapter could not be set up: verdict ``error``), ``state``
  (``engine_info["state"]`` over this worker's decoders after the part: the merge takes each key's largest value,
  as one decoder would show it) and ``elapsed_s``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Optional

from specverify.certification.checks.scenario import gate, reproducibility, run_scenario
from specverify.certification.checks.twosample import against_spec
from specverify.certification.config.execution import command_line
from specverify.certification.execution.plan import REPRODUCIBILITY, Part, Plan, RunPlan
from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.results.migrate import PART_SCHEMA_VERSION
from specverify.certification.run.collect import Session, scenario_seed
from specverify.certification.run.context import BudgetSpent, Deadline, Run
from specverify.certification.run.factory import SetupFailure
from specverify.certification.run.tally import draws_to_dict
from specverify.enums import NotRun, ScenarioKind
from specverify.errors import ProtocolViolation, check
from specverify.protocol import Request

__all__ = ["PART_SCHEMA_VERSION", "PartWorker", "Share", "document", "broken_result"]

_MID = "not run: budget exhausted mid-scenario"
_wall = time.perf_counter  # the clock of the budget's deadline between calls (tests replace it)


class Share:
    """The budget's share of a whole scenario, as its check asks for it (``Run.allotted``): ``fraction`` of its
    planned N, decided by whoever schedules the parts (``budget.Allocation``)."""

    def __init__(self, fraction: float):
        self._fraction = float(fraction)

    def fraction(self, name: str) -> float:
        return self._fraction


def document(run: RunPlan, part: Part) -> dict:
    """The empty document of ``part`` of ``run``: its identity and the run's."""
    return {
        "schema_version": PART_SCHEMA_VERSION,
        "kind": "specverify-part",
        "part": part.to_dict(),
        "block_draws": run.execution.block_draws,
        "run": run.config.to_dict(),
        "command": command_line(run.config, run.execution.one),
        "violation": None,
        "error": None,
    }


def broken_result(scenario, violation: str, reproduce: str) -> ScenarioResult:
    """The result of the scenario whose call broke the protocol."""
    broke = ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=True, passed=False)
    return replace(broke, violation=violation, reproduce=reproduce, note="protocol violation")


class _Decoders:
    """One configuration's decoders in this process: its runner (and the ``--against`` decoder's), their sessions
    and the ``Run`` every check reads."""

    def __init__(self, run: RunPlan):
        from specverify.certification.run.runner import make_runner

        config = run.config
        self.runners = [make_runner(config.factory, config)]
        try:
            if config.against:
                self.runners.append(make_runner(against_spec(config.factory_name, config.against), config))
        except BaseException:
            self.close()
            raise
        self.deadlines = [Deadline(r, clock=lambda: _wall()) for r in self.runners]
        sessions = [Session(d) for d in self.deadlines]
        other = sessions[1] if config.against else None
        self.run = Run(config, run.matrix, run.alpha, sessions[0], other)
        self.sessions = sessions

    def close(self) -> None:
        for runner in self.runners:
            runner.close()


class PartWorker:
    """Runs parts of ``plan`` in this process, keeping each configuration's decoders between parts (one
    configuration's at a time: engines hold memory). ``here``: ``{configuration: scenario names}`` this worker will
    run (a shard's, an item's; calls shared between scenarios are made only for those), None: every scenario of the
    plan. Use as a context manager, or call :meth:`close`."""

    def __init__(self, plan: Plan, here: Optional[dict] = None):
        self.plan, self.here = plan, here
        self._held: dict = {}  # configuration -> _Decoders

    def _decoders(self, run: RunPlan, upcoming) -> _Decoders:
        for name in [n for n in self._held if n != run.configuration]:
            if upcoming is None or not any(p.configuration == name for p in upcoming):
                self._held.pop(name).close()
        held = self._held.get(run.configuration)
        if held is None:
            held = self._held[run.configuration] = _Decoders(run)
        return held

    def run(
        self,
        part: Part,
        *,
        share: Optional[float] = None,
        left_s: Optional[float] = None,
        journal: Optional[Callable] = None,
        on_draws: Optional[Callable] = None,
        upcoming: Optional[list] = None,
    ) -> dict:
        """The document of ``part`` (module docstring). ``share``: the budget's fraction of its planned N (None: no
        budget); ``left_s``: seconds of the budget left (calls stop after them); ``journal(side)``: the resume
        file's record of its draws for a decoder side (0, or 1: ``--against``); ``on_draws(done, total)``: told
        after each call of a draw; ``upcoming``: the parts this worker runs next (decoders they need stay open).
        A protocol violation is recorded, never raised; a set-up failure is recorded as ``error``."""
        check(
            isinstance(part, Part) and self.plan.by_id.get(part.id) == part,
            f"part={part!r} is not a part of this run's plan: take it from plan(config, execution).parts.",
        )
        started = time.perf_counter()
        run_plan = self.plan.run_of(part)
        doc = document(run_plan, part)
        try:
            held = self._decoders(run_plan, upcoming)
        except SetupFailure as exc:
            return dict(doc, error=exc.reason, elapsed_s=time.perf_counter() - started)
        here = None if self.here is None else frozenset(self.here.get(part.configuration, ()))
        run = replace(held.run, started=started, allocation=None if share is None else Share(share), here=here)
        for side, (deadline, session) in enumerate(zip(held.deadlines, held.sessions)):
            deadline.end = None if left_s is None else _wall() + left_s
            session.journal = None if journal is None else journal(side)
            session.on_draws = on_draws
        try:
            doc.update(self._run(run_plan, run, part, upcoming))
        except SetupFailure as exc:
            doc["error"] = exc.reason
        finally:
            for session in held.sessions:
                session.journal = session.on_draws = None
        if doc["error"] is None and doc["violation"] is None:
            doc["state"] = _state(held)
        doc["elapsed_s"] = time.perf_counter() - started
        return doc

    def _run(self, run_plan: RunPlan, run: Run, part: Part, upcoming) -> dict:
        if part.scenario == REPRODUCIBILITY:
            return self._reproducibility(run_plan, run)
        scenario = run_plan.matrix[part.scenario]
        later = [
            run_plan.matrix[p.scenario]
            for p in upcoming or ()
            if p.configuration == part.configuration and p.scenario != REPRODUCIBILITY
        ]
        home = (run_plan.chosen[0].pair,) if run_plan.chosen else ()
        try:
            for session in filter(None, (run.session, run.other)):  # engines hold memory: close unneeded pairs
                session.release_unused([scenario, *later], keep=home)
            if part.count is None:
                return {"results": [r.to_dict() for r in run_scenario(run, scenario)]}
            return _run_block(run, scenario, part)
        except BudgetSpent:
            return {"results": [ScenarioResult.skipped(scenario, NotRun.BUDGET, _MID).to_dict()]}
        except ProtocolViolation as exc:
            again = run.reproduce(scenario)
            return {
                "violation": f"{scenario.name}: {exc}\nReproduce: {again}",
                "results": [broken_result(scenario, str(exc), again).to_dict()],
            }

    def _reproducibility(self, run_plan: RunPlan, run: Run) -> dict:
        first = run_plan.chosen[0] if run_plan.chosen else None
        out = {"reproducible": list(reproducibility(run, run_plan.chosen))}
        out["timings"] = run.session.timings(first) if first else None  # decoder.timings(), for `speedup --from`
        out["engine"] = run.session.run_engine_info(first) if first else None
        return out

    def allocation(self, configuration: Optional[str], spent_s: float = 0.0, names=None) -> object:
        """The budget's ``budget.Allocation`` of one configuration's run (its scenarios' planned sizes; under a
        time budget a pilot measures the decoder's throughput first), made in this process because planning a
        check's size may call the decoder (a user pair's pilot of the plain path). ``spent_s``: seconds of the
        budget already spent; ``names``: the scenarios it is shared between (default: the run's; a shard or a pytest
        item shares its own budget between its own scenarios)."""
        started = _wall() - spent_s
        from specverify.certification.run.budget import SAFETY, Allocation, pilot_rate

        run_plan = self.plan.run_named(configuration)
        held = self._decoders(run_plan, None)
        run = replace(held.run, started=started)
        config, chosen = run_plan.config, [s for s in run_plan.chosen if names is None or s.name in names]
        for deadline in held.deadlines:  # the pilot counts against the budget too
            deadline.end = None if config.budget_s is None else started + config.budget_s
        sizes = {s.name: _planned_size(run, s) for s in chosen}
        total = config.max_samples if config.max_samples is not None else sum(sizes.values())
        first = next((s for s in chosen if s.kind == ScenarioKind.SAMPLING), None)
        if config.budget_s is not None and first is not None:
            from specverify.certification import checks

            try:
                if checks.requirements(first, run.matrix) <= run.session.decoder(first).capabilities:
                    rate = pilot_rate(run.session, first, run.seed)
                    left = max(0.0, config.budget_s - (_wall() - started))
                    total = min(total, int(rate * left * SAFETY))
            except ProtocolViolation:
                pass  # the run itself finds and reports it, with the scenario that shows it
            except BudgetSpent:
                total = 0  # the pilot alone spent the budget
        return Allocation(sizes, set(run.matrix.core), total)

    def close(self) -> None:
        """Close every decoder still held."""
        while self._held:
            self._held.pop(next(iter(self._held))).close()

    def __enter__(self) -> PartWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _planned_size(run: Run, scenario) -> int:
    """The scenario's planned outcomes; 0 when planning it already broke the protocol (a pilot's calls): the run
    itself meets the violation again in that scenario and reports it there."""
    from specverify.certification import checks

    try:
        return checks.check_for(scenario, run.config, run.matrix).planned_size(run, scenario)
    except (ProtocolViolation, BudgetSpent):
        return 0


def _run_block(run: Run, scenario, part: Part) -> dict:
    """One block's counts (or its gate's skipped result), with what the merge needs of the decoder."""
    skipped = gate(run, scenario)
    if skipped is not None:
        return {"results": [skipped.to_dict()]}
    handle = run.session.decoder(scenario)
    seeded = handle.seeded and scenario.seeded
    seed = scenario_seed(run.seed, scenario.name) if seeded else None
    request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed)
    with run.session.counting() as scope:
        draws = run.session.draw(handle, request, part.count, start=part.start)
        counters = scope.close(run.session.handles())
    return {"draws": draws_to_dict(draws), "draft_law": handle.draft_law, "counters": counters}


def _state(held: _Decoders) -> Optional[dict]:
    """The engines' state after a part (a description, never evidence for the verdict: a failure gives None)."""
    try:
        state = held.sessions[0].engine_state()
    except Exception:  # noqa: BLE001 - engine_info is a description of the engine
        return None
    return state or None
