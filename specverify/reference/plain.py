"""Plain autoregressive target sampling (no speculation): the independent reference path.

Vectorized over identical requests, it rebuilds penalty and grammar state from the generated tokens at every step
rather than keeping the speculative decoder's incremental state; stops and finishing follow the decoders' one
finish rule (``finish.py``).
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.errors import check
from specverify.params import PROCESSOR_FIELDS
from specverify.protocol import Completion, Request, SampleCounts
from specverify.reference.finish import NO_TOKEN, REASONS, finish_codes, stop_step
from specverify.reference.outcomes import GroupResult, count_outcomes
from specverify.reference.stops import stop_tables
from specverify.sampling import Purpose, draw_seeds, grammar_mask, keyed_uniforms, process_logits, sample_from_uniforms

__all__ = ["decode_plain", "sample_plain", "PlainDecoder"]


def _plain_group(target, prompt, params, seeds) -> GroupResult:
    vocab, b = target.vocab, len(seeds)
    out = np.zeros((b, params.max_tokens), dtype=np.int64)
    n_gen = np.zeros(b, dtype=np.int64)
    reason = np.zeros(b, dtype=np.int64)
    stops = stop_tables(vocab.strings, params.stop) if params.stop else None
    stop_states = np.zeros(b, dtype=np.int64)
    states = [params.grammar.initial_state if params.grammar else None] * b
    cache = target.new_batch_cache(b, len(prompt) + params.max_tokens)
    rows = np.arange(b)
    logits = cache.forward(rows, np.tile(np.asarray(prompt, dtype=np.int64), (b, 1)))[:, -1]
    for step in range(params.max_tokens):
        seen = torch.zeros((rows.size, vocab.size), dtype=torch.bool)
        seen[:, list(prompt)] = True
        gen = torch.from_numpy(out[rows, :step])
        seen.scatter_(1, gen, True)
        counts = torch.zeros((rows.size, vocab.size), dtype=torch.float64)
        counts.scatter_add_(1, gen, torch.ones(gen.shape, dtype=torch.float64))
        allowed = None
        if params.grammar is not None:
            allowed = grammar_mask(params.grammar, [states[r] for r in rows], vocab.size, vocab.eos_token_id)
        probs = process_logits(
            logits,
            params,
            seen=seen,
            counts=counts,
            num_generated=step,
            allowed=allowed,
            eos_token_id=vocab.eos_token_id,
            histories=_histories(prompt, out, rows, step) if params.logits_processors else None,
        )
        tok = sample_from_uniforms(probs, torch.from_numpy(keyed_uniforms(seeds[rows], step, Purpose.PLAIN))).numpy()
        dead, rows = rows[tok < 0], rows[tok >= 0]
        reason[dead], tok = NO_TOKEN, tok[tok >= 0]
        out[rows, step], n_gen[rows] = tok, step + 1
        stop_hit, stop_states[rows] = stop_step(stops, stop_states[rows], tok, step + 1, params)
        reason[rows] = finish_codes(tok, stop_hit, step + 1, params, vocab.eos_token_id)
        if params.grammar is not None:
            for r, t in zip(rows.tolist(), tok.tolist()):
                if reason[r] == 0:
                    states[r] = params.grammar.advance(states[r], t)
        rows = rows[reason[rows] == 0]
        if rows.size == 0:
            break
        logits = cache.forward(rows, out[rows, step][:, None])[:, 0]
    none = np.zeros((b, 0), dtype=np.int64)
    return GroupResult(tokens=out, lengths=n_gen, reasons=reason, accepted=none, chunk_sizes=none)


def _histories(prompt, out, rows, step) -> list:  # prompt + generated per row, for logits processors
    return [tuple(prompt) + tuple(out[r, :step].tolist()) for r in rows.tolist()]


def _seeds(seeds, rng):
    fresh = rng.integers(0, 2**63, size=len(seeds), dtype=np.int64).astype(np.uint64)
    return np.array([f if s is None else s for s, f in zip(seeds, fresh)], dtype=np.uint64)


def decode_plain(target: object, requests: list, *, entropy: object = None) -> list[Completion]:
    """Plain target sampling of each request (``num_draft_tokens`` is ignored). Returns ``Completion``s."""
    requests = list(requests)
    for i, req in enumerate(requests):
        check(isinstance(req, Request), f"requests[{i}]={req!r} must be a specverify Request.")
        target.vocab.check_tokens(req.prompt, f"requests[{i}].prompt")
    seeds = _seeds([r.seed for r in requests], np.random.default_rng(entropy))
    completions = []
    for i, req in enumerate(requests):
        res = _plain_group(target, req.prompt, req.params, seeds[i : i + 1])
        n = int(res.lengths[0])
        tokens = tuple(int(t) for t in res.tokens[0, :n])
        completions.append(Completion(tokens=tokens, finish_reason=REASONS[int(res.reasons[0])], stream=(tokens,)))
    return completions


def sample_plain(target, request: Request, n: int, *, entropy=None, start: int = 0) -> SampleCounts:
    """Counts of distinct outcomes over ``n`` independent plain draws of ``request`` (seeded: draws ``start`` ..
    ``start + n - 1`` of its stream)."""
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
    check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
    target.vocab.check_tokens(request.prompt, "request.prompt")
    if request.seed is None:
        seeds = _seeds([None] * n, np.random.default_rng(entropy))
    else:
        seeds = draw_seeds(request.seed, n, start)
    res = _plain_group(target, request.prompt, request.params, seeds)
    return SampleCounts(outcomes=count_outcomes(res, target.vocab.size))


class PlainDecoder:
    """Plain target sampling behind the decoder protocol (speculation off): the control of two-sample mode.

    ``draft`` is ignored. Unseeded requests get fresh seeds from this decoder's generator (``entropy``). It runs a
    recurrent target as it is (``recurrent``): plain sampling only feeds tokens, it never rolls one back."""

    capabilities = frozenset(PROCESSOR_FIELDS) | {"batch", "seed", "stream", "recurrent"}

    def __init__(self, target: object, draft: object = None, *, entropy: object = None):
        self.target = target
        self._rng = np.random.default_rng(entropy)

    def __call__(self, requests: list) -> list[Completion]:
        return decode_plain(self.target, requests, entropy=self._rng)

    def sample(self, request: Request, n: int, start: int = 0) -> SampleCounts:
        return sample_plain(self.target, request, n, entropy=self._rng, start=start)
