"""Zoo entries of the scheduler: decoding before a chunked prefill completes, and rounds that fall back to plain
decoding (a confidence threshold) and resume speculating (issue 45's field reports).

``confidence_fallback`` is the exact control of the fallback axis: a round whose draft is not confident about its
first token drafts nothing, and the round is one plain target draw (docs/design.md: a draft that cannot propose falls
back to a plain target draw); the next round speculates again.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.group_state import _prefill, _rows_by_prompt
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._registry import zoo_entry

__all__ = ["decode_before_chunked_prefill", "confidence_fallback", "stale_seed_after_fallback"]

PREFILL_CHUNK = 8  # prompt tokens per prefill chunk
CONFIDENCE = 0.5  # a round drafts only when the draft's first token has at least this probability


class _EarlyDecode(VectorizedDecoder):
    def _run_group(self, prompt, params, num_draft_tokens, seeds):
        self.prompt_rows = _rows_by_prompt(prompt, len(seeds))
        return super()._run_group(prompt, params, num_draft_tokens, seeds)

    def target_forward(self, st, rows, feed):
        logits = super().target_forward(st, rows, feed)
        if st.rounds > 0:
            return logits
        for prompt, members in self.prompt_rows.items():
            sel = np.flatnonzero(np.isin(rows, members))
            if len(prompt) - 1 <= PREFILL_CHUNK or sel.size == 0:
                continue
            early = self.target.new_batch_cache(sel.size, PREFILL_CHUNK + feed.shape[1])  # only the first chunk
            _prefill(early, np.arange(sel.size), prompt[:PREFILL_CHUNK])
            logits[sel] = early.forward(np.arange(sel.size), feed[sel])
        return logits


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="decode-before-chunked-prefill", showcases=("long_prompt",), tv=0.48)
def decode_before_chunked_prefill(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The first decode step is scheduled after the first prefill chunk (8 tokens), before the prompt's prefill
    completes (model-serving-minefield #36).

    The first round's target rows are computed from the first chunk of the prompt (and the prompt's last token); the
    rest of the prompt reaches the cache afterwards, so later rounds are right. Prompts of at most 9 tokens are exact.

    Verdict: approximate. At temperature 0 the first round's argmaxes come from the wrong context on prompts longer
    than a chunk: greedy output differs — seen only by greedy prompts of 10–30 tokens (``greedy-long-prompts``); a
    matrix whose greedy prompts are 1–5 tokens sees it only through ``long-prompt``'s law, as greedy-only.
    """
    return _EarlyDecode(target, draft, entropy=entropy)


class _ConfidenceFallback(VectorizedDecoder):
    def draft_step(self, st, rows, k, feed):
        logits = super().draft_step(st, rows, k, feed)
        if k == 0:  # the draft's own confidence: its softmax at temperature 1, whatever the request's processors
            self.confidence = torch.softmax(logits, -1).max(-1).values.numpy()
        return logits

    def propose(self, st, rows):
        drafts, draft_probs, draft_len = super().propose(st, rows)
        confident = self.confidence >= CONFIDENCE
        self.fell_back = rows[~confident]  # those rounds draft nothing: one plain target draw
        return drafts, draft_probs, np.where(confident, draft_len, 0)


@zoo_entry(verdict=Verdict.EXACT, mechanism="confidence-threshold-fallback", checks=("metrics",))
def confidence_fallback(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A round whose draft gives its likeliest first token under 0.5 drafts nothing: one plain draw, then it resumes.

    The confidence is the draft's softmax at temperature 1 (its own, before the request's processors).

    Verdict: exact. A fallback round is the bonus position of a round without drafts, an inverse-CDF draw from the
    processed target row (plain sampling); the rounds around it are the reference's. The control of the fallback
    axis: ``stale_seed_after_fallback`` is this decoder with a stale seed token after each fallback round. Its
    acceptance lies below the chain rule's expectation for γ drafts every round, so the metrics check fails (an
    expectation for decoders that may fall back is not part of that check yet).
    """
    return _ConfidenceFallback(target, draft, entropy=entropy)


class _StaleSeed(_ConfidenceFallback):
    def round(self, st, rows):
        seed = st.last.copy()
        super().round(st, rows)
        if not hasattr(st, "stale_seed"):
            st.stale_seed = np.full(st.b, -1, dtype=np.int64)
        st.stale_seed[rows] = -1
        st.stale_seed[self.fell_back] = seed[self.fell_back]  # the token before the plain round's own

    def target_forward(self, st, rows, feed):
        stale = getattr(st, "stale_seed", None)
        if stale is not None and (stale[rows] >= 0).any():
            feed = feed.copy()
            feed[:, 0] = np.where(stale[rows] >= 0, stale[rows], feed[:, 0])  # the resumed round's seed token
        return super().target_forward(st, rows, feed)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="stale-seed-after-fallback", tv=0.66)
def stale_seed_after_fallback(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After a round that fell back to plain decoding, the resumed round feeds the target a stale seed token (vmlx PR
    #150, fixed again in PR #173).

    The plain round's token is committed, but the speculative path keeps the seed token it had before the fallback
    and feeds that one first when speculation resumes, so the target's context holds the older token twice and the
    new one not at all.

    Verdict: approximate. At temperature 0 the resumed round's rows come from a wrong context: greedy output differs
    after every fallback round (``confidence_fallback`` without the bug is exact).
    """
    return _StaleSeed(target, draft, entropy=entropy)
