"""Zoo entries that get the round's transaction wrong: rollback of KV / penalty / stop state, finishing, streaming."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.vectorized import EOS, LENGTH, STOP, VectorizedDecoder
from specverify.zoo._hooks import DeferredFinish
from specverify.zoo._registry import zoo_entry

__all__ = [
    "target_kv_not_cropped",
    "penalty_history_keeps_rejected",
    "grammar_state_not_rolled_back",
    "stop_state_not_rolled_back",
    "eos_leaks_in_round",
    "eos_mid_block_continues",
    "length_before_stop",
    "stop_string_tokens_kept",
    "stream_repeats_token",
    "drafts_charged_to_max_tokens",
    "stop_window_shorter_than_block",
    "finishing_token_not_in_history",
    "padding_drafts_accepted",
]


def _rejected_drafts(st, rows, drafts):
    """(request rows, draft tokens) of this round's drafts that were not accepted, for rows still running."""
    accepted = st.accepted[rows, st.rounds]  # set by accept_and_commit; st.rounds is not yet advanced
    mask = (np.arange(st.gamma)[None, :] >= accepted[:, None]) & (st.reason[rows] == 0)[:, None]
    r, j = np.nonzero(mask)
    return rows[r], drafts[r, j]


class _TargetKVNotCropped(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        alive = rows[st.reason[rows] == 0]
        if alive.size == 0:
            return
        keep = st.prompt_len[alive] + st.n_gen[alive] - 1
        target, draft = st.target_cache, st.draft_cache
        target.crop(alive, np.minimum(target.lengths[alive], keep + 1))  # off by one: a rejected entry stays
        stored = draft.lengths[alive]
        draft.crop(alive, np.minimum(stored, keep))
        short = alive[stored < keep]
        if short.size:
            draft.forward(short, st.out[short, st.n_gen[short] - 2][:, None])


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="target-kv-not-cropped", showcases=("plain",), tv=0.39)
def target_kv_not_cropped(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The target cache is cropped one entry short: the first rejected draft's KV stays (the seed's failure mode).

    The next round's tokens are fed on top of the stale entry, so every later target row is read from a wrong
    context (a toy model's stale entry moves the next-token law by TV ≳ 0.1).

    Verdict: approximate. At temperature 0 the later argmaxes come from wrong contexts, so greedy output differs
    after the first rejection.
    """
    return _TargetKVNotCropped(target, draft, entropy=entropy)


class _PenaltyHistoryKeepsRejected(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        super().rollback(st, rows, drafts)
        if not st.penalized:
            return
        r, tok = _rejected_drafts(st, rows, drafts)
        idx, tok = torch.from_numpy(r), torch.from_numpy(tok)
        st.seen[idx, tok] = True
        st.counts.index_put_((idx, tok), torch.ones(len(r), dtype=st.counts.dtype), accumulate=True)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="penalty-history-not-rolled-back", showcases=("penalties",), tv=0.23)
def penalty_history_keeps_rejected(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Rejected drafts stay in the penalty history (seen / counts): the penalty state is not rolled back.

    The seed's failure mode (its state transaction lists the penalty history among what a round must roll back).

    Verdict: approximate. With penalties at temperature 0, a rejected draft is penalised as if generated, which
    moves later argmaxes: greedy output differs.
    """
    return _PenaltyHistoryKeepsRejected(target, draft, entropy=entropy)


class _GrammarStateNotRolledBack(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        super().rollback(st, rows, drafts)
        if st.grammar is None:
            return
        r, tok = _rejected_drafts(st, rows, drafts)
        for row, t in zip(r.tolist(), tok.tolist()):  # the matcher stays advanced over the rejected drafts
            st.gstate[row] = st.grammar[1][st.gstate[row], t]


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="grammar-state-not-rolled-back", showcases=("grammar",), tv=0.18)
def grammar_state_not_rolled_back(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The grammar matcher stays advanced over the rejected drafts (the seed: processor state not rolled back).

    Later masks come from a state the committed tokens never reached (a rejected draft the new state does not allow
    leaves it unchanged, as the toy matcher does), so tokens the grammar forbids are emitted and allowed ones masked.

    Verdict: approximate. At temperature 0 with a grammar, the argmax under the wrong state's mask differs from the
    one under the true state after a rejection: greedy output differs.
    """
    return _GrammarStateNotRolledBack(target, draft, entropy=entropy)


class _StopStateNotRolledBack(VectorizedDecoder):
    def rollback(self, st, rows, drafts):
        super().rollback(st, rows, drafts)
        if st.stops is None:
            return
        r, tok = _rejected_drafts(st, rows, drafts)
        for row, t in zip(r.tolist(), tok.tolist()):  # the matcher keeps the rejected drafts' text
            st.sstate[row] = st.stops.next_state[st.sstate[row], t]


@zoo_entry(verdict=Verdict.INVALID, mechanism="stop-state-not-rolled-back", showcases=("stop",), tv=0.044)
def stop_state_not_rolled_back(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The stop-string matcher keeps the rejected drafts' text in its buffer (the seed's failure mode).

    Verdict: invalid. A stop string completed across a rejected draft and a later token finishes the request as
    ``stop`` though the committed text holds no stop string (and one spanning the true history can be missed, so
    generation runs past it): the finish reason does not match the tokens, a protocol violation (rule 1).
    """
    return _StopStateNotRolledBack(target, draft, entropy=entropy)


class _EosLeaksInRound(DeferredFinish):
    deferred = frozenset({EOS})


@zoo_entry(verdict=Verdict.INVALID, mechanism="accepted-eos-does-not-end-round", showcases=("eos_in_block",), tv=0.42)
def eos_leaks_in_round(target, draft, *, entropy=None) -> VectorizedDecoder:
    """An accepted EOS does not end the round: later accepted drafts and the bonus leak out after it (SGLang #31599).

    The request finishes with ``eos`` at the end of the round. (SGLang #31569, the same report's length-before-stop
    ordering, is ``length_before_stop``.)

    Verdict: invalid: tokens after a finishing token (rule 1).
    """
    return _EosLeaksInRound(target, draft, entropy=entropy)


class _EosMidBlockContinues(DeferredFinish):
    deferred = frozenset({EOS})

    def end_of_round(self, st, rows):
        last = st.out[rows, st.n_gen[rows] - 1]  # only the round's last token is checked for EOS
        done = rows[(st.reason[rows] == 0) & (self.pending[rows] == EOS) & (last == self.vocab.eos_token_id)]
        st.reason[done] = EOS


@zoo_entry(verdict=Verdict.INVALID, mechanism="mid-block-eos-ignored", showcases=("eos_in_block",), tv=0.42)
def eos_mid_block_continues(target, draft, *, entropy=None) -> VectorizedDecoder:
    """EOS accepted mid-block does not stop generation; only a round ending in EOS does (transformers #47912).

    Verdict: invalid: generation runs on after an EOS, so tokens follow a finishing token (rule 1).
    """
    return _EosMidBlockContinues(target, draft, entropy=entropy)


class _LengthBeforeStop(VectorizedDecoder):
    def commit(self, st, rows, tokens):
        super().commit(st, rows, tokens)
        at_cap = st.n_gen[rows] >= st.params.max_tokens
        st.reason[rows[at_cap & np.isin(st.reason[rows], (EOS, STOP))]] = LENGTH  # the cap is checked first


@zoo_entry(verdict=Verdict.INVALID, mechanism="length-checked-before-stop", showcases=("eos_in_block",), tv=0.12)
def length_before_stop(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The length cap is checked before EOS and stop strings: EOS as the last allowed token reports ``length``.

    SGLang #31569 (with #31599): the finishing checks ran in the wrong order.

    Verdict: invalid: the finish reason does not match the tokens (docs/design.md order: EOS, then stop, then length),
    a protocol violation (rule 1). The token law is exact.
    """
    return _LengthBeforeStop(target, draft, entropy=entropy)


class _StopStringTokensKept(DeferredFinish):
    deferred = frozenset({STOP})


@zoo_entry(verdict=Verdict.INVALID, mechanism="tokens-kept-past-stop-string", showcases=("stop",), tv=0.45)
def stop_string_tokens_kept(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A stop string completed mid-block finishes the request only at the end of the round (vLLM #47616).

    The text is trimmed at the stop string, but the token ids past the completing token are kept.

    Verdict: invalid: tokens after a finishing token (rule 1).
    """
    return _StopStringTokensKept(target, draft, entropy=entropy)


class _StreamRepeatsToken(VectorizedDecoder):
    def __call__(self, requests):
        out = []
        for c in super().__call__(requests):
            if c.stream:
                c = replace(c, stream=(c.stream[0],) + tuple(a[-1:] + b for a, b in zip(c.stream, c.stream[1:])))
            out.append(c)
        return out


@zoo_entry(verdict=Verdict.INVALID, mechanism="token-streamed-twice", showcases=("plain",))
def stream_repeats_token(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Each streamed chunk re-sends the previous round's last token (the token fed first to the next verification).

    The seed's correctness contract: an accepted token is streamed once.

    Verdict: invalid: the stream does not concatenate to the tokens (rule 1). Tokens and law are exact.
    """
    return _StreamRepeatsToken(target, draft, entropy=entropy)


class _DraftsChargedToMaxTokens(VectorizedDecoder):
    def store_round(self, st, rows, accepted, verified, committed):
        super().store_round(st, rows, accepted, verified, committed)
        if st.rounds == 0:
            st.charged = np.zeros(st.b, dtype=np.int64)  # rejected drafts charged to the budget, per row
        st.charged[rows] += verified - accepted
        over = (st.reason[rows] == 0) & (st.n_gen[rows] + st.charged[rows] >= st.params.max_tokens)
        self.finish(st, rows[over], LENGTH)


@zoo_entry(verdict=Verdict.INVALID, mechanism="drafts-charged-to-max-tokens", showcases=("plain",), tv=0.3)
def drafts_charged_to_max_tokens(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Rejected drafts count towards ``max_tokens``: requests end with ``length`` short of the cap (LiteRT-LM #2816).

    The budget is charged for every drafted token, not for the tokens committed (ik_llama.cpp PR #2358 charged the
    whole accepted block the same way), so a request whose rounds rejected drafts stops with fewer tokens than
    ``max_tokens`` and reports ``length``.

    Verdict: invalid: the finish reason ``length`` does not match tokens shorter than ``max_tokens`` (rule 1), in every
    scenario where a draft is rejected before the cap.
    """
    return _DraftsChargedToMaxTokens(target, draft, entropy=entropy)


class _StopWindowShorterThanBlock(DeferredFinish):
    deferred = frozenset({STOP})

    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        self.stop_at = np.zeros(st.b, dtype=np.int64)  # tokens up to and including the stop's last token
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)

    def commit(self, st, rows, tokens):
        before = self.pending[rows].copy()
        super().commit(st, rows, tokens)
        new = (before == 0) & (self.pending[rows] != 0)
        self.stop_at[rows[new]] = st.n_gen[rows[new]]

    def end_of_round(self, st, rows):
        window = 1 + max(len(s) for s in st.params.stop) if st.params.stop else 0  # tokens decoded after a round
        held = rows[self.pending[rows] == STOP]  # an EOS or the cap later in the block does not hide the match
        seen = held[st.n_gen[held] - self.stop_at[held] < window]
        st.n_gen[seen] = self.stop_at[seen]  # the match is found: the output is cut after it
        st.reason[seen] = STOP
        self.pending[held] = 0  # the others were missed: the request goes on past its stop string (or ends later)


@zoo_entry(verdict=Verdict.INVALID, mechanism="stop-window-shorter-than-block", showcases=("stop",), tv=0.072)
def stop_window_shorter_than_block(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The stop-string check decodes only the last ``max stop length + 1`` tokens of a round (SGLang PR #23802).

    A round commits its whole accepted block, then looks for stop strings in the text of its last few tokens: a stop
    string completed earlier in a long block falls outside that window and is never seen, so the request goes on.
    One completed inside the window is found and the output is cut after it, as the reference does. (SGLang PR #27637
    reported the same window for a stop string committed mid-chunk.)

    Verdict: invalid: tokens after a finishing token (rule 1) where a missed stop string stays in the output.
    """
    return _StopWindowShorterThanBlock(target, draft, entropy=entropy)


class _FinishingTokenNotInHistory(VectorizedDecoder):
    def run_group(self, prompt, params, num_draft_tokens, seeds):
        eos = self.vocab.eos_token_id

        def history(p):  # the session kept the turn's output but not the token that finished it
            p = tuple(int(t) for t in p)
            return p[:-1] if len(p) > 1 and p[-1] == eos else p

        one = len(prompt) == 0 or isinstance(prompt[0], (int, np.integer))
        prompt = history(prompt) if one else [history(p) for p in prompt]
        return super().run_group(prompt, params, num_draft_tokens, seeds)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="finishing-token-not-in-history", showcases=("multi_turn",), tv=0.81)
def finishing_token_not_in_history(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The next turn's history lacks the token that finished the previous turn (LiteRT-LM #3439).

    Turn 2's prompt is turn 1's prompt plus its whole output; the session's history dropped the finishing token (EOS)
    it committed, so turn 2 continues from the last text token instead.

    Verdict: greedy-only. The greedy scenarios' prompts hold no finished turn, so greedy output is kept; the
    ``multi-turn`` scenario's law (its prompt ends with turn 1's EOS) is that of the shorter history and is rejected.
    """
    return _FinishingTokenNotInHistory(target, draft, entropy=entropy)


class _PaddingDraftsAccepted(VectorizedDecoder):
    padded = np.empty(0, dtype=np.int64)  # request rows whose drafts this round are placeholders

    def propose(self, st, rows):
        pad = (st.rounds == 0) & (st.prompt_len[rows] == 1)  # a new request whose first step computes one token
        self.padded, self.greedy = rows[pad], st.params.temperature == 0
        drafts, draft_probs, draft_len = super().propose(st, rows)
        placeholder = self.vocab.size - 1  # what index -1 reads: the last vocabulary entry (the toy's EOS)
        drafts[pad], draft_len[pad] = placeholder, st.gamma
        draft_probs[torch.from_numpy(pad)] = torch.nn.functional.one_hot(  # q = 1: no draft probabilities
            torch.tensor(placeholder), self.vocab.size
        ).to(draft_probs.dtype)
        return drafts, draft_probs, draft_len

    def uniforms(self, st, rows, offset, purpose):
        self.drawing = torch.from_numpy(np.isin(rows, self.padded))  # the rows the accept / recover call next serves
        return super().uniforms(st, rows, offset, purpose)

    def accept(self, target_p, draft_q, u):
        return super().accept(target_p, draft_q, u) & ~(self.drawing & self.greedy)  # greedy: -1 is never the argmax

    def recover(self, target_row, draft_row, u):
        return super().recover(target_row, torch.where(self.drawing[:, None], 0.0, draft_row), u)  # no id is -1

    def commit_step(self, st, rows, sel, tok, stop, live, committed):
        kept = np.isin(rows[sel], self.padded) & ~stop  # a kept placeholder is dropped; its row goes on
        super().commit_step(st, rows, sel[~kept], tok[~kept], stop[~kept], live, committed)

    def store_round(self, st, rows, accepted, verified, committed):
        pad = np.isin(rows, self.padded)  # counted as vLLM does: γ drafts verified, none accepted
        super().store_round(st, rows, np.where(pad, 0, accepted), np.where(pad, st.gamma, verified), committed)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="padding-draft-accepted", showcases=("one_token_prompt",), tv=0.048)
def padding_drafts_accepted(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A one-token prompt's first round verifies γ placeholder drafts; one kept emits nothing but feeds the next row.

    vLLM finding 13 (docs/findings/vllm.md): the scheduler pads a new request whose step computes one token to 1 + γ
    tokens with drafts -1; the CPU rejection kernel reads the target probability at index -1 with q = 1 and keeps the
    placeholder when it beats the uniform (the Triton kernel rejects it). The output drops a kept -1, but the next
    row was computed with it as input, so the first token comes from a row conditioned on a wrong history.

    Modelled: the first round of a request with a one-token prompt (the reference has no prefix cache, so nothing
    else computes one token in a first step), all γ drafts replaced by the last vocabulary id V - 1 (the toy's EOS,
    as in vLLM's checkpoint) with q = 1; each kept with probability p(V - 1) of its own row at temperature > 0,
    never at temperature 0 (vLLM's greedy kernel compares the draft with the argmax); a kept one emits nothing but
    stays in the history the later rows of the round read (KV and processors, which advance over V - 1 as over any
    draft); a rejection draws from the whole target row (vLLM's recovered-token kernel masks the draft's id, and no
    id is -1); all γ kept, the bonus comes from the last row. The round reports γ drafts verified and none accepted,
    as vLLM counts it; the next round starts from the committed tokens (the placeholders' entries are cropped: vLLM
    counts them rejected and writes over them). Not
    modelled: vLLM reads index -1 of the flattened probabilities, i.e. the last entry of the row *before* (another
    request's, or this request's previous position), which depends on the batch; the toy reads its own row. Nor
    the prefix-cache hit that leaves one prompt token to compute, nor the condition "other requests running, no
    prefill scheduled": every one-token prompt is padded here.

    Verdict: greedy-only. Greedy rows reject every placeholder, and the recovered token of row 0 is the target's
    argmax after the prompt, so greedy output is the target's; at temperature > 0 the first token's law is a
    mixture over rows conditioned on 0..γ placeholders. Only a sampling scenario with a one-token prompt shows it:
    the toy matrix's ``one-token-prompt`` (p 1e-18 at N 3 991, quick level).
    """
    return _PaddingDraftsAccepted(target, draft, entropy=entropy)
