"""Deliberately broken white-box decoders: one state-transaction bug each, for testing the fuzzer itself.

Each is ``ReferenceWhiteBox`` with one mutation, named after the bug, and ``MUTANTS`` maps its name to the property
(``whitebox.PROPERTIES``, or ``"law"`` for ``specverify.fuzz.check_law``) that must catch it; ``BATCH_MUTANTS`` does
the same for wrappers of black-box decoders. A property that never fails on its mutant is not a property
(hypothesis ``tests/quality`` style). Every mutant names its bug mechanism in ``specverify.mechanisms.MECHANISMS``
(the ``mechanism`` class attribute): where a zoo entry implements the same mechanism, both point at one id.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specverify.fuzz.whitebox.protocol import RoundReport
from specverify.fuzz.whitebox.reference import ProbedDecoder, ReferenceWhiteBox, _Handle
from specverify.protocol import Request

__all__ = [
    "MUTANTS",
    "BATCH_MUTANTS",
    "PenaltyKeepsRejected",
    "StopNotRolledBack",
    "GrammarNotRolledBack",
    "TargetKVNotCropped",
    "NoAbort",
    "AbortLeaksBlock",
    "CloseKeepsDraftCache",
    "PublishesProvisional",
    "StreamRepeatsToken",
    "ResumeReemits",
    "ResumeDropsPenalties",
    "StallsOnce",
    "BatchDependentRng",
    "RngAdvancesOnFault",
    "ResumeReseeds",
    "StaleDraftQ",
    "SharedUnseededStream",
    "SeedByBatchIndex",
]


def _rejected(branch, accepted: int) -> list:
    """Drafts of a round that were not committed (the rejected suffix, or drafts after a finishing token)."""
    return list(branch.drafts[accepted:])


# ----------------------------------------------------------------------------------------- round_state


class _PenaltyDecoder(ProbedDecoder):
    def accept(self, state, branch, target_probs):
        history, accepted = super().accept(state, branch, target_probs)
        counts = list(history.counts)
        for token in _rejected(branch, accepted):  # the bug: rejected drafts stay in the penalty history
            counts[token] += 1
        return replace(history, counts=tuple(counts), seen=history.seen | set(_rejected(branch, accepted))), accepted


class PenaltyKeepsRejected(ReferenceWhiteBox):
    """Penalty history (counts / seen) keeps the rejected drafts (seed: penalty state not rolled back)."""

    mechanism = "penalty-history-not-rolled-back"
    decoder_class = _PenaltyDecoder


class _StopDecoder(ProbedDecoder):
    def accept(self, state, branch, target_probs):
        history, accepted = super().accept(state, branch, target_probs)
        stops = state.rules.stops
        if stops is None or history.finish_reason is not None:
            return history, accepted
        stop_state = history.stop_state
        for token in _rejected(branch, accepted):  # the matcher buffer keeps the rejected drafts' text
            stop_state = int(stops.next_state[stop_state, token])
        return replace(history, stop_state=stop_state), accepted


class StopNotRolledBack(ReferenceWhiteBox):
    """The stop-string matcher is not rolled back after a rejection (seed: stop buffer)."""

    mechanism = "stop-state-not-rolled-back"
    decoder_class = _StopDecoder


class _GrammarDecoder(ProbedDecoder):
    def accept(self, state, branch, target_probs):
        history, accepted = super().accept(state, branch, target_probs)
        if state.request.params.grammar is None or accepted >= len(branch.drafts) or history.finish_reason:
            return history, accepted
        return replace(history, grammar_state=branch.histories[-1].grammar_state), accepted  # after every draft


class GrammarNotRolledBack(ReferenceWhiteBox):
    """The grammar matcher keeps the state after the last draft, rejected or not (seed: processor state not copied
    and rolled back with the branch)."""

    mechanism = "grammar-state-not-rolled-back"
    decoder_class = _GrammarDecoder


class _KVDecoder(ProbedDecoder):
    def discard(self, state):
        self.opening = state
        keep, sequence = state.position, state.request.prompt + state.generated
        for cache, extra in ((state.target_cache, 1), (state.draft_cache, 0)):
            cache.crop(min(len(cache), keep + extra))  # target: one rejected entry stays (cropped one short)
            cache.commit()
            if len(cache) < keep:
                cache.prefill(sequence[len(cache) : keep])


class TargetKVNotCropped(ReferenceWhiteBox):
    """The target cache is cropped one entry short: a rejected draft's KV stays (the seed's central warning)."""

    mechanism = "target-kv-not-cropped"
    decoder_class = _KVDecoder


# ----------------------------------------------------------------------------------------- failed_round, blocks


class _NoAbortDecoder(ProbedDecoder):
    def abort(self, state, before):
        pass


class NoAbort(ReferenceWhiteBox):
    """A round that raises is not rolled back: no abort path, neither in the decoder nor around it."""

    mechanism = "failed-round-not-rolled-back"
    decoder_class = _NoAbortDecoder

    def _abort(self, state, before):
        self._disarm()


class _LeakyAbortDecoder(ProbedDecoder):
    def abort(self, state, before):
        keep = len(state.request.prompt) + len(before[0].generated) - 1  # entries each cache keeps
        for cache in (state.draft_cache, state.target_cache):
            if len(cache.block_table) > -(-keep // self.pool.block_size):  # the abort will release its last block
                self.pool.acquire(cache.block_table[-1])
                break
        super().abort(state, before)


class AbortLeaksBlock(ReferenceWhiteBox):
    """The abort path restores the state but one provisional block is never released (a refcount leak)."""

    mechanism = "failed-round-leaks-block"
    decoder_class = _LeakyAbortDecoder


class CloseKeepsDraftCache(ReferenceWhiteBox):
    """Closing a request releases the target cache only; the draft cache's blocks leak."""

    mechanism = "close-leaks-draft-blocks"

    def close(self, handle: _Handle) -> None:
        handle.state.draft_cache = type(handle.state.draft_cache)(self.pool, self.draft)  # forgets, never frees
        super().close(handle)


