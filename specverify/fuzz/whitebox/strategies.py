"""Strategies for schedules (events over a batch of requests) and for workloads on the reference decoder."""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Sequence

from hypothesis import strategies as st

from specverify.errors import check
from specverify.fuzz.strategies import prompts, sampling_params
from specverify.fuzz.whitebox.protocol import FAULT_KINDS, Fault
from specverify.fuzz.whitebox.reference import ReferenceWhiteBox
from specverify.fuzz.whitebox.schedules import Add, Cancel, Preempt, Resume, Step, Workload
from specverify.oracles import ToyModel, draft_copy, draft_near, make_vocab, random_target
from specverify.protocol import Request

__all__ = [
    "schedules",
    "steps",
    "reference_workloads",
    "reference_runs",
    "toy_family",
    "DRAFT_DISTANCES",
    "BLOCK_SIZES",
    "EVENT_KINDS",
]

DRAFT_DISTANCES = (0.0, 0.3, 0.6, 1.0)
EOS_BIASES = (-1.5, 0.0)  # rare EOS (long requests) or an EOS as likely as any token (EOS inside blocks)
BLOCK_SIZES = (1, 2, 3, 16)
#: Event kinds a schedule draws: a plain step, a step with a fault, a step with an action mid-round, and the rest.
EVENT_KINDS = ("step", "fault", "during", "cancel", "preempt", "resume", "add")
# weights by repetition: steps dominate, every other kind of event shows up in most schedules of ~10 events
_EVENT_KINDS = ("step",) * 5 + ("fault",) * 6 + ("during",) * 3 + ("cancel", "preempt", "preempt", "resume", "add")


@lru_cache(maxsize=64)
def toy_family(
    vocab_size: int, target_seed: int, distances: tuple, eos_bias: float = -1.5
) -> tuple[ToyModel, tuple[ToyModel, ...]]:
    """``(target, drafts)``: a toy target and one draft per distance (0.0 = an exact copy), built once per key."""
    target = random_target(make_vocab(vocab_size), seed=target_seed, eos_bias=eos_bias)
    drafts = tuple(
        draft_copy(target) if d == 0 else draft_near(target, distance=d, seed=100 + 7 * i + target_seed)
        for i, d in enumerate(distances)
    )
    return target, drafts


@st.composite
def _fault(draw, faults, versions: int, num_draft_tokens: int):
    """A fault for a round of ``num_draft_tokens`` drafts, placed where it fires: a draft error at one of the draft
    calls, an allocation failure at one of the first two allocations, a switch before any draft call or after the
    last."""
    kind = draw(st.sampled_from(tuple(faults)))
    if kind == "draft_switch":
        return Fault(kind, after=draw(st.integers(0, num_draft_tokens)), version=draw(st.integers(0, versions - 1)))
    return Fault(kind, after=draw(st.integers(0, 1 if kind == "alloc_failure" else num_draft_tokens - 1)))


def steps(
    num_slots: int,
    *,
    faults: Sequence[str] = FAULT_KINDS,
    versions: int = 2,
    max_num_draft_tokens: int = 4,
    kinds: Sequence[str] = EVENT_KINDS,
) -> st.SearchStrategy:
    """One schedule event: mostly ``Step`` (some with a fault armed or an action mid-round), sometimes ``Cancel``,
    ``Preempt``, ``Resume`` or ``Add``. ``kinds`` (a subset of ``EVENT_KINDS``) narrows the events drawn."""
    check(isinstance(num_slots, int) and num_slots >= 1, f"num_slots={num_slots!r} must be an int >= 1.")
    check(set(faults) <= set(FAULT_KINDS), f"faults={faults!r} must be a subset of {FAULT_KINDS!r}.")
    check(isinstance(versions, int) and versions >= 1, f"versions={versions!r} must be an int >= 1.")
    check(
        isinstance(max_num_draft_tokens, int) and max_num_draft_tokens >= 1,
        f"max_num_draft_tokens={max_num_draft_tokens!r} must be an int >= 1.",
    )
    check(
        len(kinds) > 0 and set(kinds) <= set(EVENT_KINDS),
        f"kinds={kinds!r} must be a non-empty subset of {EVENT_KINDS!r}.",
    )
    weighted = tuple(k for k in _EVENT_KINDS if k in kinds)
    return _steps(num_slots, tuple(faults), versions, max_num_draft_tokens, weighted)


@st.composite
def _steps(draw, num_slots, faults, versions, max_num_draft_tokens, weighted):
    kind = draw(st.sampled_from(weighted))
    slot = draw(st.integers(0, num_slots - 1))
    num_draft_tokens = draw(st.integers(1, max_num_draft_tokens))
    if kind == "fault" and faults:
        return Step(slot, num_draft_tokens, fault=draw(_fault(faults, versions, num_draft_tokens)))
    if kind == "during":
        return Step(slot, num_draft_tokens, during=draw(st.sampled_from(("cancel", "add"))))
    if kind in ("step", "fault", "during"):
        return Step(slot, num_draft_tokens)
    return {"cancel": Cancel(slot), "preempt": Preempt(slot), "resume": Resume(slot), "add": Add()}[kind]


