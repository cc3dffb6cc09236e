"""Run a schedule against a white-box decoder and check the state-transaction properties after every event.

Properties (each failure raises ``specverify.fuzz.PropertyFailure`` naming one of ``PROPERTIES``):

- ``round_state``: after every round, state == the state rebuilt from scratch from the committed tokens.
- ``failed_round``: a round that raised (injected fault, cancellation) left the state it found, and no provisional
  block behind.
- ``stream``: each round emits exactly the tokens it committed; nothing is emitted twice or retracted; the chunks
  concatenate to the final tokens.
- ``progress``: a round that does not finish the request commits at least one token.
- ``isolation``: mid-round, a provisional block is neither published to the prefix cache nor held by another request.
- ``blocks``: after every event, blocks in use == the union of the blocks live requests hold; when every request is
  closed the free-block count is back to its start value.
- ``resume``: a preempted request reopened from its committed tokens has the state rebuilt from them.
- ``solo``: a seeded request's output equals an uninterrupted solo run with the same ``num_draft_tokens`` per
  round, whatever the batch, the faults, the cancellations and the preemptions around it (requests that ran rounds
  after a draft switch are left out: their drafts came from another law).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from specverify.errors import check
from specverify.fuzz.properties import PropertyFailure
from specverify.fuzz.whitebox.protocol import Cancelled, InjectedFault, check_white_box, is_paged
from specverify.fuzz.whitebox.schedules import Add, Cancel, Preempt, Resume, Step, Workload
from specverify.protocol import Request

__all__ = ["Trace", "run_schedule", "run_solo", "state_diff", "PROPERTIES"]

#: What ``run_schedule`` checks; a failure raises ``specverify.fuzz.PropertyFailure`` naming one of them.
PROPERTIES = ("round_state", "failed_round", "stream", "progress", "isolation", "blocks", "resume", "solo")


def state_diff(expected: Mapping, actual: Mapping) -> dict:
    """Components that differ: name -> (expected, actual); a component missing on one side shows as ``<missing>``."""
    check(
        isinstance(expected, Mapping) and isinstance(actual, Mapping),
        f"expected={type(expected).__name__}, actual={type(actual).__name__}: pass two state mappings "
        "(WhiteBoxDecoder.state / rebuild).",
    )
    names = sorted(set(expected) | set(actual))
    return {
        n: (expected.get(n, "<missing>"), actual.get(n, "<missing>"))
        for n in names
        if expected.get(n, "<missing>") != actual.get(n, "<missing>")
    }


def _show(diff: dict, limit: int = 200) -> str:
    parts = []
    for name, (want, got) in diff.items():
        parts.append(f"{name}: expected {str(want)[:limit]}, got {str(got)[:limit]}")
    return "; ".join(parts)


@dataclass(eq=False)
class _Slot:
    request: object
    status: str = "pending"  # pending, live, preempted, done, cancelled
    handle: object = None
    committed: tuple = ()
    chunks: list = field(default_factory=list)
    draft_counts: list = field(default_factory=list)  # num_draft_tokens per round run
    finish_reason: Optional[str] = None
    tainted: bool = False


@dataclass(frozen=True)
class Trace:
    """What a schedule did: ``paths`` counts the interesting paths reached (``rejection``, ``bonus``, ``finish inside
    block``, ``rollback after fault``, ...), ``outcomes`` holds (tokens, finish_reason) per request, None where it was
    cancelled."""

    paths: Counter
    outcomes: tuple
    rounds: int


class _Run:
    def __init__(self, workload: Workload):
        self.workload = workload
        self.decoder = workload.make()
        self.faults = check_white_box(self.decoder)
        self.paged = is_paged(self.decoder)
        self.free_at_start = self.decoder.num_free_blocks() if self.paged else None
        self.slots = [_Slot(request=r) for r in workload.requests]
        self.paths: Counter = Counter()
        self.rounds = 0
        self.switched = False

    # ------------------------------------------------------------------------------------------- events
    def apply(self, event) -> None:
        if isinstance(event, Step):
            self.step(event)
        elif isinstance(event, Cancel):
            self.cancel(event.slot)
        elif isinstance(event, Preempt):
            self.preempt(event.slot)
        elif isinstance(event, Resume):
            self.resume(event.slot)
        elif isinstance(event, Add):
            self.add()
        else:
            check(False, f"event={event!r} is not a schedule event (Step, Cancel, Preempt, Resume, Add).")
        self.check_blocks()

    def open(self, slot: _Slot, committed: tuple = ()) -> None:
        slot.handle = self.decoder.open(slot.request, slot.request.seed, committed=committed)
        slot.status = "live"
        if committed:
            expected = self.decoder.rebuild(slot.request, committed, finish_reason=None)
            diff = state_diff(expected, self.decoder.state(slot.handle))
            if diff:
                raise PropertyFailure(
                    "resume", f"slot {self.slots.index(slot)} resumed from {committed!r}: {_show(diff)}"
                )

    def add(self) -> bool:
        pending = [s for s in self.slots if s.status == "pending"]
        if not pending:
            self.paths["skipped event"] += 1
            return False
        self.open(pending[0])
        self.paths["add"] += 1
        return True

    def pick(self, index: int, statuses) -> Optional[_Slot]:
        """The ``index``-th (cyclically) slot in one of ``statuses``, None (and a skipped event) where none is."""
        among = [s for s in self.slots if s.status in statuses]
        if not among:
            self.paths["skipped event"] += 1
            return None
        return among[index % len(among)]

    def cancel(self, index: int) -> None:
        slot = self.pick(index, ("live", "preempted"))
        if slot is None:
            return
        if slot.status == "live":
            self.decoder.close(slot.handle)
        slot.status = "cancelled"
        self.paths["cancel"] += 1

    def preempt(self, index: int) -> None:
        slot = self.pick(index, ("live",))
        if slot is None:
            return
        slot.committed = tuple(self.decoder.state(slot.handle)["tokens"])
        self.decoder.close(slot.handle)
        slot.status, slot.handle = "preempted", None
        self.paths["preempt"] += 1

    def resume(self, index: int) -> None:
        slot = self.pick(index, ("preempted",))
        if slot is not None:
            self.resume_slot(slot)

    def resume_slot(self, slot: _Slot) -> None:
        self.open(slot, committed=slot.committed)
        self.paths["preempt + resume"] += 1

    # ------------------------------------------------------------------------------------------- one round
    def step(self, event: Step, slot: Optional[_Slot] = None) -> None:
        slot = slot or self.pick(event.slot, ("live",))
        if slot is None:
            return
        fault = event.fault if event.fault is not None and event.fault.kind in self.faults else None
        self.switched |= fault is not None and fault.kind == "draft_switch"
        slot.tainted |= self.switched
        before = self.decoder.state(slot.handle)
        reached = []
        try:
            report = self.decoder.step(
                slot.handle,
                num_draft_tokens=event.num_draft_tokens,
                fault=fault,
                during=self.during(event.during, reached),
            )
        except (InjectedFault, Cancelled) as exc:
            self.failed_round(slot, before, exc)
            return
        if event.during == "cancel" and not reached:  # the decoder never got mid-round: cancel after it
            self.paths["during not reached"] += 1
        self.after_round(slot, before, report, event.num_draft_tokens)
        if fault is not None and fault.kind == "draft_switch":
            self.paths["draft switch"] += 1

    def during(self, action: Optional[str], reached: list):
        def probe():
            reached.append(True)
            self.check_isolation()
            if action == "add" and self.add():
                self.paths["add mid-round"] += 1
            if action == "cancel":
                raise Cancelled("cancelled mid-round by the schedule")

        return probe

    def failed_round(self, slot: _Slot, before: dict, exc: Exception) -> None:
        diff = state_diff(before, self.decoder.state(slot.handle))
        if diff:
            raise PropertyFailure(
                "failed_round",
                f"slot {self.slots.index(slot)}: a round that raised "
                f"{type(exc).__name__} changed the state: {_show(diff)}",
            )
        self.check_blocks(no_provisional=True)
        if isinstance(exc, Cancelled):
            self.decoder.close(slot.handle)
            slot.status = "cancelled"
            self.paths["cancel mid-round"] += 1
        else:
            self.paths["rollback after fault"] += 1

    def after_round(self, slot: _Slot, before: dict, report, num_draft_tokens: int) -> None:
        self.rounds += 1
        index = self.slots.index(slot)
        after = self.decoder.state(slot.handle)
        old, new, reason = tuple(before["tokens"]), tuple(after["tokens"]), after["finish_reason"]
        if new[: len(old)] != old or tuple(report.emitted) != new[len(old) :]:
            raise PropertyFailure(
                "stream", f"slot {index}: committed {old!r} -> {new!r} but the round emitted {tuple(report.emitted)!r}"
            )
        if len(new) == len(old) and reason is None:
            raise PropertyFailure("progress", f"slot {index}: a round committed nothing and did not finish")
        diff = state_diff(self.decoder.rebuild(slot.request, new, finish_reason=reason), after)
        if diff:
            raise PropertyFailure(
                "round_state",
                f"slot {index} after committing {new!r} ({reason!r}): state "
                f"differs from the state rebuilt from scratch: {_show(diff)}",
            )
        self.check_blocks(no_provisional=True)
        if report.emitted:
            slot.chunks.append(tuple(report.emitted))
        slot.draft_counts.append(num_draft_tokens)
        self.paths.update(classify(report, reason))
        if reason is not None:
            self.decoder.close(slot.handle)
            slot.status, slot.committed, slot.finish_reason = "done", new, reason

    # ------------------------------------------------------------------------------------------- blocks
    def live(self):
        return [s for s in self.slots if s.status == "live"]

    def check_blocks(self, no_provisional: bool = False) -> None:
        if not self.paged:
            return
        uses = [self.decoder.blocks(s.handle) for s in self.live()]
        held = set().union(*(u.held for u in uses)) if uses else set()
        free = self.decoder.num_free_blocks()
        if free + len(held) != self.free_at_start:
            raise PropertyFailure(
                "blocks",
                f"{self.free_at_start - free} blocks in use but live requests hold "
                f"{len(held)}: a block leaked (or one is held but counted free)",
            )
        if no_provisional and any(u.provisional for u in uses):
            raise PropertyFailure(
                "failed_round",
                f"provisional blocks remain between rounds: {sorted(set().union(*(u.provisional for u in uses)))}",
            )

    def check_isolation(self) -> None:
        if not self.paged:
            return
        live = self.live()
        uses = [self.decoder.blocks(s.handle) for s in live]
        published = self.decoder.published_blocks()
        for i, use in enumerate(uses):
            others = set().union(*(u.held for j, u in enumerate(uses) if j != i)) if len(uses) > 1 else set()
            leaked = use.provisional & (published | others)
            if leaked:
                raise PropertyFailure(
                    "isolation",
                    f"slot {self.slots.index(live[i])}: provisional blocks "
                    f"{sorted(leaked)} are published or held by another request",
                )

    # ------------------------------------------------------------------------------------------- the end
    def drain(self) -> None:
        for slot in self.slots:
            if slot.status == "pending":
                self.open(slot)
            elif slot.status == "preempted":
                self.resume_slot(slot)
            budget = slot.request.params.max_tokens + 1
            while slot.status == "live":
                budget -= 1
                if budget < 0:
                    raise PropertyFailure(
                        "progress", f"slot {self.slots.index(slot)} did not finish within max_tokens + 1 rounds"
                    )
                self.step(Step(0, num_draft_tokens=slot.draft_counts[-1] if slot.draft_counts else 2), slot)
                self.check_blocks()

    def final_checks(self) -> None:
        if self.paged and self.decoder.num_free_blocks() != self.free_at_start:
            raise PropertyFailure(
                "blocks",
                f"every request closed but {self.decoder.num_free_blocks()} blocks are "
                f"free, {self.free_at_start} at the start",
            )
        for index, slot in enumerate(self.slots):
            if slot.status == "done" and sum(slot.chunks, ()) != slot.committed:
                raise PropertyFailure(
                    "stream", f"slot {index}: chunks {slot.chunks!r} do not concatenate to {slot.committed!r}"
                )
        solo_decoder = None
        for index, slot in enumerate(self.slots):
            if slot.status != "done" or slot.tainted:
                continue
            solo_decoder = solo_decoder or self.workload.make()
            solo = run_solo(solo_decoder, slot.request, slot.draft_counts)
            if solo != (slot.committed, slot.finish_reason):
                raise PropertyFailure(
                    "solo",
                    f"slot {index} (seed {slot.request.seed}) gave "
                    f"{(slot.committed, slot.finish_reason)!r} but an uninterrupted solo run with "
                    f"num_draft_tokens per round {slot.draft_counts!r} gives {solo!r}",
                )


def classify(report, reason: Optional[str]) -> list:
    """Path names one round reached, from its report and the finish reason after it."""
    paths, n = [], len(report.emitted)
    if reason is not None:
        paths.append(f"finish {reason}")
    drafted, accepted = report.drafted, report.accepted
    if drafted is None or accepted is None:
        return paths
    if accepted < drafted and n == accepted + 1:
        paths += ["rejection", "first-position rejection" if accepted == 0 else "middle rejection"]
    if drafted >= 1 and accepted == drafted and n == drafted + 1:
        paths.append("bonus")
    if reason is not None and n <= drafted:
        paths.append("finish inside block")
        if reason in ("stop", "eos"):  # ended by the tokens themselves, not by the length cap
            paths += [f"{reason} inside block", "stop or EOS inside block"]
    return paths


def run_schedule(workload: Workload, schedule: Sequence) -> Trace:
    """Run ``schedule`` on a fresh decoder from ``workload.make``; check every property; return the ``Trace``.

    Raises ``PropertyFailure`` on the first property that fails. Requests still running at the end of the
    schedule are run to completion (preempted ones resumed, pending ones started) before the final checks.
    """
    check(
        isinstance(workload, Workload),
        f"workload={workload!r} must be a specverify.fuzz.whitebox.Workload (reference_workloads draws them).",
    )
    run = _Run(workload)
    for slot in run.slots[: workload.initial]:
        run.open(slot)
    for event in schedule:
        run.apply(event)
    run.drain()
    run.final_checks()
    outcomes = tuple((s.committed, s.finish_reason) if s.status == "done" else None for s in run.slots)
    return Trace(paths=run.paths, outcomes=outcomes, rounds=run.rounds)


def run_solo(decoder, request: Request, draft_counts: Sequence[int]) -> tuple:
    """(tokens, finish_reason) of ``request`` run alone and uninterrupted, round ``i`` with ``draft_counts[i]``
    drafts (the last count repeats); ``decoder`` is a ``WhiteBoxDecoder``."""
    check_white_box(decoder)
    check(getattr(request, "seed", None) is not None, f"request={request!r} must be a Request with a seed.")
    check(
        len(draft_counts) >= 1 and all(isinstance(g, int) and g >= 1 for g in draft_counts),
        f"draft_counts={draft_counts!r} must hold at least one num_draft_tokens, each an int >= 1.",
    )
    handle = decoder.open(request, request.seed)
    tokens, reason, i = (), None, 0
    try:
        while reason is None:
            decoder.step(handle, num_draft_tokens=draft_counts[min(i, len(draft_counts) - 1)])
            state = decoder.state(handle)
            tokens, reason, i = tuple(state["tokens"]), state["finish_reason"], i + 1
            check(i <= request.params.max_tokens + 1, "run_solo: the request does not finish (no progress).")
    finally:
        decoder.close(handle)
    return tokens, reason