class _PublishDecoder(ProbedDecoder):
    def propose(self, state, *args):
        result = super().propose(state, *args)
        state.draft_cache.commit()  # marks the drafts committed: their full blocks go to the prefix cache
        return result


class PublishesProvisional(ReferenceWhiteBox):
    """Draft entries are committed (published to the prefix cache) before verification (seed: contract 6)."""

    mechanism = "provisional-kv-published"
    decoder_class = _PublishDecoder


# ----------------------------------------------------------------------------------------- stream, resume


class StreamRepeatsToken(ReferenceWhiteBox):
    """Each round re-emits the previous round's last token (the token fed first to the next verification)."""

    mechanism = "token-streamed-twice"

    def step(self, handle: _Handle, **kwargs) -> RoundReport:
        before = handle.state.generated
        report = super().step(handle, **kwargs)
        return replace(report, emitted=before[-1:] + report.emitted) if report.emitted else report


class ResumeReemits(ReferenceWhiteBox):
    """A resumed request's stream cursor restarts at 0: the committed tokens are streamed again."""

    mechanism = "resume-restreams-committed"

    def open(self, request: Request, seed: int, *, committed: tuple[int, ...] = ()) -> _Handle:
        handle = super().open(request, seed, committed=committed)
        handle.state.cursor = 0
        return handle


class ResumeDropsPenalties(ReferenceWhiteBox):
    """A resumed request recomputes its caches but starts its penalty history afresh (counts and seen reset)."""

    mechanism = "resume-drops-penalty-history"

    def open(self, request: Request, seed: int, *, committed: tuple[int, ...] = ()) -> _Handle:
        handle = super().open(request, seed, committed=committed)
        history = handle.state.history
        handle.state.history = replace(history, counts=(0,) * len(history.counts), seen=frozenset(request.prompt))
        return handle


class StallsOnce(ReferenceWhiteBox):
    """The first round of every request does nothing (commits nothing, does not finish)."""

    mechanism = "round-commits-nothing"

    def step(self, handle: _Handle, **kwargs) -> RoundReport:
        if not getattr(handle, "stalled", False):
            handle.stalled = True
            return RoundReport(emitted=(), drafted=0, accepted=0)
        return super().step(handle, **kwargs)


# ----------------------------------------------------------------------------------------- solo (RNG)


class BatchDependentRng(ReferenceWhiteBox):
    """RNG keyed by the batch: the seed is mixed with the number of requests running (vLLM #9441 family)."""

    mechanism = "rng-keyed-by-batch"

    def open(self, request: Request, seed: int, *, committed: tuple[int, ...] = ()) -> _Handle:
        return super().open(request, seed ^ len(self.handles), committed=committed)


