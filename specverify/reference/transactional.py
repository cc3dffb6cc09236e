"""The transactional reference decoder: one request at a time, every round an explicit transaction.

A round (seed, 状态事务): snapshot the committed ``History`` -> draft a provisional branch (a ``History`` per draft,
never touching the committed one) -> verify with one target call -> commit the accepted prefix plus one recovered or
bonus token by adopting the branch's ``History`` -> discard the rejected suffix (crop both paged caches to the
committed tokens minus the last, which the next round feeds first) -> emit the new tokens once.

It draws the same keyed uniforms and calls the same ``sampling`` functions as ``VectorizedDecoder``, so seeded
requests agree token for token; ``rebuild_state`` builds the state a round must leave from the committed tokens
alone, from scratch, so tests can compare after every round (``on_round``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from specverify.errors import check
from specverify.params import PROCESSOR_FIELDS
from specverify.protocol import Completion, Request, SampleCounts
from specverify.reference.history import History, RequestState, Rules, StateView
from specverify.reference.paged import BlockPool, PagedCache
from specverify.sampling import Purpose, draw_seeds, keyed_uniforms, residual_probs, sample_from_uniforms

__all__ = ["TransactionalDecoder", "RequestState", "History", "StateView"]


@dataclass
class _Branch:
    """The provisional draft branch of one round: drafts, the draft law each came from, the history after each."""

    start: History  # the committed snapshot
    uniforms: dict  # purpose -> keyed draws float64 [γ + 1] for generated positions start .. start + γ
    drafts: list = field(default_factory=list)
    draft_rows: list = field(default_factory=list)
    histories: list = field(default_factory=list)

    def before(self, k: int) -> History:
        return self.histories[k - 1] if k else self.start

    def uniform(self, k: int, purpose: int) -> torch.Tensor:  # -> [1]
        return torch.from_numpy(self.uniforms[purpose][k : k + 1])


class TransactionalDecoder:
    """Readable per-request chain speculative decoder over a shared paged KV pool (protocol: docs/adapters.md).

    Parameters
    ----------
    target, draft : ToyModel
        Models sharing one vocabulary.
    block_size, num_blocks : int
        Shape of the ``BlockPool`` both models' caches share (prefix blocks are shared across requests).
    entropy : optional
        Seeds the generator of fresh 63-bit seeds for unseeded requests.
    on_round : callable, optional
        Called with the ``RequestState`` after every round (after commit, rollback and emit; before a finished
        request's blocks are released).

    Examples
    --------
    >>> from specverify.oracles import make_vocab, random_target, draft_near
    >>> from specverify.params import SamplingParams
    >>> t = random_target(make_vocab(5), seed=3, eos_bias=-1.0)
    >>> dec = TransactionalDecoder(t, draft_near(t, distance=0.6, seed=7))
    >>> [c] = dec([Request((0,), SamplingParams(max_tokens=3), num_draft_tokens=2, seed=1)])
    >>> len(c.tokens) <= 3 and sum(map(len, c.stream)) == len(c.tokens)
    True
    """

    capabilities = frozenset(PROCESSOR_FIELDS) | {"batch", "seed", "stream", "accepted"}

    def __init__(
        self,
        target,
        draft,
        *,
        block_size: int = 4,
        num_blocks: int = 1024,
        entropy=None,
        on_round: Optional[Callable[[RequestState], None]] = None,
    ):
        check(
            target.vocab == draft.vocab,
            f"draft.vocab={draft.vocab!r} differs from target.vocab="
            f"{target.vocab!r}: speculative sampling needs one token space. Use a draft over the same vocab.",
        )
        check(on_round is None or callable(on_round), f"on_round={on_round!r} must be callable or None.")
        self.target, self.draft, self.vocab = target, draft, target.vocab
        self.pool = BlockPool(num_blocks, block_size)
        self.on_round = on_round
        self._rng = np.random.default_rng(entropy)

    # ------------------------------------------------------------------------------------------- protocol
    def __call__(self, requests: Sequence[Request]) -> list[Completion]:
        requests = list(requests)
        for i, request in enumerate(requests):
            self._validate(request, f"requests[{i}]")
        fresh = self._rng.integers(0, 2**63, size=len(requests), dtype=np.int64)
        rules: dict = {}
        return [
            self.decode(r, int(f) if r.seed is None else r.seed, rules=rules.setdefault(r.params, self._rules(r)))
            for r, f in zip(requests, fresh)
        ]

    def sample(self, request: Request, n: int, start: int = 0) -> SampleCounts:
        """Counts of distinct outcomes over ``n`` independent draws (draws ``start`` .. of a seeded request's
        stream), and of the accepted drafts in each draw's first round (seeds as in ``VectorizedDecoder.sample``)."""
        self._validate(request, "request")
        check(isinstance(n, int) and not isinstance(n, bool) and n >= 1, f"n={n!r} must be an int >= 1.")
        if request.seed is None:
            seeds = self._rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)
        else:
            seeds = draw_seeds(request.seed, n, start)
        outcomes, accepted, rules = {}, {}, self._rules(request)
        draws = _keyed_draws(seeds, request)
        for i, seed in enumerate(seeds.tolist()):
            completion = self.decode(request, seed, rules=rules, draws={p: d[i] for p, d in draws.items()})
            key = (completion.tokens, completion.finish_reason)
            outcomes[key] = outcomes.get(key, 0) + 1
            first = completion.accepted[0]  # the protocol reports the first round's accepted count per draw
            accepted[first] = accepted.get(first, 0) + 1
        return SampleCounts(outcomes=outcomes, accepted=accepted)

    def decode(self, request: Request, seed: int, *, rules: Optional[Rules] = None, draws=None) -> Completion:
        """Run one (validated) request to completion with the given 63-bit seed."""
        state = self.start(request, seed, rules=rules, draws=draws)
        try:
            while state.finish_reason is None:
                self.round(state)
        finally:
            state.target_cache.free()
            state.draft_cache.free()
        return Completion(
            tokens=state.generated,
            finish_reason=state.finish_reason,
            stream=tuple(state.stream),
            accepted=tuple(state.accepted),
        )

    def start(self, request: Request, seed: int, *, rules: Optional[Rules] = None, draws=None) -> RequestState:
        rules = rules if rules is not None else self._rules(request)
        if draws is None:
            draws = {p: d[0] for p, d in _keyed_draws(np.asarray([seed], dtype=np.uint64), request).items()}
        state = RequestState(
            request=request,
            seed=seed,
            draws=draws,
            rules=rules,
            history=rules.start(request.prompt),
            target_cache=PagedCache(self.pool, self.target),
            draft_cache=PagedCache(self.pool, self.draft),
        )
        try:
            self.discard(state)  # fills both caches with the prompt minus its last token
        except BaseException:
            state.target_cache.free()
            state.draft_cache.free()
            raise
        return state

    # ------------------------------------------------------------------------------------------- one round
    def round(self, state: RequestState) -> None:
        """snapshot -> provisional branch -> verify -> commit accepted prefix + one token -> discard -> emit.

        Anything raised inside the round (out of blocks, a failing draft, cancellation) aborts it: the committed
        history, stream and counters go back to the snapshot and both caches are cropped to it, freeing every
        provisional block; then the exception propagates."""
        before = (state.history, len(state.stream), state.cursor, len(state.accepted), len(state.drafted))
        try:
            branch = self.snapshot(state)  # nothing committed changes before commit below
            self.propose(state, branch)
            target_probs = self.verify(state, branch)
            history, accepted = self.accept(state, branch, target_probs)
            state.history = history  # commit: adopt the branch's history up to the committed token
            state.accepted.append(accepted)
            state.drafted.append(len(branch.drafts))
            self.discard(state)
            self.emit(state)
        except BaseException:
            self.abort(state, before)
            raise
        if self.on_round is not None:
            self.on_round(state)

    def abort(self, state: RequestState, before) -> None:
        """Put a failed round back to ``before`` (history, stream length, cursor, counters); crop the caches."""
        state.history, stream_len, state.cursor, accepted_len, drafted_len = before
        del state.stream[stream_len:], state.accepted[accepted_len:], state.drafted[drafted_len:]
        self.discard(state)  # caches only shrink back to the snapshot here: no allocation can fail

    def snapshot(self, state: RequestState) -> _Branch:
        """Open the round's branch on the committed history, with the keyed draws of its positions."""
        span = slice(state.rng_position, state.rng_position + state.request.num_draft_tokens + 1)
        return _Branch(start=state.history, uniforms={p: draws[span] for p, draws in state.draws.items()})

    def propose(self, state: RequestState, branch: _Branch) -> None:
        """Draft up to γ tokens from the draft's processed law, each on a provisional ``History``. Drafting stops
        after a draft that would finish the request (nothing after it can be committed) and where the draft row
        has no mass (that position then gets a plain target draw)."""
        feed = state.last_token
        for k in range(state.request.num_draft_tokens):
            history = branch.before(k)
            if history.finish_reason is not None:
                break
            draft_probs = state.rules.law(state.draft_cache.forward([feed]), history)  # [1, V]
            token = int(sample_from_uniforms(draft_probs, branch.uniform(k, Purpose.DRAFT))[0])
            if token < 0:
                break
            branch.drafts.append(token)
            branch.draft_rows.append(draft_probs[0])
            branch.histories.append(state.rules.advance(history, token))
            feed = token

    def verify(self, state: RequestState, branch: _Branch) -> list[torch.Tensor]:  # -> d + 1 rows [V]
        """One target call over [last, x_0 .. x_{d-1}]; row k's processors see the drafts before it."""
        logits = state.target_cache.forward([state.last_token] + branch.drafts)  # [d + 1, V]
        # row by row: on a busy CPU a multi-row op can cost a thread-pool wake-up (ms); one row never does
        return [state.rules.law(logits[k : k + 1], branch.before(k))[0] for k in range(len(branch.drafts) + 1)]

    def accept(self, state: RequestState, branch: _Branch, target_probs) -> tuple[History, int]:
        """Walk the branch: accept x_k iff u·q(x_k) < p(x_k); on rejection commit a recovered token, after the
        last draft a bonus token; stop where a token finishes the request or a target row has no mass."""
        history = branch.start
        for k, target_row in enumerate(target_probs):
            if float(target_row.sum()) <= 0:
                return replace(history, finish_reason="no_token"), k
            u_target = branch.uniform(k, Purpose.TARGET)
            if k == len(branch.drafts):
                token = sample_from_uniforms(target_row[None], u_target)
                return state.rules.advance(history, int(token[0])), k
            x, draft_row = branch.drafts[k], branch.draft_rows[k]
            u_accept = float(branch.uniform(k, Purpose.ACCEPT)[0])
            if u_accept * float(draft_row[x]) < float(target_row[x]):
                history = branch.histories[k]
                if history.finish_reason is not None:
                    return history, k + 1
                continue
            token = sample_from_uniforms(residual_probs(target_row, draft_row)[None], u_target)
            return state.rules.advance(history, int(token[0])), k
        raise AssertionError("unreachable: the last target row always commits a token")

    def discard(self, state: RequestState) -> None:
        """Roll both caches back to the committed tokens except the last; append committed tokens a cache lacks
        (the last accepted draft after full acceptance, the prompt at the start)."""
        sequence = state.request.prompt + state.generated
        keep = state.position
        for cache in (state.target_cache, state.draft_cache):
            cache.crop(min(len(cache), keep))
            cache.commit()
            if len(cache) < keep:
                cache.prefill(sequence[len(cache) : keep])

    def emit(self, state: RequestState) -> None:
        """Stream each committed token exactly once."""
        chunk = state.generated[state.cursor :]
        if chunk:
            state.stream.append(chunk)
        state.cursor = len(state.generated)

    def _rules(self, request: Request) -> Rules:
        return Rules(self.vocab, request.params)

    def _validate(self, request: Request, name: str) -> None:
        check(isinstance(request, Request), f"{name}={request!r} must be a specverify Request.")
        self.vocab.check_tokens(request.prompt, f"{name}.prompt")
        params, size = request.params, self.vocab.size
        if params.grammar is not None and hasattr(params.grammar, "tables"):
            params.grammar.tables(size, self.vocab.eos_token_id)  # raises on tokens outside the vocabulary
        need = 2 * -(-(len(request.prompt) + params.max_tokens) // self.pool.block_size)
        check(
            need <= self.pool.num_blocks,
            f"num_blocks={self.pool.num_blocks!r} is too small for {name} (prompt of {len(request.prompt)} "
            f"tokens, max_tokens={params.max_tokens!r}): its two caches may need {need} blocks of "
            f"block_size={self.pool.block_size!r}. Raise num_blocks or block_size.",
        )

    def rebuild_state(
        self, request: Request, committed_tokens: Sequence[int], *, no_token: bool = False
    ) -> RequestState:
        """The state a round must leave after committing ``committed_tokens``, built from scratch: fresh caches
        in a private pool fed the tokens, penalty / grammar / stop state recomputed from the token list and text.
        ``no_token=True`` claims the request ended with ``no_token``; that is checked against the target."""
        from specverify.reference.rebuild import rebuild_state

        return rebuild_state(self, request, committed_tokens, no_token=no_token)


def _keyed_draws(seeds: np.ndarray, request: Request) -> dict:  # uint64 [m] -> purpose -> [m, max_tokens + γ]
    """Every keyed uniform a request can use: rounds start at generated position <= max_tokens - 1 and reach γ on."""
    positions = np.arange(request.params.max_tokens + request.num_draft_tokens)
    return {
        p: keyed_uniforms(seeds[:, None], positions[None, :], p)
        for p in (Purpose.DRAFT, Purpose.ACCEPT, Purpose.TARGET)
    }
