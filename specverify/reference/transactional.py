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

from dataclasses import dataclass, field, fields, replace
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.params import PROCESSOR_FIELDS
from specverify.protocol import Completion, Request, SampleCounts
from specverify.reference.paged import BlockPool, PagedCache
from specverify.reference.stops import stop_tables
from specverify.sampling import (Purpose, grammar_mask, keyed_uniforms, next_token_probs, process_logits,
                                 residual_probs, sample_from_uniforms)

__all__ = ["TransactionalDecoder", "RequestState", "History", "StateView"]


@dataclass(frozen=True)
class History:
    """What logit processors and finishing rules read after some generated tokens (committed or provisional)."""

    generated: tuple[int, ...]
    seen: frozenset[int]  # prompt + generated: repetition penalty
    counts: tuple[int, ...]  # occurrences among generated, per token id: frequency / presence penalties
    grammar_state: object
    stop_state: int  # state of the stop-string DFA (stops.stop_tables); 0 without stop strings
    finish_reason: Optional[str] = None


@dataclass(frozen=True)
class StateView:
    """The comparable part of a ``RequestState``: KV contents read through block tables, never block ids."""

    generated: tuple[int, ...]
    position: int
    target_kv: tuple[tuple[int, int], ...]
    draft_kv: tuple[tuple[int, int], ...]
    rng_position: int
    seen: frozenset[int]
    counts: tuple[int, ...]
    grammar_state: object
    stop_state: int
    stream_cursor: int
    finish_reason: Optional[str]

    def diff(self, other: "StateView") -> list[str]:
        """Names of the components that differ."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


class _Rules:
    """One request's processors and finishing rules: the law of a ``History`` and the ``History`` after a token.

    The law is a pure function of the logits row read from a cache and the ``History``, so it is memoised (per
    decoder call; draws of one request revisit the same prefixes): a stale cache entry changes the logits, hence
    the key, and is never masked by the memo."""

    def __init__(self, vocab, params):
        self.vocab, self.params = vocab, params
        self.stops = stop_tables(vocab.strings, params.stop) if params.stop else None
        self._laws: dict = {}

    def start(self, prompt) -> History:
        grammar = self.params.grammar
        return History(generated=(), seen=frozenset(prompt), counts=(0,) * self.vocab.size,
                       grammar_state=grammar.initial_state if grammar is not None else None, stop_state=0)

    def advance(self, history: History, token: int) -> History:
        params, n = self.params, len(history.generated) + 1
        counts = list(history.counts)
        counts[token] += 1
        grammar_state = history.grammar_state
        if params.grammar is not None and token != self.vocab.eos_token_id:  # EOS ends a grammar request
            grammar_state = params.grammar.advance(grammar_state, token)
        stop_state, stop_hit = history.stop_state, False
        if self.stops is not None:
            stop_hit = bool(self.stops.hit[stop_state, token])
            stop_state = int(self.stops.next_state[stop_state, token])
            stop_hit &= not (params.stop_after_min_tokens and n < params.min_tokens)
        if token == self.vocab.eos_token_id and not params.ignore_eos:
            reason = "eos"
        else:
            reason = "stop" if stop_hit else "length" if n >= params.max_tokens else None
        return History(generated=history.generated + (token,), seen=history.seen | {token}, counts=tuple(counts),
                       grammar_state=grammar_state, stop_state=stop_state, finish_reason=reason)

    def law(self, logits, history: History) -> torch.Tensor:  # [1, V] -> [1, V]
        key = (logits.numpy().tobytes(), history)
        if key not in self._laws:
            self._laws[key] = self._process(logits, history)
        return self._laws[key]

    def _process(self, logits, history: History) -> torch.Tensor:  # [1, V] -> [1, V]
        params, size, eos = self.params, self.vocab.size, self.vocab.eos_token_id
        seen = counts = allowed = None  # None where the processor is off: same law, fewer tensors
        if params.repetition_penalty != 1.0:
            seen = torch.zeros((1, size), dtype=torch.bool)
            seen[0, list(history.seen)] = True
        if params.frequency_penalty or params.presence_penalty:
            counts = torch.tensor([history.counts], dtype=torch.float64)
        if params.grammar is not None:
            allowed = grammar_mask(params.grammar, [history.grammar_state], size, eos)
        return process_logits(logits, params, seen=seen, counts=counts, allowed=allowed, eos_token_id=eos,
                              num_generated=torch.tensor([len(history.generated)], dtype=torch.int64))


@dataclass(eq=False)
class RequestState:
    """Everything a request carries between rounds. ``history`` is committed; caches hold the committed tokens
    except the last (``position`` entries); ``stream`` holds the chunks emitted, ``cursor`` how many tokens."""

    request: Request
    seed: int
    draws: dict = field(repr=False)  # purpose -> keyed uniforms float64 [max_tokens + γ], by generated position
    rules: _Rules = field(repr=False)
    history: History
    target_cache: PagedCache = field(repr=False)
    draft_cache: PagedCache = field(repr=False)
    stream: list = field(default_factory=list)
    cursor: int = 0
    accepted: list = field(default_factory=list)  # accepted drafts per round
    drafted: list = field(default_factory=list)  # drafts proposed per round

    @property
    def generated(self) -> tuple[int, ...]:
        return self.history.generated

    @property
    def finish_reason(self) -> Optional[str]:
        return self.history.finish_reason

    @property
    def position(self) -> int:
        """Position id of the token fed first next round (the last committed one) = entries each cache holds."""
        return len(self.request.prompt) + len(self.generated) - 1

    @property
    def rng_position(self) -> int:
        """Generated position of the next token's keyed draws: the number of committed tokens."""
        return len(self.generated)

    @property
    def last_token(self) -> int:
        return self.generated[-1] if self.generated else self.request.prompt[-1]

    def view(self) -> StateView:
        h = self.history
        return StateView(generated=h.generated, position=self.position, target_kv=self.target_cache.entries(),
                         draft_kv=self.draft_cache.entries(), rng_position=self.rng_position, seen=h.seen,
                         counts=h.counts, grammar_state=h.grammar_state, stop_state=h.stop_state,
                         stream_cursor=self.cursor, finish_reason=h.finish_reason)


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
        return torch.from_numpy(self.uniforms[purpose][k:k + 1])


