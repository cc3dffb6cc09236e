"""Law properties under interruptions, driven round by round through ``WhiteBoxDecoder``.

Seeded identity (``run_schedule``'s ``solo`` property) proves law equality only for decoders whose RNG is keyed like
the reference's. ``sample_outcomes`` samples instead, so ``specverify.fuzz.check_law`` holds any white-box decoder
to docs/design.md's definition: a draft version switched mid-round (``switch_every_round``) or a preemption with
recompute after every round (``preempt_every_round``) must leave each request's law exact.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from specverify.errors import check
from specverify.fuzz.whitebox.protocol import Fault
from specverify.protocol import Request

__all__ = ["RoundPlan", "sample_outcomes", "switch_every_round", "preempt_every_round"]


@dataclass(frozen=True)
class RoundPlan:
    """What happens in one round: ``num_draft_tokens`` drafts, an optional ``fault`` armed, and ``preempt`` after it
    (the request is closed and reopened from its committed tokens)."""

    num_draft_tokens: int = 2
    fault: Optional[Fault] = None
    preempt: bool = False


def switch_every_round(versions: int, *, num_draft_tokens: int = 2, after: int = 1) -> Callable[[int], RoundPlan]:
    """A plan switching the draft version mid-round (after ``after`` draft calls) in every round, cycling over
    ``versions``: drafts of one round come from two laws."""
    check(isinstance(versions, int) and versions >= 2, f"versions={versions!r} must be an int >= 2.")
    return lambda i: RoundPlan(num_draft_tokens, Fault("draft_switch", after=after, version=(i + 1) % versions))


def preempt_every_round(*, num_draft_tokens: int = 2) -> Callable[[int], RoundPlan]:
    """A plan preempting (and resuming from the committed tokens) after every round."""
    return lambda i: RoundPlan(num_draft_tokens, preempt=True)


def _run_once(decoder, request: Request, seed: int, plan) -> tuple:
    handle, i = decoder.open(request, seed), 0
    try:
        while True:
            step = plan(i)
            decoder.step(handle, num_draft_tokens=step.num_draft_tokens, fault=step.fault)
            state = decoder.state(handle)
            if state["finish_reason"] is not None:
                return tuple(state["tokens"]), state["finish_reason"]
            if step.preempt:
                decoder.close(handle)
                handle = decoder.open(request, seed, committed=tuple(state["tokens"]))
            i += 1
            check(i <= request.params.max_tokens, "the request did not finish within max_tokens rounds.")
    finally:
        decoder.close(handle)


def sample_outcomes(
    make: Callable,
    request: Request,
    n: int,
    *,
    plan: Callable[[int], RoundPlan] = lambda i: RoundPlan(),
    entropy: int = 0,
) -> Counter:
    """Counts of (tokens, finish_reason) over ``n`` runs of ``request`` on one decoder from ``make()``, each with a
    fresh seed drawn from ``entropy``, round ``i`` following ``plan(i)``; check them with
    ``specverify.fuzz.check_law``."""
    check(callable(make), f"make={make!r} must be a callable returning a WhiteBoxDecoder.")
    check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
    decoder = make()
    seeds = np.random.default_rng(entropy).integers(0, 2**63, size=n, dtype=np.int64).tolist()
    return Counter(_run_once(decoder, request, int(s), plan) for s in seeds)
