"""Zoo entries whose target law misses or misplaces a logit processor, or whose processor state drifts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._hooks import ParamsPerPosition
from specverify.zoo._registry import zoo_entry

__all__ = [
    "argmax_verify",
    "temperature_not_in_rejection",
    "min_p_bonus_row_only",
    "penalties_ignored_in_verify",
    "masks_dropped_in_verify",
    "grammar_not_in_verify",
    "grammar_cut_drafts_resampled",
    "penalty_last_token_only",
    "min_tokens_counts_rounds",
    "min_tokens_bonus_unmasked",
    "min_tokens_bonus_masked_by_committed",
    "unset_temperature_greedy_with_top_k",
    "logits_processor_skipped_in_verify",
    "repetition_penalty_bonus_row_stale",
    "confirmed_token_twice_in_verify",
]


class _ArgmaxVerify(VectorizedDecoder):
    def verify(self, st, rows, drafts):
        probs = super().verify(st, rows, drafts)  # [n, γ+1, V]
        hot = torch.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)
        return torch.where(probs.sum(-1, keepdim=True) > 0, hot, probs)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="verify-ignores-temperature", showcases=("temp_topk",), tv=0.8)
def argmax_verify(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Verification silently uses the target's argmax, ignoring temperature and top-p (SGLang #31214, #39253).

    Verdict: greedy-only. At temperature 0 the processed target rows are one-hot at the argmax already, so nothing
    changes; at temperature > 0 every request decodes greedily: the sampling law collapses to one outcome.
    """
    return _ArgmaxVerify(target, draft, entropy=entropy)