class _OffsetDecoder(ProbedDecoder):
    offsets: dict

    def snapshot(self, state):
        branch = super().snapshot(state)
        shift = self.offsets.get(id(state), 0)
        if shift:  # draws from later positions: the keyed RNG consumed once more per failed round
            branch.uniforms = {p: np.roll(u, -shift) for p, u in branch.uniforms.items()}
        return branch


class RngAdvancesOnFault(ReferenceWhiteBox):
    """A failed round consumes RNG: the retry draws other uniforms than an uninterrupted run would."""

    mechanism = "rng-consumed-by-failed-round"
    decoder_class = _OffsetDecoder

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.decoder.offsets = {}

    def _abort(self, state, before):
        self.decoder.offsets[id(state)] = self.decoder.offsets.get(id(state), 0) + 1
        super()._abort(state, before)


class ResumeReseeds(ReferenceWhiteBox):
    """A resumed request draws with another seed than the one it started with (seed: fixed-seed replay)."""

    mechanism = "seed-changed-on-resume"

    def open(self, request: Request, seed: int, *, committed: tuple[int, ...] = ()) -> _Handle:
        return super().open(request, seed + 1 if committed else seed, committed=committed)


# ----------------------------------------------------------------------------------------- law


class _StaleQDecoder(ProbedDecoder):
    def accept(self, state, branch, target_probs):
        kv = state.draft_cache.kv
        for k in range(len(branch.drafts)):  # q recomputed with the draft version current *now*
            logits = self.draft.current.head(kv[state.position + k : state.position + k + 1])
            branch.draft_rows[k] = state.rules.law(logits, branch.before(k))[0]
        return super().accept(state, branch, target_probs)


class StaleDraftQ(ReferenceWhiteBox):
    """Acceptance recomputes q with the draft version current at verification, not the one that drafted (seed:
    draft version switch; like TensorRT-LLM #12588, the ratio divides by a law that did not produce the token)."""

    mechanism = "draft-q-from-current-version"
    decoder_class = _StaleQDecoder


# ----------------------------------------------------------------------------------------- black box (batch)


class _BatchRewrite:
    """Wraps a black-box decoder; ``rewrite(requests)`` changes the requests it passes on (seeds only)."""

    def __init__(self, decoder, *, entropy: int = 0):
        self.decoder, self.rng = decoder, np.random.default_rng(entropy)
        self.capabilities = getattr(decoder, "capabilities", None)

    def __call__(self, requests):
        return self.decoder(self.rewrite(list(requests)))


class SharedUnseededStream(_BatchRewrite):
    """Unseeded requests of one call share one RNG stream (TensorRT-LLM #19487): identical ones coincide."""

    mechanism = "unseeded-requests-share-rng"

    def rewrite(self, requests: list[Request]) -> list[Request]:
        shared = int(self.rng.integers(0, 2**62))
        return [replace(r, seed=shared) if r.seed is None else r for r in requests]


class SeedByBatchIndex(_BatchRewrite):
    """A request's seed is mixed with its batch index (vLLM #9441 family): its output depends on its neighbours."""

    mechanism = "rng-keyed-by-batch"

    def rewrite(self, requests: list[Request]) -> list[Request]:
        return [r if r.seed is None else replace(r, seed=r.seed ^ i) for i, r in enumerate(requests)]


MUTANTS = {
    "PenaltyKeepsRejected": "round_state",
    "StopNotRolledBack": "round_state",
    "GrammarNotRolledBack": "round_state",
    "TargetKVNotCropped": "round_state",
    "NoAbort": "failed_round",
    "AbortLeaksBlock": "blocks",
    "CloseKeepsDraftCache": "blocks",
    "PublishesProvisional": "isolation",
    "StreamRepeatsToken": "stream",
    "ResumeReemits": "resume",
    "ResumeDropsPenalties": "resume",
    "StallsOnce": "progress",
    "BatchDependentRng": "solo",
    "RngAdvancesOnFault": "solo",
    "ResumeReseeds": "solo",
    "StaleDraftQ": "law",
}
#: black-box wrappers (``Wrapper(decoder)``) and the check that catches each
BATCH_MUTANTS = {"SharedUnseededStream": "law", "SeedByBatchIndex": "batch"}
