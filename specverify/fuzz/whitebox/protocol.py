"""What a white-box decoder implements so that ``specverify.fuzz.whitebox`` can drive it round by round and look
inside.

The seed (状态事务) treats a speculative round as a transaction over the request's state: KV of both models, token
ids and positions, RNG counters, penalty history, grammar state, stop buffer, stream cursor and finish reason. The
fuzzer checks that every round leaves exactly the state a decoder would build *from scratch* from the committed
tokens, and that a round that fails leaves the state it found. For that a decoder exposes its per-request state as
named, comparable components (``state``) and a way to build those components from committed tokens alone
(``rebuild``).

Paged-KV decoders add ``blocks`` / ``num_free_blocks`` / ``published_blocks`` so the fuzzer can check that
provisional blocks are never shared or published and that every block comes back. Decoders that support fault
injection list the fault kinds in ``faults``; ``step`` arms one for its round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Optional, Protocol, runtime_checkable

from specverify.errors import SpecverifyError, check
from specverify.protocol import Request

__all__ = [
    "WhiteBoxDecoder",
    "RoundReport",
    "BlockUse",
    "Fault",
    "InjectedFault",
    "Cancelled",
    "FAULT_KINDS",
    "REQUIRED_COMPONENTS",
    "STANDARD_COMPONENTS",
    "check_white_box",
    "is_paged",
]

#: Fault kinds a decoder may support (``WhiteBoxDecoder.faults``).
FAULT_KINDS = ("alloc_failure", "draft_error", "draft_switch")
#: Components every ``state`` mapping holds; the fuzzer reads the committed tokens and finish reason from them.
REQUIRED_COMPONENTS = ("tokens", "finish_reason")
#: The names the reference uses (a decoder may hold fewer or more; the fuzzer compares whatever it returns).
STANDARD_COMPONENTS = (
    "tokens",
    "position",
    "target_kv",
    "draft_kv",
    "block_tables",
    "seen",
    "counts",
    "grammar_state",
    "stop_state",
    "rng_position",
    "stream_cursor",
    "finish_reason",
)


class InjectedFault(SpecverifyError):
    """Raised by a decoder where an injected fault fires (a failed allocation, an exception inside the draft)."""


class Cancelled(SpecverifyError):
    """Raised into a round by the fuzzer (from ``during``) to cancel the request mid-round."""


@dataclass(frozen=True)
class Fault:
    """A fault armed for one round: ``kind`` in ``FAULT_KINDS``; it fires at the ``after``-th event of its kind in
    the round (0: the first block allocation / draft model call); ``version`` is the draft version to switch to
    (``draft_switch`` only; a round with fewer draft calls switches at its end)."""

    kind: str
    after: int = 0
    version: int = 0

    def __post_init__(self):
        check(self.kind in FAULT_KINDS, f"kind={self.kind!r} must be one of {FAULT_KINDS!r}.")
        check(isinstance(self.after, int) and self.after >= 0, f"after={self.after!r} must be an int >= 0.")
        check(isinstance(self.version, int) and self.version >= 0, f"version={self.version!r} must be an int >= 0.")


@dataclass(frozen=True)
class RoundReport:
    """What one successful round did: the tokens it emitted (streamed) and, where known, how many drafts it
    proposed and accepted (``None`` when the decoder does not say)."""

    emitted: tuple[int, ...]
    drafted: Optional[int] = None
    accepted: Optional[int] = None


@dataclass(frozen=True)
class BlockUse:
    """Blocks a request holds: ``held`` in block-table order (every cache of the request), ``provisional`` the
    subset holding any entry not yet committed."""

    held: tuple[int, ...]
    provisional: frozenset[int] = frozenset()


@runtime_checkable
class WhiteBoxDecoder(Protocol):
    """A speculative decoder the fuzzer drives one round at a time.

    Methods
    -------
    open(request, seed, *, committed=()) -> handle
        Start ``request`` with keyed RNG ``seed``. ``committed`` non-empty resumes a preempted request: recompute
        every state component from the prompt and these tokens (they count as already streamed).
    step(handle, *, num_draft_tokens, during=None, fault=None) -> RoundReport
        One round with ``num_draft_tokens`` drafts. ``during()``, when given, is called once mid-round while
        provisional state exists (after the target verification, before the commit); it may raise
        (``Cancelled``). ``fault`` (a kind in ``faults``) is armed for this round only: a failed allocation or a
        draft exception raises ``InjectedFault`` where it fires; a draft switch changes the draft version for good.
        If the round raises, the request's state must be as before the round and every block the round allocated
        must be free again; the exception propagates.
    state(handle) -> Mapping[str, Hashable]
        The request's state as named comparable components, holding at least ``REQUIRED_COMPONENTS``. KV is compared
        by contents read through the block table, never by block ids.
    rebuild(request, committed, *, finish_reason) -> Mapping[str, Hashable]
        The components a round must leave after committing ``committed`` (ending with ``finish_reason``), built from
        scratch.
    close(handle)
        End the request (finished, cancelled or preempted): release everything it holds.

    Optional: ``faults`` (a frozenset of ``FAULT_KINDS``, default empty); paged KV: ``blocks(handle) ->
    BlockUse``, ``num_free_blocks() -> int``, ``published_blocks() -> frozenset`` (blocks a prefix cache can hand out).
    """

    def open(self, request: Request, seed: int, *, committed: tuple[int, ...] = ()) -> Hashable: ...

    def step(
        self,
        handle,
        *,
        num_draft_tokens: int,
        during: Optional[Callable[[], None]] = None,
        fault: Optional[Fault] = None,
    ) -> RoundReport: ...

    def state(self, handle) -> Mapping[str, Hashable]: ...

    def rebuild(
        self, request: Request, committed: tuple[int, ...], *, finish_reason: Optional[str]
    ) -> Mapping[str, Hashable]: ...

    def close(self, handle) -> None: ...


def check_white_box(decoder) -> frozenset[str]:
    """Validate that ``decoder`` implements ``WhiteBoxDecoder``; return the fault kinds it supports."""
    missing = [m for m in ("open", "step", "state", "rebuild", "close") if not callable(getattr(decoder, m, None))]
    check(
        not missing,
        f"decoder={decoder!r} lacks {missing!r}: it must implement "
        "specverify.fuzz.whitebox.WhiteBoxDecoder (open, step, state, rebuild, close). See "
        "specverify.fuzz.whitebox.ReferenceWhiteBox for an example.",
    )
    faults = frozenset(getattr(decoder, "faults", frozenset()))
    check(faults <= set(FAULT_KINDS), f"decoder.faults={sorted(faults)!r} holds kinds outside {FAULT_KINDS!r}.")
    return faults


def is_paged(decoder) -> bool:
    """Whether ``decoder`` exposes its paged KV (``blocks``, ``num_free_blocks``, ``published_blocks``)."""
    return all(callable(getattr(decoder, m, None)) for m in ("blocks", "num_free_blocks", "published_blocks"))