class _TemperatureNotInRejection(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        if params.temperature == 0 or k == num_draft_tokens:  # greedy path and the bonus sampler keep the parameters
            return params
        return replace(params, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)


@zoo_entry(
    verdict=Verdict.GREEDY_ONLY, mechanism="rejection-ignores-sampling-params", showcases=("temp_topk",), tv=0.32
)
def temperature_not_in_rejection(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Target probs of the rejection step ignore temperature, top-k, top-p, min-p; the bonus keeps them (vLLM #10198).

    Verdict: greedy-only. Greedy requests take the argmax path with their parameters, so greedy output is kept. At
    temperature ≠ 1 the accepted and recovered tokens follow the temperature-1 law, and with truncation a token the
    target removed can be accepted or recovered: outcomes of exact probability 0.
    """
    return _TemperatureNotInRejection(target, draft, entropy=entropy)


class _MinPBonusRowOnly(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        return params if k == num_draft_tokens else replace(params, min_p=0.0)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="min-p-bonus-row-only", showcases=("min_p",), tv=0.61)
def min_p_bonus_row_only(target, draft, *, entropy=None) -> VectorizedDecoder:
    """min-p is applied to the bonus row only, not to the rows that verify drafts (vLLM #42744).

    Verdict: greedy-only. min-p never removes the most likely token, so at temperature 0 (one-hot rows) it changes
    nothing. At temperature > 0, tokens below min_p × max are accepted or recovered at verified positions: outcomes
    of exact probability 0. (vLLM's logit_bias, the issue's other processor, moves the argmax and would make the
    bug approximate; SamplingParams has no logit_bias, so this entry keeps min-p alone.)
    """
    return _MinPBonusRowOnly(target, draft, entropy=entropy)


class _PenaltiesIgnoredInVerify(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        return replace(params, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="penalties-dropped-in-verify", showcases=("penalties",), tv=0.41)
def penalties_ignored_in_verify(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The target law of verification drops repetition, frequency and presence penalties (SGLang #21258, vLLM #18902).

    TensorRT-LLM #17955 dropped penalties from its one-model path as well (its masks: ``masks_dropped_in_verify``).

    Verdict: approximate. Frequency and presence penalties shift logits before the argmax, so at temperature 0 the
    greedy token changes wherever a penalty changes which token has the largest logit: greedy output differs.
    (A repetition penalty alone cannot do that on the toy models: their top logit is exactly 0, which the penalty
    leaves at 0, so the greedy check needs frequency or presence penalties.)
    """
    return _PenaltiesIgnoredInVerify(target, draft, entropy=entropy)


class _MasksDroppedInVerify(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        return replace(params, bad_token_ids=(), min_tokens=0)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="masks-dropped-in-verify", showcases=("masks",), tv=0.77)
def masks_dropped_in_verify(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The speculative path's target law drops bad-word and min-length masks (TensorRT-LLM #17955).

    Verdict: approximate. At temperature 0 a banned token (or EOS before min_tokens) that is the raw argmax is
    emitted instead of the masked argmax: greedy output differs.
    """
    return _MasksDroppedInVerify(target, draft, entropy=entropy)


class _GrammarNotInVerify(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        return replace(params, grammar=None)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="grammar-not-in-verify", showcases=("grammar",), tv=0.77)
def grammar_not_in_verify(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The grammar mask is not applied to the target rows of verification; drafts stay masked (SGLang #6441).

    The same mechanism: SGLang #9187 and #15373 (mask on the verify path), TensorRT-LLM #7878 (bitmask not applied at
    draft positions), vLLM #36138 and #44006 (drafts after a reasoning-end token bypassed the grammar; the bonus row
    was left unconstrained).

    Verdict: approximate. At temperature 0 the unmasked target argmax is emitted wherever the grammar forbids it (on
    rejection and as the bonus): greedy output leaves the grammar. A grammar violation is a law violation, not a
    protocol one (docs/design.md rule 1 does not list it), so not invalid.
    """
    return _GrammarNotInVerify(target, draft, entropy=entropy)


class _GrammarCutDrafts(VectorizedDecoder):
    def draft_laws(self, st, logits, prov, num_generated):
        q = self.law(st, logits, prov, num_generated, replace(st.params, grammar=None))  # the draft ignores it
        return q, q

    def propose(self, st, rows):
        drafts, draft_probs, draft_len = super().propose(st, rows)
        if st.grammar is not None and st.params.grammar is not None:
            allowed, nxt = st.grammar
            state = st.gstate[rows].copy()
            for k in range(st.gamma):  # keep the longest prefix the grammar allows (the scheduler's cut)
                ok = allowed[torch.from_numpy(state), torch.from_numpy(drafts[:, k])].numpy()
                draft_len[~ok & (draft_len > k)] = k
                state = nxt[state, drafts[:, k]]
        return drafts, draft_probs, draft_len


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="grammar-cut-drafts-resampled", showcases=("grammar",), tv=0.1)
def grammar_cut_drafts_resampled(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Unmasked drafts are cut at the first one the grammar forbids; that position is sampled from the target row.

    vLLM finding 12 (docs/findings/vllm.md): the draft ignores the grammar (exact by itself, q being the law it
    sampled), and the scheduler keeps only the longest grammar-valid prefix of a request's drafts, so the position of
    the first forbidden draft x gets a bonus token drawn from the masked target row p. The rule needs x rejected there
    (p(x) = 0) and the token drawn from norm((p - q)+): with draft mass Q on forbidden tokens the law of that position
    becomes p + Q (p - norm((p - q)+)), which leans towards the tokens q favours (they are also accepted directly).

    Verdict: greedy-only. At temperature 0 the draft is one-hot, (p - e_x)+ with p(x) = 0 is p itself, so the cut is
    harmless and greedy output is the target's; at temperature > 0 the position after accepted drafts no longer has
    the target's law.
    """
    return _GrammarCutDrafts(target, draft, entropy=entropy)


class _PenaltyLastTokenOnly(VectorizedDecoder):
    def accept_and_commit(self, st, rows, *args):
        if not st.penalized:  # the reference keeps no penalty history when no penalty reads it
            return super().accept_and_commit(st, rows, *args)
        seen, counts = st.seen[rows].clone(), st.counts[rows].clone()
        super().accept_and_commit(st, rows, *args)
        last = torch.from_numpy(st.out[rows, st.n_gen[rows] - 1])[:, None]  # only the round's last token counts
        st.seen[rows] = seen.scatter_(1, last, True)
        st.counts[rows] = counts.scatter_add_(1, last, torch.ones(last.shape, dtype=counts.dtype))


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="penalty-history-last-token-only", showcases=("penalties",), tv=0.05)
def penalty_last_token_only(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Penalty state records only the last token of each round (SGLang #33643: frequency penalty ÷ acceptance length).

    Verdict: approximate. With penalties at temperature 0, a token committed mid-round is missing from the penalty
    history, so a later argmax can fall on it where plain greedy decoding penalises it: greedy output differs.
    """
    return _PenaltyLastTokenOnly(target, draft, entropy=entropy)


class _MinTokensCountsRounds(VectorizedDecoder):
    def law(self, st, logits, prov, num_generated, params=None):
        return super().law(st, logits, prov, np.full_like(num_generated, st.rounds), params)  # one count per round


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="min-tokens-counts-rounds", showcases=("min_tokens",), tv=0.35)
def min_tokens_counts_rounds(target, draft, *, entropy=None) -> VectorizedDecoder:
    """min_tokens counts rounds, not tokens: EOS stays masked until min_tokens rounds have run (SGLang #33643).

    Verdict: approximate. A round commits ≥ 1 token, so the count lags the true length and EOS is masked past
    min_tokens; at temperature 0, whenever EOS is the argmax there (after a round with accepted drafts), the greedy
    output differs.
    """
    return _MinTokensCountsRounds(target, draft, entropy=entropy)


class _MinTokensBonusUnmasked(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        return replace(params, min_tokens=0) if k == num_draft_tokens else params  # the bonus row lets EOS through


@zoo_entry(
    verdict=Verdict.APPROXIMATE, mechanism="min-tokens-bonus-row-unmasked", showcases=("min_tokens_short_gamma",)
)
def min_tokens_bonus_unmasked(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The bonus row skips the min-tokens EOS mask; the rows that verify drafts keep it.

    Invisible while γ ≥ min_tokens: the first round's bonus row is then at position γ ≥ min_tokens, where EOS is
    allowed anyway, and later rounds come later still. With γ < min_tokens the bonus row of an early round lies
    before min_tokens: the ``min-tokens`` scenario (γ 3) missed it, ``min-tokens-short-gamma`` (γ 1) shows it; the
    greedy scenarios send γ 1 to 4 and always could.

    Verdict: approximate. At temperature 0 with γ 1 and min_tokens 3, a fully accepted first round emits the bonus at
    position 1: where EOS is the raw argmax there the request ends before min_tokens, so greedy output differs.
    """
    return _MinTokensBonusUnmasked(target, draft, entropy=entropy)


class _MinTokensBonusMaskedByCommitted(VectorizedDecoder):
    def verify(self, st, rows, drafts):
        feed = np.concatenate([st.last[rows][:, None], drafts], axis=1)
        logits = st.target_cache.forward(rows, feed)
        prov = self.provisional(st, rows)
        out = []
        for k in range(st.gamma + 1):
            params = self.verify_params(st.params, k, st.gamma)
            # the bonus row's min-tokens mask counts the tokens committed before the round, not its own position
            count = st.n_gen[rows] + (k if k < st.gamma else 0)
            out.append(self.law(st, logits[:, k], prov, count, params))
            if k < st.gamma:
                prov = self.advance(st, prov, drafts[:, k])
        return torch.stack(out, dim=1)


@zoo_entry(
    verdict=Verdict.APPROXIMATE,
    mechanism="min-tokens-bonus-row-masked-by-committed",
    showcases=("min_tokens_short_gamma",),
)
def min_tokens_bonus_masked_by_committed(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The bonus row's min-tokens mask counts the tokens committed before the round, not its position (vLLM PR #41768).

    With L tokens committed, γ drafts and min_tokens m, the rows that verify drafts are masked while L + k < m, but
    the bonus row (position L + γ) is masked while L < m: when L < m ≤ L + γ, EOS stays masked one position too long
    (vLLM 0.32 samples the bonus row through the plain sampler's min-tokens processor, docs/findings/vllm.md).

    Verdict: approximate. At temperature 0, a fully accepted round whose bonus position is at or past min_tokens and
    whose target argmax there is EOS emits another token instead of ending: greedy output differs.
    """
    return _MinTokensBonusMaskedByCommitted(target, draft, entropy=entropy)


class _UnsetTemperatureGreedyWithTopK(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        if params.is_set("temperature") or not params.top_k:
            return params
        return replace(params, temperature=0.0)  # "no temperature given" read as the greedy sentinel


@zoo_entry(
    verdict=Verdict.GREEDY_ONLY,
    mechanism="unset-temperature-normalised-to-greedy",
    showcases=("topk_unset_temperature",),
    tv=0.89,
)
def unset_temperature_greedy_with_top_k(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Top-k given, temperature unset: the speculative path verifies at the greedy sentinel (TensorRT-LLM PR #19390).

    The one-model speculative sampler normalised a temperature left unset to its greedy sentinel (a temperature so
    small that the softmax is one-hot) even where top-k made the row a sampling one; plain decoding resolved it to 1.
    Here every target row of verification goes greedy when the request leaves ``temperature`` unset and sets
    ``top_k``; drafts keep the request's law. A request that sets its temperature, to 1 or to anything else, is
    untouched: only a scenario that leaves it unset can see this (``top-k``).

    Verdict: greedy-only. Greedy requests set temperature 0 and keep their output. With top-k alone, a one-hot target
    row accepts only the argmax draft and recovers the argmax otherwise: the law collapses to the greedy outcome.
    """
    return _UnsetTemperatureGreedyWithTopK(target, draft, entropy=entropy)


class _LogitsProcessorSkippedInVerify(ParamsPerPosition):
    def verify_params(self, params, k, num_draft_tokens):
        return replace(params, logits_processors=()) if params.logits_processors else params


@zoo_entry(
    verdict=Verdict.APPROXIMATE,
    mechanism="logits-processor-skipped-in-verify",
    showcases=("logits_processor",),
    tv=0.74,
)
def logits_processor_skipped_in_verify(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The request's logits processors are skipped on the target rows of verification (SGLang #26330).

    SGLang's second speculative path (``eagle_info_v2.py``) applied penalties, grammar masks and sampling to the
    verify logits without ever calling the custom logit processor, so a thinking-budget processor had no effect with
    speculation on (SGLang #21724 the same). Here the rows that verify drafts and the bonus row drop
    ``logits_processors``; drafts keep them.

    Verdict: approximate. The verification law decides the output law, which is then plain sampling without the
    processor; at temperature 0 the argmax moves wherever the processor moves it (``greedy-logits-processor``).
    """
    return _LogitsProcessorSkippedInVerify(target, draft, entropy=entropy)


class _RepetitionBonusStale(VectorizedDecoder):
    def round(self, st, rows):
        now = st.seen.clone() if st.penalized else None
        st.seen_before = getattr(st, "seen_next", now)  # the snapshot taken one round earlier (first round: now)
        super().round(st, rows)
        st.seen_next = now

    def target_forward(self, st, rows, feed):
        self.verify_logits = super().target_forward(st, rows, feed)
        return self.verify_logits

    def verify_params(self, params, k, num_draft_tokens):
        return params if k == num_draft_tokens else replace(params, repetition_penalty=1.0)

    def verify(self, st, rows, drafts):
        target_probs = super().verify(st, rows, drafts)
        if st.params.repetition_penalty == 1.0:
            return target_probs
        prov = self.provisional(st, rows)
        for k in range(st.gamma):
            prov = self.advance(st, prov, drafts[:, k])
        stale = (st.seen_before[torch.from_numpy(rows)].clone(), *prov[1:])  # the bonus row's penalty history
        target_probs[:, st.gamma] = self.law(st, self.verify_logits[:, st.gamma], stale, st.n_gen[rows] + st.gamma)
        return target_probs


@zoo_entry(
    verdict=Verdict.APPROXIMATE, mechanism="repetition-penalty-bonus-row-stale", showcases=("penalties",), tv=0.15
)
def repetition_penalty_bonus_row_stale(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The repetition penalty reaches only the bonus row, and from a history snapshot one round old (SGLang PR
    #28242).

    The rows that verify drafts drop the repetition penalty; the bonus row applies it over the tokens seen at the
    start of the previous round (frequency and presence penalties stay right everywhere).

    Verdict: approximate. At temperature 0 with a repetition penalty the rows that judge drafts have unpenalised
    argmaxes: greedy output differs (``greedy-processors``, ``greedy-penalties``).
    """
    return _RepetitionBonusStale(target, draft, entropy=entropy)


class _ConfirmedTwice(VectorizedDecoder):
    def verify(self, st, rows, drafts):
        feed = np.concatenate([st.last[rows][:, None], drafts], axis=1)
        logits = self.target_forward(st, rows, feed)
        prov = self.provisional(st, rows)
        out = []
        for k in range(st.gamma + 1):
            out.append(self.law(st, logits[:, k], prov, st.n_gen[rows] + k))
            if k < st.gamma:
                prov = self.advance(st, prov, feed[:, k])  # the processors' token list starts at the confirmed one
        return torch.stack(out, dim=1)


@zoo_entry(
    verdict=Verdict.APPROXIMATE, mechanism="verify-processors-see-confirmed-twice", showcases=("penalties",), tv=0.26
)
def confirmed_token_twice_in_verify(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The processors of verify position k see the confirmed token twice and miss draft k - 1 (mlx-lm #1175).

    The verify rows' processor inputs were built from the row inputs ``[last, x_0 .. x_{γ-1}]`` appended to a history
    that already holds ``last``: position k's penalties, logits processors and grammar see ``last`` twice and
    ``x_0 .. x_{k-2}``, never ``x_{k-1}``.

    Verdict: approximate. At temperature 0 with penalties, positions k ≥ 1 penalise the wrong tokens and their
    argmaxes move: greedy output differs.
    """
    return _ConfirmedTwice(target, draft, entropy=entropy)
