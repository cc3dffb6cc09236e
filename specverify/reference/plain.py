"""Plain autoregressive target sampling (no speculation): the independent reference path.

Vectorized over identical requests, it rebuilds penalty, grammar and stop state from the generated tokens at every
step (naively) rather than keeping the speculative decoder's incremental state.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.errors import check
from specverify.protocol import Completion, Request, SampleCounts
from specverify.reference.vectorized import REASONS, GroupResult, _count_outcomes
from specverify.sampling import Purpose, grammar_mask, keyed_uniforms, process_logits, sample_from_uniforms

__all__ = ["decode_plain", "sample_plain"]


def _finish(vocab, params, text_before, text_after, tok, n):
    if tok == vocab.eos_token_id and not params.ignore_eos:
        return 1
    if params.stop and not (params.stop_after_min_tokens and n < params.min_tokens):
        if any(text_after.find(s, max(0, len(text_before) - len(s) + 1)) != -1 for s in params.stop):
            return 2
    return 3 if n >= params.max_tokens else 0


def _plain_group(target, prompt, params, seeds) -> GroupResult:
    vocab, b = target.vocab, len(seeds)
    out = np.zeros((b, params.max_tokens), dtype=np.int64)
    n_gen = np.zeros(b, dtype=np.int64)
    reason = np.zeros(b, dtype=np.int64)
    texts = [""] * b
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
        probs = process_logits(logits, params, seen=seen, counts=counts, num_generated=step, allowed=allowed,
                               eos_token_id=vocab.eos_token_id)
        tok = sample_from_uniforms(probs, torch.from_numpy(keyed_uniforms(seeds[rows], step, Purpose.PLAIN))).numpy()
        for r, t in zip(rows.tolist(), tok.tolist()):
            if t < 0:
                reason[r] = 4
                continue
            out[r, step], n_gen[r] = t, step + 1
            before, texts[r] = texts[r], texts[r] + vocab.strings[t]
            reason[r] = _finish(vocab, params, before, texts[r], t, step + 1)
            if params.grammar is not None and reason[r] == 0:
                states[r] = params.grammar.advance(states[r], t)
        rows = rows[reason[rows] == 0]
        if rows.size == 0:
            break
        logits = cache.forward(rows, out[rows, step][:, None])[:, 0]
    none = np.zeros((b, 0), dtype=np.int64)
    return GroupResult(tokens=out, lengths=n_gen, reasons=reason, accepted=none, chunk_sizes=none)


def _seeds(seeds, rng):
    fresh = rng.integers(0, 2**63, size=len(seeds), dtype=np.int64).astype(np.uint64)
    return np.array([f if s is None else s for s, f in zip(seeds, fresh)], dtype=np.uint64)


def decode_plain(target, requests, *, entropy=None):
    """Plain target sampling of each request (``num_draft_tokens`` is ignored). Returns ``Completion``s."""
    requests = list(requests)
    for i, req in enumerate(requests):
        check(isinstance(req, Request), f"requests[{i}]={req!r} must be a specverify Request.")
        target.vocab.check_tokens(req.prompt, f"requests[{i}].prompt")
    seeds = _seeds([r.seed for r in requests], np.random.default_rng(entropy))
    completions = []
    for i, req in enumerate(requests):
        res = _plain_group(target, req.prompt, req.params, seeds[i:i + 1])
        n = int(res.lengths[0])
        tokens = tuple(int(t) for t in res.tokens[0, :n])
        completions.append(Completion(tokens=tokens, finish_reason=REASONS[int(res.reasons[0])], stream=(tokens,)))
    return completions


def sample_plain(target, request: Request, n: int, *, entropy=None) -> SampleCounts:
    """Counts of distinct outcomes over ``n`` independent plain draws of ``request``."""
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
    check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
    target.vocab.check_tokens(request.prompt, "request.prompt")
    if request.seed is None:
        seeds = _seeds([None] * n, np.random.default_rng(entropy))
    else:
        seeds = (keyed_uniforms(request.seed, np.arange(n), Purpose.REQUEST) * 2.0**63).astype(np.uint64)
    res = _plain_group(target, request.prompt, request.params, seeds)
    return SampleCounts(outcomes=_count_outcomes(res, target.vocab.size))
