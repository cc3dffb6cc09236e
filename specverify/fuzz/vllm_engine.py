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

The greedy property (:func:`engine_mismatches`): every request that finishes has the output it has in a run without
events (all requests added at once, stepped to the end). Sampled requests have no one output to compare, so
:func:`law_under_events` tests their law instead: the schedule runs again and again over a batch of identical
requests (seeded or not) beside neighbour requests, and the tested requests' finished outputs are a sample that
must follow the exact law of plain target sampling (``oracles.exact_law``, a pooled goodness-of-fit test). Cancel and
Resubmit act on the neighbours only: which running request a cancel hits depends on the outputs so far, so a law
over the requests left uncancelled would be biased (and so would one over resubmitted ones); a preemption only
pauses a request, so the tested ones are preempted too. The module imports no adapter: it takes the engine and
vLLM's ``SamplingParams`` as built.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

from specverify.errors import InvalidArgument, check
from specverify.fuzz.whitebox.schedules import Add, Cancel, Preempt, Step
from specverify.oracles.law import exact_law, first_finish
from specverify.params import SamplingParams
from specverify.stats import goodness_of_fit

__all__ = ["Resubmit", "EngineRun", "EngineLaw", "run_engine_schedule", "engine_mismatches", "law_under_events"]

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
    schedule made (``preempted_requests`` the indices preempted) and ``skipped`` the events that found no request to act
    on (recorded, never silent)."""

    outputs: dict = field(default_factory=dict)
    cancelled: set = field(default_factory=set)
    preempted_requests: list = field(default_factory=list)
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


def run_engine_schedule(
    llm, prompts: Sequence, params: Sequence, schedule: Sequence, *, initial: int = 1, protected: int = 0
) -> EngineRun:
    """Run ``schedule`` over ``llm`` with requests ``prompts[i]`` sampled with vLLM ``params[i]``: ``initial`` of
    them added first, the rest by ``Add`` events (and all left at the end), then stepped until none is unfinished.
    ``Cancel`` and ``Resubmit`` never pick one of the first ``protected`` requests (``Preempt`` may)."""
    _check(llm, prompts, params, schedule)
    check(
        isinstance(initial, int) and 0 <= initial <= len(prompts),
        f"initial={initial!r} must be an int in [0, {len(prompts)}].",
    )
    check(
        isinstance(protected, int) and 0 <= protected <= len(prompts),
        f"protected={protected!r} must be an int in [0, {len(prompts)}]: how many leading requests Cancel and "
        "Resubmit leave alone.",
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
            done = [i for i in started if (i in run.outputs or i in run.cancelled) and i >= protected]
            if not done:
                run.skipped.append(event)
                continue
            i = done[event.slot % len(done)]
            run.outputs.pop(i, None)
            run.cancelled.discard(i)
            engine.add_request(ids[i], {"prompt_token_ids": list(prompts[i])}, params[i])
            run.resubmitted += 1
        elif isinstance(event, Cancel):
            candidates = [i for i in live() if i >= protected]
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
            run.preempted_requests.append(index(str(request.request_id)))
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


@dataclass
class EngineLaw:
    """What :func:`law_under_events` saw: ``counts`` of the tested requests' outcomes ``(tokens, finish reason)``,
    their number ``n``, the goodness-of-fit ``pvalue`` against the exact law, the outcomes of exact probability 0
    (``impossible``: ``(outcome, count)``, most frequent first), ``rejected`` (an impossible outcome, or p below
    ``alpha``), and the events made: ``schedules`` run, ``preempted`` (of them ``tested_preempted`` on tested
    requests), ``cancelled`` and ``resubmitted`` (neighbours only)."""

    counts: dict
    n: int
    pvalue: float
    impossible: list
    rejected: bool
    alpha: float
    schedules: int = 0
    preempted: int = 0
    tested_preempted: int = 0
    cancelled: int = 0
    resubmitted: int = 0


def law_under_events(
    llm,
    target,
    prompt: Sequence[int],
    params: SamplingParams,
    vllm_params: Union[object, Callable[[int], object]],
    schedule: Union[Sequence, Callable[[int], Sequence]],
    *,
    n: int,
    batch: int = 32,
    neighbours: Sequence = (),
    alpha: float = 1e-6,
) -> EngineLaw:
    """Run ``schedule`` over ``batch`` tested requests of ``prompt`` (all added first) and the ``neighbours``
    (``(prompt, vLLM SamplingParams)`` pairs, added by the schedule's ``Add`` events, or at its end) until ``n``
    tested requests have finished, and test their outputs against ``exact_law(target, prompt, params)``.

    ``params`` is the specverify ``SamplingParams`` the vLLM ones stand for (the law, and the finish rule that cuts
    each output); ``vllm_params`` is one vLLM ``SamplingParams`` for every tested request or a callable giving the
    k-th tested request's (k counts over all schedules: ``lambda k: SamplingParams(seed=k, ...)`` seeds each one
    differently). ``schedule`` is one schedule for every run or a callable giving the r-th run's (e.g. drawn from a
    seeded generator: the law is the same whatever the events). The outcome of an output is cut at its first finish
    by the rule (vLLM may emit past it only when it is wrong, which then shows as an outcome the law does not
    have)."""
    check(isinstance(params, SamplingParams), f"params={params!r} must be a specverify SamplingParams (the law's).")
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1 (tested outcomes to draw), e.g. n=2000.")
    check(isinstance(batch, int) and batch >= 1, f"batch={batch!r} must be an int >= 1 (tested requests per run).")
    check(
        isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and 0.0 < alpha < 1.0,
        f"alpha={alpha!r} must be a number in (0, 1), e.g. alpha=1e-6.",
    )
    bad = [x for x in neighbours if not (isinstance(x, (tuple, list)) and len(x) == 2)]
    check(not bad, f"neighbours holds {bad[:2]!r}: each neighbour is a (prompt, vLLM SamplingParams) pair.")
    law = exact_law(target, prompt, params)
    vocab = target.vocab
    make = vllm_params if callable(vllm_params) else (lambda k: vllm_params)
    counts: dict = {}
    result = EngineLaw(counts=counts, n=0, pvalue=1.0, impossible=[], rejected=False, alpha=alpha)
    drawn = 0
    while result.n < n:
        prompts = [tuple(prompt)] * batch + [tuple(p) for p, _ in neighbours]
        sampling = [make(drawn + i) for i in range(batch)] + [v for _, v in neighbours]
        drawn += batch
        events = schedule(result.schedules) if callable(schedule) else schedule
        run = run_engine_schedule(llm, prompts, sampling, events, initial=batch, protected=batch)
        for i in range(batch):
            tokens = run.outputs[i]
            done = first_finish(vocab, tokens, params)
            outcome = (tuple(tokens), "unfinished") if done is None else (tuple(tokens[: done[0] + 1]), done[1])
            counts[outcome] = counts.get(outcome, 0) + 1
        result.n += batch
        result.schedules += 1
        result.preempted += run.preempted
        result.tested_preempted += sum(1 for i in run.preempted_requests if i < batch)
        result.cancelled += len(run.cancelled)
        result.resubmitted += run.resubmitted
    vec, result.impossible = law.align(counts)
    result.pvalue = float(goodness_of_fit(vec, law.probs).pvalue) if vec.sum() else 1.0
    result.rejected = bool(result.impossible) or result.pvalue < alpha
    return result
