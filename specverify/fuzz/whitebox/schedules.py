"""Schedules and the workloads they run on (plain data; the strategies live in ``whitebox.strategies``).

A ``Workload`` is what a schedule runs on: seeded requests and a factory of fresh white-box decoders. A schedule is
a tuple of events over the workload's requests. The first ``Workload.initial`` requests start running; ``Add``
starts the next pending one. An event's ``slot`` picks, cyclically, among the requests that can take it (``Step``,
``Preempt``: the running ones; ``Resume``: the preempted ones; ``Cancel``: either), so most events do something; one
that finds none is skipped and recorded as such, and shrinking never produces an invalid schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from specverify.errors import check
from specverify.fuzz.whitebox.protocol import Fault

__all__ = ["Step", "Cancel", "Preempt", "Resume", "Add", "Workload", "DURING_ACTIONS"]

#: What a ``Step`` does mid-round (inside the round, while provisional state exists).
DURING_ACTIONS = (None, "cancel", "add")


@dataclass(frozen=True)
class Step:
    """Run one round of ``slot`` with ``num_draft_tokens`` drafts, with ``fault`` armed for that round and
    ``during`` done mid-round: ``"cancel"`` cancels the request inside the round, ``"add"`` starts the next pending
    request."""

    slot: int
    num_draft_tokens: int = 2
    fault: Optional[Fault] = None
    during: Optional[str] = None

    def __post_init__(self):
        check(isinstance(self.slot, int) and self.slot >= 0, f"slot={self.slot!r} must be an int >= 0.")
        check(
            isinstance(self.num_draft_tokens, int) and self.num_draft_tokens >= 1,
            f"num_draft_tokens={self.num_draft_tokens!r} must be an int >= 1.",
        )
        check(self.during in DURING_ACTIONS, f"during={self.during!r} must be one of {DURING_ACTIONS!r}.")
        check(self.fault is None or isinstance(self.fault, Fault), f"fault={self.fault!r} must be a Fault or None.")


@dataclass(frozen=True)
class Cancel:
    """Cancel ``slot`` between rounds (its blocks are released, its output so far stays streamed)."""

    slot: int


@dataclass(frozen=True)
class Preempt:
    """Preempt ``slot``: release everything but its committed tokens; ``Resume`` recomputes the rest from them."""

    slot: int


@dataclass(frozen=True)
class Resume:
    """Resume a preempted ``slot`` (recompute from the prompt and its committed tokens)."""

    slot: int


@dataclass(frozen=True)
class Add:
    """Start the next pending request (add it to the running batch)."""


@dataclass(frozen=True)
class Workload:
    """What a schedule runs on: ``requests`` (each with an explicit seed), the first ``initial`` of them running
    from the start, ``make`` -- a callable building a fresh white-box decoder (the schedule's decoder and the
    uninterrupted solo runs each get their own) -- the number of draft ``versions`` it holds, and a ``label`` for
    failure reports."""

    make: Callable
    requests: tuple
    initial: int = 1
    versions: int = 1
    label: str = ""

    def __post_init__(self):
        check(callable(self.make), f"make={self.make!r} must be a callable returning a WhiteBoxDecoder.")
        check(
            len(self.requests) >= 1 and all(getattr(r, "seed", None) is not None for r in self.requests),
            f"requests={self.requests!r} must be >= 1 Requests with explicit seeds (the solo runs replay them).",
        )
        check(
            isinstance(self.initial, int) and 1 <= self.initial <= len(self.requests),
            f"initial={self.initial!r} must lie in [1, {len(self.requests)}].",
        )
        check(isinstance(self.versions, int) and self.versions >= 1, f"versions={self.versions!r} must be >= 1.")
