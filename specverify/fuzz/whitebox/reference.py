"""``ReferenceWhiteBox``: the transactional reference decoder behind ``WhiteBoxDecoder``, with fault injection.

A thin wrapper around ``TransactionalDecoder``: it runs one round per ``step`` with that round's draft count, makes the
round abort cleanly (restore the committed history, crop both caches back) when anything inside it raises, and
injects faults through a pool whose k-th allocation fails and a draft that raises or changes version on its k-th
call. Keyed draws are taken per round for the round's draft count (``keyed_uniforms(seed, position, purpose)``),
exactly the draws the decoder itself takes, so ``num_draft_tokens`` may change from round to round.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np

from specverify.errors import InvalidArgument, check
from specverify.fuzz.whitebox.protocol import FAULT_KINDS, BlockUse, Fault, InjectedFault, RoundReport
from specverify.protocol import Request
from specverify.reference.paged import BlockPool, OutOfBlocks, PagedCache
from specverify.reference.transactional import TransactionalDecoder
from specverify.sampling import Purpose, keyed_uniforms

if TYPE_CHECKING:
    import torch

    from specverify.oracles import ToyModel, Vocab
    from specverify.reference.transactional import RequestState, _Branch

__all__ = ["ReferenceWhiteBox", "VersionedDraft", "FaultyPool", "InjectedOutOfBlocks", "ProbedDecoder"]

_PURPOSES = (Purpose.DRAFT, Purpose.ACCEPT, Purpose.TARGET)


class InjectedOutOfBlocks(InjectedFault, OutOfBlocks):
    """The injected allocation failure (an ``OutOfBlocks`` as the pool would raise it, and an ``InjectedFault``)."""


class FaultyPool(BlockPool):
    """A ``BlockPool`` whose allocation number ``fail_at`` (counted from arming) raises ``InjectedOutOfBlocks``."""

    fail_at: Optional[int] = None

    def allocate(self) -> int:
        if self.fail_at is not None:
            self.fail_at -= 1
            if self.fail_at < 0:
                self.fail_at = None
                raise InjectedOutOfBlocks("injected allocation failure (whitebox Fault 'alloc_failure')")
        return super().allocate()


class VersionedDraft:
    """A draft model with versions (``models[v]``), the one caches hold: reads go to ``models[version]``.

    ``arm(fault)`` counts draft calls (``head``): ``draft_error`` raises ``InjectedFault`` at call ``fault.after``,
    ``draft_switch`` sets ``version = fault.version`` before it. Toy KV entries depend on the tokens only, so a
    switch keeps the cached KV valid and changes the draft law from the next call on."""

    def __init__(self, models: Sequence):
        models = tuple(models)
        check(
            len(models) >= 1 and all(m.vocab == models[0].vocab for m in models),
            f"drafts={models!r} must be >= 1 toy models over one vocabulary (the draft versions).",
        )
        self.models, self.version = models, 0
        self._fault: Optional[Fault] = None
        self._calls = 0

    @property
    def vocab(self) -> Vocab:
        return self.models[0].vocab

    @property
    def root_kv(self) -> np.uint64:
        return self.models[self.version].root_kv

    @property
    def current(self) -> ToyModel:
        return self.models[self.version]

    def arm(self, fault: Optional[Fault]) -> None:
        if fault is not None and fault.kind == "draft_switch" and fault.version >= len(self.models):
            raise InvalidArgument(
                f"fault.version={fault.version!r} but there are {len(self.models)} draft versions "
                "(0-based). Draw schedules with versions=scenario.versions."
            )
        self._fault, self._calls = fault, 0

    def disarm(self) -> None:
        """End of round: a switch that did not fire yet fires now; an error that did not fire is dropped."""
        if self._fault is not None and self._fault.kind == "draft_switch":
            self.version = self._fault.version
        self._fault = None

    def step_kv(self, prev: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # uint64 [n], int [n] -> uint64 [n]
        """The cache API's KV step; toy entries depend on the tokens only, so every version agrees."""
        return self.models[self.version].step_kv(prev, tokens)

    def head(self, kv: np.ndarray) -> torch.Tensor:  # uint64 [B] -> logits [B, V]
        fault = self._fault
        if fault is not None and self._calls == fault.after:
            self._fault = None
            if fault.kind == "draft_error":
                raise InjectedFault(f"injected exception inside the draft at call {fault.after}")
            self.version = fault.version
        self._calls += 1
        return self.models[self.version].head(kv)