class TransactionalDecoder:
    """Readable per-request chain speculative decoder over a shared paged KV pool; follows DESIGN.md's protocol.

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

    def __init__(self, target, draft, *, block_size: int = 4, num_blocks: int = 1024, entropy=None,
                 on_round: Optional[Callable[[RequestState], None]] = None):
        check(target.vocab == draft.vocab, f"draft.vocab={draft.vocab!r} differs from target.vocab="
              f"{target.vocab!r}: speculative sampling needs one token space. Use a draft over the same vocab.")
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
        return [self.decode(r, int(f) if r.seed is None else r.seed, rules=rules.setdefault(r.params, self._rules(r)))
                for r, f in zip(requests, fresh)]

    def sample(self, request: Request, n: int) -> SampleCounts:
        """Counts of distinct outcomes over ``n`` independent draws, and of the accepted drafts in each draw's first
        round (seeds derived as in ``VectorizedDecoder.sample``)."""
        self._validate(request, "request")
        check(isinstance(n, int) and not isinstance(n, bool) and n >= 1, f"n={n!r} must be an int >= 1.")
        if request.seed is None:
            seeds = self._rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)
        else:
            seeds = (keyed_uniforms(request.seed, np.arange(n), Purpose.REQUEST) * 2.0**63).astype(np.uint64)
        outcomes, accepted, rules = {}, {}, self._rules(request)
        draws = _keyed_draws(seeds, request)
        for i, seed in enumerate(seeds.tolist()):
            completion = self.decode(request, seed, rules=rules, draws={p: d[i] for p, d in draws.items()})
            key = (completion.tokens, completion.finish_reason)
            outcomes[key] = outcomes.get(key, 0) + 1
            first = completion.accepted[0]  # the protocol reports the first round's accepted count per draw
            accepted[first] = accepted.get(first, 0) + 1
        return SampleCounts(outcomes=outcomes, accepted=accepted)

    def decode(self, request: Request, seed: int, *, rules: Optional[_Rules] = None, draws=None) -> Completion:
        """Run one (validated) request to completion with the given 63-bit seed."""
        state = self.start(request, seed, rules=rules, draws=draws)
        try:
            while state.finish_reason is None:
                self.round(state)
        finally:
            state.target_cache.free()
            state.draft_cache.free()
        return Completion(tokens=state.generated, finish_reason=state.finish_reason, stream=tuple(state.stream),
                          accepted=tuple(state.accepted))

    def start(self, request: Request, seed: int, *, rules: Optional[_Rules] = None, draws=None) -> RequestState:
        rules = rules if rules is not None else self._rules(request)
        if draws is None:
            draws = {p: d[0] for p, d in _keyed_draws(np.asarray([seed], dtype=np.uint64), request).items()}
        state = RequestState(request=request, seed=seed, draws=draws, rules=rules, history=rules.start(request.prompt),
                             target_cache=PagedCache(self.pool, self.target),
                             draft_cache=PagedCache(self.pool, self.draft))
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
        return [state.rules.law(logits[k:k + 1], branch.before(k))[0] for k in range(len(branch.drafts) + 1)]

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
                cache.prefill(sequence[len(cache):keep])

    def emit(self, state: RequestState) -> None:
        """Stream each committed token exactly once."""
        chunk = state.generated[state.cursor:]
        if chunk:
            state.stream.append(chunk)
        state.cursor = len(state.generated)

    # ------------------------------------------------------------------------------------------- from scratch
    def rebuild_state(self, request: Request, committed_tokens: Sequence[int], *, no_token: bool = False
                      ) -> RequestState:
        """The state a round must leave after committing ``committed_tokens``, built from scratch: fresh caches
        in a private pool fed the tokens, penalty / grammar / stop state recomputed from the token list and text.
        ``no_token=True`` claims the request ended with ``no_token``; that is checked against the target."""
        self._validate(request, "request")
        tokens = tuple(int(t) for t in committed_tokens)
        self.vocab.check_tokens(tokens, "committed_tokens")
        history = _history_from_scratch(self.vocab, request, tokens)
        if no_token:
            self._check_no_token(request, history)
            history = replace(history, finish_reason="no_token")
        state = RequestState(request=request, seed=request.seed or 0, draws={}, rules=self._rules(request),
                             history=history, cursor=len(tokens), stream=[tokens] if tokens else [],
                             target_cache=None, draft_cache=None)
        pool = BlockPool(2 * max(1, state.position), 1)
        state.target_cache, state.draft_cache = PagedCache(pool, self.target), PagedCache(pool, self.draft)
        if state.position:
            for cache in (state.target_cache, state.draft_cache):
                cache.prefill((request.prompt + tokens)[: state.position])
        return state

    def _check_no_token(self, request: Request, history: History) -> None:
        check(history.finish_reason is None, f"no_token=True but the tokens already finished with "
              f"{history.finish_reason!r}: a request ends once. Pass no_token=False.")
        logits = self.target.logits([request.prompt + history.generated])
        probs = next_token_probs(logits, request.params, prompt=request.prompt, generated=history.generated,
                                 eos_token_id=self.vocab.eos_token_id)
        check(float(probs.sum()) <= 0, f"no_token=True but the target's next-token law after "
              f"{history.generated!r} has positive mass: no_token only ends a request whose next row is all masked.")

    def _rules(self, request: Request) -> _Rules:
        return _Rules(self.vocab, request.params)

    def _validate(self, request: Request, name: str) -> None:
        check(isinstance(request, Request), f"{name}={request!r} must be a specverify Request.")
        self.vocab.check_tokens(request.prompt, f"{name}.prompt")
        params, size = request.params, self.vocab.size
        if params.grammar is not None and hasattr(params.grammar, "tables"):
            params.grammar.tables(size, self.vocab.eos_token_id)  # raises on tokens outside the vocabulary
        need = 2 * -(-(len(request.prompt) + params.max_tokens) // self.pool.block_size)
        check(need <= self.pool.num_blocks,
              f"num_blocks={self.pool.num_blocks!r} is too small for {name} (prompt of {len(request.prompt)} "
              f"tokens, max_tokens={params.max_tokens!r}): its two caches may need {need} blocks of "
              f"block_size={self.pool.block_size!r}. Raise num_blocks or block_size.")


def _keyed_draws(seeds: np.ndarray, request: Request) -> dict:  # uint64 [m] -> purpose -> [m, max_tokens + γ]
    """Every keyed uniform a request can use: rounds start at generated position <= max_tokens - 1 and reach γ on."""
    positions = np.arange(request.params.max_tokens + request.num_draft_tokens)
    return {p: keyed_uniforms(seeds[:, None], positions[None, :], p) for p in (Purpose.DRAFT, Purpose.ACCEPT,
                                                                              Purpose.TARGET)}


def _history_from_scratch(vocab, request: Request, tokens: tuple[int, ...]) -> History:
    params, prompt = request.params, request.prompt
    finish_reason = _finish_from_scratch(vocab, params, tokens)  # first: it rejects tokens after a finish
    grammar_state = params.grammar.initial_state if params.grammar is not None else None
    for token in tokens:
        if params.grammar is not None and token != vocab.eos_token_id:
            grammar_state = params.grammar.advance(grammar_state, token)
    stop_state = 0
    if params.stop:  # the longest suffix of the text that begins some stop string
        prefixes = stop_tables(vocab.strings, params.stop).prefixes
        text = vocab.text(tokens)
        stop_state = max((i for i, p in enumerate(prefixes) if text.endswith(p)), key=lambda i: len(prefixes[i]))
    return History(generated=tokens, seen=frozenset(prompt + tokens),
                   counts=tuple(tokens.count(t) for t in range(vocab.size)), grammar_state=grammar_state,
                   stop_state=stop_state, finish_reason=finish_reason)


def _finish_from_scratch(vocab, params, tokens: tuple[int, ...]) -> Optional[str]:
    """The finish reason after ``tokens`` by searching the text naively; tokens after a finishing one are invalid."""
    text, reason = "", None
    for i, token in enumerate(tokens):
        if reason is not None:
            raise InvalidArgument(f"committed_tokens={tokens!r} continue after the request finished ({reason!r} at "
                                  f"index {i - 1}). Pass the tokens up to and including the finishing one.")
        before, text = text, text + vocab.strings[token]
        stop_on = params.stop and not (params.stop_after_min_tokens and i + 1 < params.min_tokens)
        if token == vocab.eos_token_id and not params.ignore_eos:
            reason = "eos"
        elif stop_on and any(text.find(s, max(0, len(before) - len(s) + 1)) != -1 for s in params.stop):
            reason = "stop"
        elif i + 1 >= params.max_tokens:
            reason = "length"
    return reason