def schedules(
    num_slots: int,
    *,
    faults: Sequence[str] = FAULT_KINDS,
    versions: int = 2,
    max_num_draft_tokens: int = 4,
    max_events: int = 12,
    kinds: Sequence[str] = EVENT_KINDS,
) -> st.SearchStrategy:
    """Schedules: lists of events over ``num_slots`` request slots. ``faults`` limits the injected fault kinds to
    those a decoder supports; ``versions`` is the number of draft versions a ``draft_switch`` can pick; ``kinds``
    narrows the event kinds (``EVENT_KINDS``)."""
    check(isinstance(max_events, int) and max_events >= 0, f"max_events={max_events!r} must be an int >= 0.")
    events = steps(num_slots, faults=faults, versions=versions, max_num_draft_tokens=max_num_draft_tokens, kinds=kinds)
    return st.lists(events, min_size=min(1, max_events), max_size=max_events)


def _num_blocks(requests, block_size: int) -> int:
    """Enough blocks for every request's two caches at once (so only injected faults fail an allocation)."""
    return sum(2 * -(-(len(r.prompt) + r.params.max_tokens) // block_size) for r in requests) + 4


@st.composite
def _related_prompts(draw, count: int, vocab, max_len: int):
    """``count`` prompts, most sharing a prefix with the first (so the prefix cache shares blocks)."""
    base = draw(prompts(vocab.size, vocab.eos_token_id, max_len=max_len))
    out = [base]
    for _ in range(count - 1):
        keep = draw(st.integers(0, len(base)))
        tail = draw(prompts(vocab.size, vocab.eos_token_id, max_len=3)) if keep < len(base) else ()
        out.append(base[:keep] + tail if keep + len(tail) else base)
    return out


def reference_workloads(
    *,
    max_requests: int = 3,
    block_sizes=BLOCK_SIZES,
    max_tokens=(2, 7),
    vocab_sizes=(5, 6, 7),
    params=None,
    white_box=ReferenceWhiteBox,
) -> st.SearchStrategy:
    """``Workload``s on ``ReferenceWhiteBox``: a toy target, one or two draft versions, ``1..max_requests`` seeded
    requests with related prompts and their own params, a block size from ``block_sizes``. ``params`` (a function
    of the vocab returning a strategy of ``SamplingParams``) replaces ``sampling_params``; ``white_box`` (called as
    ``white_box(target, drafts, block_size=..., num_blocks=...)``) replaces ``ReferenceWhiteBox``."""
    check(callable(white_box), f"white_box={white_box!r} must be callable (a ReferenceWhiteBox subclass).")
    check(isinstance(max_requests, int) and max_requests >= 1, f"max_requests={max_requests!r} must be >= 1.")
    check(
        len(block_sizes) > 0 and all(isinstance(b, int) and b >= 1 for b in block_sizes),
        f"block_sizes={block_sizes!r} must be a non-empty tuple of ints >= 1.",
    )
    check(set(vocab_sizes) <= set(range(2, 17)), f"vocab_sizes={vocab_sizes!r} must be sizes in [2, 16].")
    check(params is None or callable(params), f"params={params!r} must be None or vocab -> strategy.")
    return _reference_workloads(max_requests, tuple(block_sizes), max_tokens, tuple(vocab_sizes), params, white_box)


@st.composite
def _reference_workloads(draw, max_requests, block_sizes, max_tokens, vocab_sizes, params, white_box):
    vocab_size = draw(st.sampled_from(tuple(vocab_sizes)))
    distances = tuple(draw(st.lists(st.sampled_from(DRAFT_DISTANCES), min_size=1, max_size=2)))
    eos_bias = draw(st.sampled_from(EOS_BIASES))
    target, drafts = toy_family(vocab_size, draw(st.integers(0, 3)), distances, eos_bias)
    vocab = target.vocab
    count = draw(st.integers(1, max_requests))
    params_of = params or (lambda v: sampling_params(v, max_tokens=max_tokens))
    first = draw(params_of(vocab))
    requests = tuple(
        Request(
            p, first if i == 0 or draw(st.booleans()) else draw(params_of(vocab)), 1, seed=draw(st.integers(0, 2**20))
        )
        for i, p in enumerate(draw(_related_prompts(count, vocab, 6)))
    )
    block_size = draw(st.sampled_from(tuple(block_sizes)))
    make = partial(white_box, target, drafts, block_size=block_size, num_blocks=_num_blocks(requests, block_size))
    label = f"V={vocab_size} drafts={distances} eos_bias={eos_bias} block_size={block_size}"
    return Workload(
        make=make, requests=requests, initial=draw(st.integers(1, count)), versions=len(drafts), label=label
    )


def reference_runs(*, max_events: int = 12, kinds=EVENT_KINDS, **workload_options) -> st.SearchStrategy:
    """``(workload, schedule)`` pairs on the reference: ``reference_workloads(**workload_options)`` and a schedule
    over its requests and draft versions (``max_events``, ``kinds`` as in ``schedules``)."""
    check(isinstance(max_events, int) and max_events >= 0, f"max_events={max_events!r} must be an int >= 0.")
    check(
        len(kinds) > 0 and set(kinds) <= set(EVENT_KINDS),
        f"kinds={kinds!r} must be a non-empty subset of {EVENT_KINDS!r}.",
    )
    return reference_workloads(**workload_options).flatmap(
        lambda workload: schedules(
            len(workload.requests), versions=workload.versions, max_events=max_events, kinds=kinds
        ).map(lambda schedule: (workload, tuple(schedule)))
    )
