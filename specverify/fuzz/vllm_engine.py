"""State fuzzing on a real vLLM engine: the white-box harness's schedules driven through vLLM's own engine API.

A schedule (``whitebox.schedules``' ``Add``, ``Step``, ``Cancel``, ``Preempt``, and :class:`Resubmit`) runs over a
built ``vllm.LLM`` in one process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): ``Add`` is ``llm_engine.add_request`` of the
next pending request, ``Step`` one ``llm_engine.step()`` (every running request advances; its ``slot`` is not used),
``Cancel`` an ``llm_engine.abort_request`` of a started, unfinished request and ``Preempt`` the scheduler's own
preemption of a running one (removed from ``scheduler.running``, ``Scheduler._preempt_request``, and dropped from the
set of requests scheduled in the previous step, as ``Scheduler.reset_prefix_cache`` does), which the scheduler later
resumes by recomputing its KV from the committed tokens; ``Resubmit`` adds a finished or cancelled request again under
its id. vLLM resumes on its own, so ``Resume`` is not an event here. After the schedule every request not yet added is
added and the engine steps until nothing is left.

The property (:func:`engine_mismatches`): every request that finishes has the output it has in a run without events
(all requests added at once, stepped to the end). With greedy requests that is one output each; a seeded request is
compared the same way only where the engine's seeded sampling does not depend on the batch (docs/findings/vllm.md,
findings 1 and 6). The module imports no adapter: it takes the engine and vLLM's ``SamplingParams`` as built.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Sequence

from specverify.errors import InvalidArgument, check
from specverify.fuzz.whitebox.schedules import Add, Cancel, Preempt, Step

__all__ = ["Resubmit", "EngineRun", "run_engine_schedule", "engine_mismatches"]

_RUN = itertools.count()
_MAX_STEPS = 10_000


@dataclass(frozen=True)
class Resubmit:
    """Add a request again under the same request id once it is done (finished or cancelled; ``slot`` picks among
    those, cyclically): vLLM gives every request an internal id of its own, so the caller's id may be reused. Its
    output is the one its second run finishes with."""

    slot: int

    def __post_init__(self):
        check(isinstance(self.slot, int) and self.slot >= 0, f"slot={self.slot!r} must be an int >= 0.")


@dataclass
class EngineRun:
    """What one schedule did: ``outputs`` the token ids of each request that finished (by index), ``cancelled`` the
    indices aborted before they finished, ``preempted`` and ``resubmitted`` how many preemptions and resubmissions the
    schedule made and ``skipped`` the
    events that found no request to act on (recorded, never silent)."""

    outputs: dict = field(default_factory=dict)
    cancelled: set = field(default_factory=set)
    preempted: int = 0
    resubmitted: int = 0
    skipped: list = field(default_factory=list)


def _scheduler(llm) -> object:
    try:
        return llm.llm_engine.engine_core.engine_core.scheduler
    except AttributeError:
        raise InvalidArgument(
            "llm: its scheduler is not reachable in this process; build the engine with "
            "VLLM_ENABLE_V1_MULTIPROCESSING=0 (the engine core in-process) to preempt from outside."
        ) from None


def _check(llm, prompts: Sequence, params: Sequence, schedule: Sequence) -> None:
    check(hasattr(llm, "llm_engine"), f"llm={llm!r} must be a built vllm.LLM (its llm_engine drives the schedule).")
    check(
        len(prompts) == len(params) and len(prompts) >= 1,
        f"prompts ({len(prompts)}) and params ({len(params)}) must be equally long and not empty: one SamplingParams "
        "per prompt.",
    )
    for i, prompt in enumerate(prompts):
        check(
            isinstance(prompt, (list, tuple)) and prompt and all(isinstance(t, int) and t >= 0 for t in prompt),
            f"prompts[{i}]={prompt!r} must be a non-empty sequence of token ids.",
        )
    bad = [e for e in schedule if not isinstance(e, (Add, Step, Cancel, Preempt, Resubmit))]
    check(not bad, f"schedule holds {bad[:3]!r}: events are whitebox.schedules Add, Step, Cancel, Preempt or Resubmit.")


def run_engine_schedule(llm, prompts: Sequence, params: Sequence, schedule: Sequence, *, initial: int = 1) -> EngineRun:
    """Run ``schedule`` over ``llm`` with requests ``prompts[i]`` sampled with vLLM ``params[i]``: ``initial`` of
    them added first, the rest by ``Add`` events (and all left at the end), then stepped until none is unfinished."""
    _check(llm, prompts, params, schedule)
    check(
        isinstance(initial, int) and 0 <= initial <= len(prompts),
        f"initial={initial!r} must be an int in [0, {len(prompts)}].",
    )
    engine, run = llm.llm_engine, EngineRun()
    tag = f"svfuzz{next(_RUN)}-"
    ids = [f"{tag}{i}" for i in range(len(prompts))]
    pending, started = list(range(len(prompts))), []

    def index(request_id: str) -> int:  # internal ids carry a suffix after the caller's id
        return next(i for i, rid in enumerate(ids) if request_id == rid or request_id.startswith(rid + "-"))

    def add() -> None:
        i = pending.pop(0)
        engine.add_request(ids[i], {"prompt_token_ids": list(prompts[i])}, params[i])
        started.append(i)

    def step() -> None:
        for out in engine.step():
            if out.finished and str(out.request_id).startswith(tag):
                i = index(str(out.request_id))
                if i not in run.cancelled:
                    run.outputs[i] = tuple(out.outputs[0].token_ids)

    def live() -> list:
        return [i for i in started if i not in run.outputs and i not in run.cancelled]

    for _ in range(initial):
        add()
    for event in schedule:
        if isinstance(event, Add):
            add() if pending else run.skipped.append(event)
        elif isinstance(event, Step):
            step()
        elif isinstance(event, Resubmit):
            done = [i for i in started if i in run.outputs or i in run.cancelled]
            if not done:
                run.skipped.append(event)
                continue
            i = done[event.slot % len(done)]
            run.outputs.pop(i, None)
            run.cancelled.discard(i)
            engine.add_request(ids[i], {"prompt_token_ids": list(prompts[i])}, params[i])
            run.resubmitted += 1
        elif isinstance(event, Cancel):
            candidates = live()
            if not candidates:
                run.skipped.append(event)
                continue
            i = candidates[event.slot % len(candidates)]
            engine.abort_request([ids[i]])
            run.cancelled.add(i)
        else:
            scheduler = _scheduler(llm)
            running = [r for r in scheduler.running if str(r.request_id).startswith(tag)]
            if not running:
                run.skipped.append(event)
                continue
            request = running[event.slot % len(running)]
            scheduler.running.remove(request)
            scheduler._preempt_request(request, time.monotonic())
            scheduler.prev_step_scheduled_req_ids.discard(request.request_id)
            run.preempted += 1
    while pending:
        add()
    for _ in range(_MAX_STEPS):
        if not engine.has_unfinished_requests():
            break
        step()
    else:
        raise RuntimeError(f"vLLM still had unfinished requests after {_MAX_STEPS} steps of schedule {schedule!r}")
    return run


def engine_mismatches(llm, prompts: Sequence, params: Sequence, schedule: Sequence, *, initial: int = 1) -> tuple:
    """``(mismatches, run)``: the requests of ``schedule``'s run whose finished output differs from the event-free
    run's (``[(index, with events, without)]``; empty when the property holds) and the :class:`EngineRun`. A request
    cancelled before it finished is not compared; one that neither finished nor was cancelled is a mismatch."""
    plain = run_engine_schedule(llm, prompts, params, (), initial=len(prompts))
    run = run_engine_schedule(llm, prompts, params, schedule, initial=initial)
    out = []
    for i in range(len(prompts)):
        if i in run.cancelled:
            continue
        got = run.outputs.get(i)
        if got != plain.outputs.get(i):
            out.append((i, got, plain.outputs.get(i)))
    return out, run
