"""``assert_transactional``: the white-box state-transaction properties of ``specverify.fuzz.whitebox`` as one assert.

A decoder that implements ``WhiteBoxDecoder`` (open / step / state / rebuild / close; see docs/adapters.md) and is
built as ``white_box(target, drafts, block_size=..., num_blocks=...)`` (like ``ReferenceWhiteBox``) is run on
random schedules (rounds with injected faults, cancellations, preemptions, additions). The first schedule that
breaks a property (``specverify.fuzz.whitebox.PROPERTIES``) is shrunk and shown with the property, what differed,
the workload and the events. Imports hypothesis when called (not on import).
"""

from __future__ import annotations

from typing import Callable, Optional

from specverify.errors import check

__all__ = ["assert_transactional"]


def _describe(run) -> str:
    workload, schedule = run
    requests = "; ".join(
        f"prompt {list(r.prompt)} seed {r.seed} max_tokens {r.params.max_tokens}" for r in workload.requests
    )
    events = ", ".join(repr(e) for e in schedule) or "(none: the initial requests run to completion)"
    return f"workload: {workload.label}; requests: {requests}\nschedule: {events}"


def assert_transactional(
    white_box: Optional[Callable] = None,
    *,
    max_examples: int = 100,
    seed: int = 0,
    shrink: bool = True,
    **run_options: object,
) -> int:
    """Fail unless ``white_box`` (default ``ReferenceWhiteBox``) keeps every state-transaction property on
    ``max_examples`` random schedules drawn from ``seed``; returns the number of examples tried.

    ``run_options`` go to ``specverify.fuzz.whitebox.reference_runs`` (``max_events``, ``kinds``, ``block_sizes``,
    ``max_requests``, ``max_tokens``, ``vocab_sizes``, ``params``) to narrow the schedules to what the decoder
    supports.
    """
    import random

    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from specverify.fuzz import PropertyFailure
    from specverify.fuzz.whitebox import ReferenceWhiteBox, reference_runs, run_schedule

    white_box = ReferenceWhiteBox if white_box is None else white_box
    check(
        callable(white_box),
        f"white_box={white_box!r} must be callable: white_box(target, drafts, block_size=, "
        "num_blocks=) -> WhiteBoxDecoder.",
    )
    check(isinstance(max_examples, int) and max_examples >= 1, f"max_examples={max_examples!r} must be an int >= 1.")
    check(isinstance(seed, int) and seed >= 0, f"seed={seed!r} must be an int >= 0.")
    tried = [0]

    def breaks(run) -> bool:
        tried[0] += 1
        try:
            run_schedule(*run)
        except PropertyFailure:
            return True
        return False

    budget = settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    try:
        found = find(
            reference_runs(white_box=white_box, **run_options), breaks, settings=budget, random=random.Random(seed)
        )
    except NoSuchExample:
        return tried[0]
    try:
        run_schedule(*found)
    except PropertyFailure as failure:
        name = getattr(white_box, "__qualname__", repr(white_box))
        options = "".join(f", {k}={v!r}" for k, v in sorted(run_options.items()))
        raise AssertionError(
            f"specverify: {name} breaks the state-transaction property {failure.prop!r}: {failure}\n"
            f"{_describe(found)}\n"
            f"Reproduce: assert_transactional({name}, seed={seed}, max_examples={max_examples}, "
            f"shrink={shrink}{options})"
        ) from None
    raise AssertionError(  # pragma: no cover - the shrunk example passed on a rerun: a nondeterministic decoder
        f"specverify: a schedule broke a property once and passed on a rerun (nondeterministic decoder?)\n"
        f"{_describe(found)}"
    )