class ProbedDecoder(TransactionalDecoder):
    """``TransactionalDecoder`` with per-round keyed draws for the round's draft count and a hook mid-round
    (``during``)."""

    during = None
    opening = None  # the RequestState ``start`` is filling (so a failed open can release its blocks)

    def snapshot(self, state: RequestState) -> _Branch:
        branch = super().snapshot(state)
        num_draft_tokens = state.request.num_draft_tokens
        positions = np.arange(state.rng_position, state.rng_position + num_draft_tokens + 1)
        branch.uniforms = {p: keyed_uniforms(state.seed, positions, p) for p in _PURPOSES}
        return branch

    def verify(self, state: RequestState, branch: _Branch) -> list[torch.Tensor]:
        rows = super().verify(state, branch)
        hook, self.during = self.during, None
        if hook is not None:
            hook()  # provisional entries sit in both caches now
        return rows

    def discard(self, state: RequestState) -> None:
        self.opening = state
        super().discard(state)

    def _rules(self, request):
        # one per params for the decoder's life: its memo of laws then serves every request and every sample
        cache = self.__dict__.setdefault("_rules_by_params", {})
        if request.params not in cache:
            cache[request.params] = super()._rules(request)
        return cache[request.params]


@dataclass(eq=False)
class _Handle:
    state: object = field(repr=False)  # RequestState
    request: Request
    closed: bool = False


