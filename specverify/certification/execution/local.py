"""Parts executed in this process, one after the other: a whole run, one shard's parts, or a pytest item's.

The loop: each part of the selection, in plan order, unless the store already holds it (a resume) or the documents
so far made it unneeded (a sequential decision in an earlier block of its scenario; the end of its decoder's run);
then :class:`~specverify.certification.execution.worker.PartWorker` runs it and the store keeps its document. A budget
(``--budget`` / ``--max-samples``) is each decoder's: its ``run.budget.Allocation`` is made when its first part
starts (a pilot measures throughput under a time budget) and gives each whole scenario its share as it starts; what
a scenario leaves unused goes to the ones after it; once the time is spent the remaining scenarios are ``not run:
budget exhausted`` (the clock is enforced between calls).
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Optional

from specverify.certification.execution.merge import needed
from specverify.certification.execution.plan import REPRODUCIBILITY, Part, Plan
from specverify.certification.execution.worker import PartWorker, document
from specverify.certification.results.evidence import ScenarioResult
from specverify.enums import NotRun
from specverify.errors import check

__all__ = ["run_local", "selected", "DRAW_PROGRESS_S"]

_now = time.perf_counter  # the budget's clock (tests replace it: a loaded machine is slower)
DRAW_PROGRESS_S = 10.0  # seconds between two progress lines inside one part's draws
_SPENT = "not run: budget exhausted"


def selected(plan: Plan, select: Optional[Iterable[str]] = None) -> list:
    """The parts this process runs, in plan order: ``select`` (part ids), else the execution's shard (part k of the
    plan on shard ``k % N + 1``), else all."""
    if select is not None:
        wanted = set(select)
        return [p for p in plan.parts if p.id in wanted]
    if plan.execution.shard is None:
        return list(plan.parts)
    index, total = plan.execution.shard
    return [p for k, p in enumerate(plan.parts) if k % total + 1 == index]


class _Budget:
    """One decoder's budget while its parts run here: its clock, its allocation (None: no budget)."""

    def __init__(self, worker: PartWorker, plan: Plan, part: Part, seconds: Optional[float], names):
        self.config = plan.run_of(part).config
        self.seconds = self.config.budget_s if seconds is None else seconds
        self.started = _now()
        budgeted = self.seconds is not None or self.config.max_samples is not None
        self.allocation = worker.allocation(part.configuration, 0.0, names) if budgeted else None

    def left(self) -> Optional[float]:
        return None if self.seconds is None else self.seconds - (_now() - self.started)

    def share(self, part: Part) -> Optional[float]:
        if self.allocation is None or part.scenario == REPRODUCIBILITY:
            return None
        return self.allocation.fraction(part.scenario)

    def spend(self, part: Part, doc: dict) -> None:
        if self.allocation is not None and part.scenario != REPRODUCIBILITY:
            self.allocation.spend(part.scenario, sum(r.get("n") or 0 for r in doc.get("results") or ()))


def run_local(
    plan: Plan,
    store,
    *,
    progress: Optional[Callable[[str], None]] = None,
    select: Optional[Iterable[str]] = None,
    budget_s: Optional[float] = None,
    worker: Optional[PartWorker] = None,
) -> None:
    """Run the parts :func:`selected` picks into ``store`` (``execution.store``). ``budget_s``: this process's
    seconds of the budget (a pytest item's share), instead of the run's ``budget_s``; ``worker``: a
    ``PartWorker`` of ``plan`` kept by the caller (its decoders stay open for its next call: a pytest session's items
    of one decoder), else one of this call's own."""
    parts = selected(plan, select)
    _say_resumed(store, progress)
    here = None
    if select is not None or plan.execution.shard is not None:
        here = {}
        for part in parts:
            here.setdefault(part.configuration, set()).add(part.scenario)
    own = worker is None
    if own:
        worker = PartWorker(plan)
    check(worker.plan is plan, f"worker={worker!r} is another plan's: give a worker of plan={plan!r}.")
    worker.here = here
    try:
        _run_parts(plan, store, worker, parts, budget_s, here, progress, kept=not own)
    finally:
        if own:
            worker.close()


def _run_parts(plan: Plan, store, worker: PartWorker, parts: list, budget_s, here, progress, kept: bool) -> None:
    """The loop of :func:`run_local`; a ``kept`` worker keeps every decoder open (its caller's next call may need
    any of them: an adapter that holds engines bounds them itself), else a decoder closes once no part left needs
    its pair."""
    budgets: dict = {}
    clock = time.perf_counter()
    for i, part in enumerate(parts):
        if store.get(part.id) is not None:
            continue
        if part.id not in {p.id for p in needed(plan, store.documents())}:
            continue  # a decision at an earlier look of its scenario, or the end of its decoder's run
        if part.configuration not in budgets:
            names = None if here is None else here.get(part.configuration)
            budgets[part.configuration] = _Budget(worker, plan, part, budget_s, names)
        budget = budgets[part.configuration]
        left = budget.left()  # one look at the clock per part
        if left is not None and left < 0 and part.scenario != REPRODUCIBILITY:
            store.put(part.id, _skipped(plan, part))
            continue
        head = f"specverify: [{i + 1}/{len(parts)}] {part.label}"
        if progress:
            elapsed = time.perf_counter() - clock
            eta = f", ETA {elapsed / i * (len(parts) - i):.0f} s" if i else ""
            progress(f"{head} (elapsed {elapsed:.0f} s{eta})")
        doc = worker.run(
            part,
            share=budget.share(part),
            left_s=left,
            journal=lambda side, part_id=part.id: store.journal(part_id, side),
            on_draws=_draw_progress(progress, head) if progress else None,
            upcoming=plan.parts if kept else parts[i + 1 :],
        )
        store.put(part.id, doc)
        budget.spend(part, doc)


def _skipped(plan: Plan, part: Part) -> dict:
    """The document of a whole scenario the budget left no time for."""
    run = plan.run_of(part)
    result = ScenarioResult.skipped(run.matrix[part.scenario], NotRun.BUDGET, _SPENT)
    return dict(document(run, part), results=[result.to_dict()], elapsed_s=0.0)


def _say_resumed(store, progress) -> None:
    if not progress or not getattr(store, "resumed", False):
        return
    done = len(store.data["finished"])
    flight = ", ".join(f"{n} ({d} draws recorded)" for n, d in store.in_flight().items() if d) or "none"
    progress(f"specverify: resuming {store.path}: {done} parts finished; in flight: {flight}")


def _draw_progress(progress: Callable[[str], None], head: str) -> Callable[[int, int], None]:
    """A ``Session.on_draws`` that says, at most every ``DRAW_PROGRESS_S`` seconds, how far a long draw is:
    ``specverify: [3/12] temperature-1: 40 960 of 65 536 draws`` (of the look being drawn, under sequential looks)."""
    last = [time.perf_counter()]

    def report(done: int, upto: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= DRAW_PROGRESS_S:
            last[0] = now
            progress(f"{head}: {done:,} of {upto:,} draws".replace(",", " "))

    return report