class ReferenceWhiteBox:
    """The reference (``TransactionalDecoder``) as a ``WhiteBoxDecoder``; supports every fault kind.

    Parameters
    ----------
    target : ToyModel
    drafts : ToyModel or sequence of ToyModel
        Draft versions; version 0 drafts first, a ``draft_switch`` fault selects another.
    block_size, num_blocks : int
        The shared paged pool (prefix sharing across requests, copy-on-write).

    Examples
    --------
    >>> from specverify.oracles import make_vocab, random_target, draft_near
    >>> from specverify.params import SamplingParams
    >>> t = random_target(make_vocab(5), seed=3)
    >>> box = ReferenceWhiteBox(t, draft_near(t, distance=0.5, seed=1), block_size=2)
    >>> h = box.open(Request((0, 1), SamplingParams(max_tokens=3)), seed=7)
    >>> report = box.step(h, num_draft_tokens=2)
    >>> box.state(h)["tokens"] == report.emitted
    True
    """

    faults = frozenset(FAULT_KINDS)
    decoder_class = ProbedDecoder  # a subclass may swap in a (deliberately broken) subclass of ProbedDecoder

    def __init__(self, target, drafts, *, block_size: int = 4, num_blocks: int = 256):
        self.draft = VersionedDraft(drafts if isinstance(drafts, (list, tuple)) else (drafts,))
        self.decoder = self.decoder_class(target, self.draft, block_size=block_size, num_blocks=num_blocks)
        self.pool = self.decoder.pool = FaultyPool(num_blocks, block_size)
        self.block_size = block_size
        self.handles: set = set()  # open handles

    # ------------------------------------------------------------------------------------------- lifecycle
    def open(self, request: Request, seed: int, *, committed: tuple[int, ...] = ()) -> _Handle:
        check(isinstance(seed, int) and 0 <= seed < 2**63, f"seed={seed!r} must be an int in [0, 2**63).")
        dec = self.decoder
        dec._validate(request, "request")
        rebuilt = dec.rebuild_state(request, committed) if committed else None
        check(
            rebuilt is None or rebuilt.finish_reason is None,
            f"committed={committed!r} already finished "
            f"({rebuilt and rebuilt.finish_reason!r}): only an unfinished request can be resumed.",
        )
        dec.opening = None
        try:
            state = dec.start(request, seed)
            if rebuilt is not None:  # resume: recompute the caches from the prompt and the committed tokens
                state.history, state.cursor = rebuilt.history, len(committed)
                dec.discard(state)
        except BaseException:
            if dec.opening is not None:
                dec.opening.target_cache.free()
                dec.opening.draft_cache.free()
            raise
        handle = _Handle(state=state, request=request)
        self.handles.add(handle)
        return handle

    def close(self, handle: _Handle) -> None:
        self._live(handle, finished_ok=True)
        handle.state.target_cache.free()
        handle.state.draft_cache.free()
        handle.closed = True
        self.handles.discard(handle)

    # ------------------------------------------------------------------------------------------- one round
    def step(
        self,
        handle: _Handle,
        *,
        num_draft_tokens: int,
        during: Optional[Callable[[], None]] = None,
        fault: Optional[Fault] = None,
    ) -> RoundReport:
        state = self._live(handle)
        if not (isinstance(num_draft_tokens, int) and num_draft_tokens >= 1):  # hot path: no message unless it fails
            raise InvalidArgument(f"num_draft_tokens={num_draft_tokens!r} must be an int >= 1.")
        if not (fault is None or isinstance(fault, Fault)):
            raise InvalidArgument(f"fault={fault!r} must be a specverify.fuzz.whitebox.Fault or None.")
        before = (state.history, len(state.stream), state.cursor, len(state.accepted), len(state.drafted))
        state.request = replace(handle.request, num_draft_tokens=num_draft_tokens)
        self._arm(fault)
        self.decoder.during = during
        try:
            self.decoder.round(state)
        except BaseException:
            self._abort(state, before)
            raise
        finally:
            self._disarm()
            state.request = handle.request
        emitted = tuple(state.stream[-1]) if len(state.stream) > before[1] else ()
        return RoundReport(emitted=emitted, drafted=state.drafted[-1], accepted=state.accepted[-1])

    def _abort(self, state, before) -> None:
        """Roll a failed round back: the committed history, stream and counters as before; caches cropped."""
        state.history, stream_len, state.cursor, accepted_len, drafted_len = before
        del state.stream[stream_len:], state.accepted[accepted_len:], state.drafted[drafted_len:]
        self._disarm()
        self.decoder.discard(state)

    def _arm(self, fault) -> None:
        if fault is not None:
            check(fault.kind in self.faults, f"fault.kind={fault.kind!r} is not supported here.")
        if fault is not None and fault.kind == "alloc_failure":
            self.pool.fail_at = fault.after
        elif fault is not None:
            self.draft.arm(fault)

    def _disarm(self) -> None:
        self.pool.fail_at = None
        self.draft.disarm()
        self.decoder.during = None

    # ------------------------------------------------------------------------------------------- looking inside
    def state(self, handle: _Handle) -> dict:
        s = handle.state
        return _components(s.view(), (s.target_cache, s.draft_cache))

    def rebuild(self, request: Request, committed: tuple[int, ...], *, finish_reason: Optional[str]) -> dict:
        fresh = self.decoder.rebuild_state(request, tuple(committed), no_token=finish_reason == "no_token")
        pool = BlockPool(2 * max(1, -(-fresh.position // self.block_size)), self.block_size)
        caches = (PagedCache(pool, self.decoder.target), PagedCache(pool, self.draft))
        for cache in caches:  # the same block size as the live pool: block tables are comparable
            if fresh.position:
                cache.prefill((request.prompt + tuple(committed))[: fresh.position])
        fresh.target_cache, fresh.draft_cache = caches
        return _components(fresh.view(), caches)

    def blocks(self, handle: _Handle) -> BlockUse:
        """Blocks held; provisional: those holding a slot at or past the request's committed ``position`` (what
        the transaction may still drop), whatever the cache itself marks committed."""
        caches = (handle.state.target_cache, handle.state.draft_cache)
        position, provisional = handle.state.position, set()
        for cache in caches:
            if len(cache) > position:
                provisional.update(cache.block_table[position // self.block_size :])
        return BlockUse(held=sum((c.block_table for c in caches), ()), provisional=frozenset(provisional))

    def num_free_blocks(self) -> int:
        return self.pool.num_free

    def published_blocks(self) -> frozenset:
        return frozenset(b for b in range(self.pool.num_blocks) if self.pool.is_published(b))

    def _live(self, handle, finished_ok: bool = False):
        if not (isinstance(handle, _Handle) and not handle.closed):
            raise InvalidArgument(
                f"handle={handle!r} is not an open handle of this decoder (closed, or from another decoder)."
            )
        if not (finished_ok or handle.state.finish_reason is None):
            raise InvalidArgument(
                f"the request already finished ({handle.state.finish_reason!r}): close() it instead of step()."
            )
        return handle.state


def _components(view, caches) -> dict:
    """A ``StateView`` as named components, plus the block-table shape of each cache (blocks held, committed)."""
    return {
        "tokens": view.generated,
        "position": view.position,
        "target_kv": view.target_kv,
        "draft_kv": view.draft_kv,
        "block_tables": tuple((len(c.block_table), c.num_committed) for c in caches),
        "seen": view.seen,
        "counts": view.counts,
        "grammar_state": view.grammar_state,
        "stop_state": view.stop_state,
        "rng_position": view.rng_position,
        "stream_cursor": view.stream_cursor,
        "finish_reason": view.finish_reason,
    }
