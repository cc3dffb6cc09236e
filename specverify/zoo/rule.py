"""Zoo entries that break the single-position rule: acceptance test, residual, bonus, uniforms and draft probs.

Greedy derivations use one fact: at temperature 0 the processed target and draft rows are one-hot (target argmax y,
draft argmax x), so the reference accepts x iff x == y, and on rejection the residual (p - q)+ is one-hot at y.
Docstrings write the seed's p and q for ``target_probs`` and ``draft_probs``; the code uses the glossary's names.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.reference.vectorized import VectorizedDecoder
from specverify.sampling import Purpose, sample_from_uniforms
from specverify.zoo._hooks import DraftLaws, RowAware
from specverify.zoo._registry import zoo_entry

__all__ = [
    "shared_uniform",
    "inclusive_accept",
    "last_index_fallback",
    "resample_from_target",
    "residual_softmax",
    "row0_offset",
    "bonus_from_draft",
    "greedy_draft_softmax_q",
    "raw_q_processed_draft",
    "draft_probs_off_by_one",
    "unseeded_shared_stream",
    "residual_from_point_mass",
    "argmax_verified_sampled_bonus",
]

COIN_BITS = 8  # bfloat16-resolution coins: u == 0 with probability 2**-8


class _SharedUniform(VectorizedDecoder):
    def uniforms(self, st, rows, offset, purpose):
        return super().uniforms(st, rows, offset, Purpose.ACCEPT if purpose == Purpose.TARGET else purpose)


@zoo_entry(
    verdict=Verdict.GREEDY_ONLY, mechanism="uniform-reused-for-residual", showcases=("plain", "near_draft"), tv=0.064
)
def shared_uniform(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The uniform of the acceptance test is reused for the residual draw (FlashInfer #424).

    Given a rejection, u ≥ p(x)/q(x), so the recovered token is drawn from the top of the residual's CDF only.

    Verdict: greedy-only. At temperature 0 the residual is one-hot, so any uniform draws the target argmax; the
    acceptance test itself is unchanged. At temperature > 0 the recovered token's law is skewed toward high ids.
    """
    return _SharedUniform(target, draft, entropy=entropy)


class _InclusiveAccept(VectorizedDecoder):
    def uniforms(self, st, rows, offset, purpose):
        u = super().uniforms(st, rows, offset, purpose)
        if purpose == Purpose.ACCEPT and st.params.temperature > 0:  # greedy rows take the argmax path
            u = torch.floor(u * 2.0**COIN_BITS) / 2.0**COIN_BITS
        return u

    def accept(self, target_prob, draft_prob, u):
        return u * draft_prob <= target_prob


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="inclusive-acceptance-test", showcases=("temp_topk",), tv=0.0035)
def inclusive_accept(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Inclusive ``u * q <= p`` acceptance with low-resolution coins accepts zero-probability drafts (SGLang #35771).

    SGLang compared ``coin <= p / q`` with float32 ``torch.rand`` coins, which are exactly 0 with probability 2**-24:
    a draft the target's top-k/top-p removed (p = 0) is then accepted. At that rate no feasible sample shows it, so
    this entry keeps the mechanism and makes it observable: coins of bfloat16 resolution (multiples of 2**-8), zero
    with probability 1/256 per test, which also shifts every acceptance probability up by at most 1/256.

    Verdict: greedy-only. Greedy rows take the engine's separate argmax path (unquantized 53-bit uniforms: u == 0
    never happens), and one-hot rows make the rule exact. At temperature > 0 with truncation, a p = 0 draft is
    accepted at rate 1/256: an outcome of exact probability 0 appears and rejects the scenario at once.
    """
    return _InclusiveAccept(target, draft, entropy=entropy)


class _LastIndexFallback(VectorizedDecoder):
    def recover(self, target_row, draft_row, u):  # [n, V], [n, V], [n] -> [n]
        residual = (target_row - draft_row).clamp_min(0)
        mass = residual.sum(-1, keepdim=True)
        rounded = mass.to(torch.bfloat16).to(mass.dtype)  # normaliser computed in low precision
        probs = torch.where(mass > 0, residual / rounded.clamp_min(1e-300), target_row)
        index = (torch.cumsum(probs, -1) <= u[:, None]).sum(-1)  # the coin assumes the row sums to 1
        return index.clamp_max(probs.shape[-1] - 1)  # ran past the end: the last index, whatever its probability


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="residual-last-index-fallback", showcases=("temp_topk",), tv=0.0018)
def last_index_fallback(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A coin past the residual's total falls back to the last index (V - 1 = EOS here), not the last positive one.

    SGLang #22643: when rounding left the CDF total below the coin, the kernel emitted token d - 1, which can have
    probability 0. Float32 rounding makes that ~1e-7 per draw; this entry normalises the residual by a
    bfloat16-rounded mass, so the row sums to m / bf16(m) and a coin above it (≤ 2**-8) runs past the end.

    Verdict: greedy-only. At temperature 0 the residual is one-hot with mass exactly 1 (representable), so the coin
    never runs past the end. At temperature > 0, EOS is emitted where its residual is 0; where the target removed EOS
    (top-k, min_tokens, grammar) that outcome has exact probability 0 and rejects the scenario at once.
    """
    return _LastIndexFallback(target, draft, entropy=entropy)


class _ResampleFromTarget(VectorizedDecoder):
    def recover(self, target_row, draft_row, u):
        return sample_from_uniforms(target_row, u)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="recovered-from-target", showcases=("plain", "near_draft"), tv=0.14)
def resample_from_target(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After a rejection the token is drawn from the target row, not from the residual (the seed's failure mode).

    Verdict: greedy-only. At temperature 0 the residual equals the target row (one-hot at the argmax), so nothing
    changes; at temperature > 0 tokens the draft over-proposes are drawn twice over: over-represented.
    """
    return _ResampleFromTarget(target, draft, entropy=entropy)


class _ResidualSoftmax(VectorizedDecoder):
    def recover(self, target_row, draft_row, u):
        return sample_from_uniforms(torch.softmax((target_row - draft_row).clamp_min(0), -1), u)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="residual-softmax", showcases=("plain", "near_draft"), tv=0.32)
def residual_softmax(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The residual is passed through softmax instead of being normalised (transformers #28508).

    softmax((p - q)+) treats probabilities as logits: nearly uniform, with positive mass on every token.

    Verdict: approximate. At temperature 0 a rejection has (p - q)+ one-hot at the argmax y, and softmax of a
    one-hot vector gives y only e / (e + V - 1) (≈ 0.40 with V = 5): greedy output differs.
    """
    return _ResidualSoftmax(target, draft, entropy=entropy)


class _Row0Offset(RowAware):
    def _first_rows(self):
        _, rows, _ = self.draw
        target_probs, draft_probs = self.round_probs
        i = torch.from_numpy(self.position_of[rows])
        return target_probs[i, 0], draft_probs[i, 0]

    def recover(self, target_row, draft_row, u):
        return super().recover(*self._first_rows(), u)

    def bonus(self, target_row, u):
        return super().bonus(self._first_rows()[0], u)


@zoo_entry(
    verdict=Verdict.APPROXIMATE, mechanism="residual-row-offset-missing", showcases=("plain", "near_draft"), tv=0.27
)
def row0_offset(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The residual and the bonus read the position-0 rows: the ``+pos`` offset is missing (FlashInfer #425).

    Acceptance uses the right rows; a rejection at k > 0 or the bonus draws from row 0's target/residual.

    Verdict: approximate. At temperature 0, draft 0 was accepted whenever the round reaches k > 0, so row 0 has
    p = q one-hot at x_0: the residual has no mass, falls back to the target row and emits x_0 again, and the bonus
    emits x_0 again too — not the greedy continuation.
    """
    return _Row0Offset(target, draft, entropy=entropy)


class _BonusFromDraft(RowAware):
    def propose(self, st, rows):
        drafts, draft_probs, draft_len = super().propose(st, rows)
        prov = self.provisional(st, rows)
        for k in range(st.gamma):
            prov = self.advance(st, prov, drafts[:, k])
        stored = st.draft_cache.lengths[rows].copy()
        logits = st.draft_cache.forward(rows, drafts[:, -1:])[:, 0]  # one more draft step, then undone
        st.draft_cache.crop(rows, stored)
        self.bonus_draft = torch.zeros((st.b, self.vocab.size), dtype=torch.float64)
        self.bonus_draft[torch.from_numpy(rows)] = self.law(st, logits, prov, st.n_gen[rows] + st.gamma)
        return drafts, draft_probs, draft_len

    def bonus(self, target_row, u):
        st, rows, k = self.draw
        if k < st.gamma:  # a draft that could not propose: plain target draw, as in the reference
            return super().bonus(target_row, u)
        draft_probs = self.bonus_draft[torch.from_numpy(rows)]
        return super().bonus(torch.where(draft_probs.sum(-1, keepdim=True) > 0, draft_probs, target_row), u)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="bonus-from-draft", showcases=("plain", "near_draft"), tv=0.068)
def bonus_from_draft(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After full acceptance the bonus token is sampled from the draft's next-token law (the seed's failure mode).

    Verdict: approximate. At temperature 0 the bonus is the draft's argmax, which differs from the target's at the
    positions where the draft disagrees (≥ 30 % in the greedy check): greedy output differs.
    """
    return _BonusFromDraft(target, draft, entropy=entropy)


class _GreedyDraftSoftmaxQ(DraftLaws):
    def draft_laws(self, st, logits, prov, num_generated):
        draft_probs = self.law(st, logits, prov, num_generated)
        hot = torch.nn.functional.one_hot(draft_probs.argmax(-1), draft_probs.shape[-1]).to(draft_probs.dtype)
        # argmax draft, softmax draft_probs in the ratio
        return torch.where(draft_probs.sum(-1, keepdim=True) > 0, hot, draft_probs), draft_probs


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="greedy-draft-softmax-q", showcases=("plain", "near_draft"), tv=0.62)
def greedy_draft_softmax_q(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Drafts are the draft's argmax, but the ratio divides by the draft's softmax q (transformers #32867).

    The law that produced the draft is one-hot; dividing by softmax q accepts the argmax too rarely and the
    residual (p - q)+ subtracts mass q never proposed (target [0.6, 0.4] became [0.75, 0.25] in the report).

    Verdict: greedy-only. At temperature 0 the processed draft row is already one-hot, so argmax draft and q agree
    and the rule is exact; at temperature > 0 the law differs.
    """
    return _GreedyDraftSoftmaxQ(target, draft, entropy=entropy)


class _RawQProcessedDraft(DraftLaws):
    def draft_laws(self, st, logits, prov, num_generated):
        draft_probs = self.law(st, logits, prov, num_generated)
        return draft_probs, torch.softmax(logits.to(torch.float64), -1)  # sampled from processed, ratio over raw


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="raw-q-processed-draft", showcases=("temp_topk",), tv=0.22)
def raw_q_processed_draft(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Drafts are sampled from the processed (top-k, temperature) draft law, q is the raw softmax (transformers #47932).

    Verdict: greedy-only. At temperature 0 the target row is one-hot at y: the draft x == y is accepted (p = 1 ≥ u q)
    and x != y is rejected (p = 0) with residual (e_y - q_raw)+ ∝ e_y, so greedy output is kept whatever q_raw is.
    At temperature ≠ 1 or with truncation the raw q differs from the proposing law and the output law moves.
    """
    return _RawQProcessedDraft(target, draft, entropy=entropy)


class _DraftProbsOffByOne(VectorizedDecoder):
    def propose(self, st, rows):
        drafts, draft_probs, draft_len = super().propose(st, rows)
        draft_probs[:, 1:] = draft_probs[:, :-1].clone()  # row k records the law of draft k - 1
        return drafts, draft_probs, draft_len


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="draft-probs-misaligned", showcases=("plain", "near_draft"), tv=0.16)
def draft_probs_off_by_one(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Draft k's ratio divides by the law of draft k - 1: probs gathered with a pre-shift index (TensorRT-LLM #12588).

    Verdict: greedy-only. At temperature 0 every q row is one-hot: a draft equal to the target argmax y has p = 1 and
    is accepted (u q < 1 for any q in [0, 1]); any other draft has p = 0 and is rejected; the residual (e_y - q')+ is
    e_y unless q' = e_y, where it has no mass and falls back to the target row e_y. Greedy output is kept; at
    temperature > 0 the ratio uses the wrong q and the law moves.
    """
    return _DraftProbsOffByOne(target, draft, entropy=entropy)


class _UnseededSharedStream(VectorizedDecoder):
    def _request_seeds(self, seeds):
        shared = self._rng.integers(0, 2**63, dtype=np.int64)  # one stream for every unseeded request of a batch
        return np.array([shared if s is None else s for s in seeds], dtype=np.uint64)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="unseeded-requests-share-rng", showcases=("plain",))
def unseeded_shared_stream(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Unseeded requests of one batch share one RNG stream, in lockstep (TensorRT-LLM #19487).

    Identical unseeded requests in one call return identical outputs; seeded requests are untouched.

    Verdict: greedy-only. Greedy output is deterministic anyway. Each request's own law is exact, but the joint
    law of independent requests is not: the collision test over disjoint pairs of identical unseeded requests
    (docs/design.md rule 3) sees collision rate 1 instead of Σp². (``sample`` of an unseeded request is one batch too:
    all n draws coincide.) The TV figure is not comparable (the marginal law is exact); it is left out.
    """
    return _UnseededSharedStream(target, draft, entropy=entropy)


class _ResidualFromPointMass(RowAware):
    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        self.round_drafts = drafts
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)

    def recover(self, target_row, draft_row, u):
        _, rows, k = self.draw
        x = torch.from_numpy(self.round_drafts[self.position_of[rows], k])
        point = torch.nn.functional.one_hot(x, target_row.shape[-1]).to(target_row.dtype)
        return super().recover(target_row, point, u)  # (p - e_x)+: p with the drafted token removed


@zoo_entry(
    verdict=Verdict.GREEDY_ONLY, mechanism="residual-from-point-mass", showcases=("plain", "near_draft"), tv=0.11
)
def residual_from_point_mass(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Drafts are sampled from the dense draft law q, the residual is built as if q were a point mass (xLLM PR #2175).

    The acceptance test keeps the dense ratio p(x)/q(x); on rejection the token is drawn from (p - e_x)+, i.e. p
    without the drafted token, instead of (p - q)+. (Point masses on both sides would be exact, only slower: accept
    with p(x), else p without x; it is the mix of a dense ratio and a point-mass residual that is wrong.) The mechanism
    is as the field-mechanisms issue describes xLLM's probabilistic path before the PR, which separated greedy
    (point-mass) from probabilistic (dense) proposals.

    Verdict: greedy-only. At temperature 0 the target row is one-hot at y and the draft row one-hot at x: x == y is
    accepted, and on rejection (p - e_x)+ = e_y as (p - q)+ is, so greedy output is kept. At temperature > 0 a token
    the draft favours is recovered too often: P(y) = min(p(y), q(y)) + p(y) Σ_{x≠y} (q(x) - p(x))+ / (1 - p(x)).
    """
    return _ResidualFromPointMass(target, draft, entropy=entropy)


class _ArgmaxVerifiedSampledBonus(VectorizedDecoder):
    def accept_and_commit(self, st, rows, drafts, draft_probs, draft_len, target_probs):
        if st.params.temperature > 0:  # greedy rows are one-hot already
            hot = torch.nn.functional.one_hot(target_probs.argmax(-1), target_probs.shape[-1]).to(target_probs.dtype)
            positions = torch.arange(target_probs.shape[1])[None, :]
            verified = positions < torch.from_numpy(np.asarray(draft_len))[:, None]  # rows that verify a draft
            verified &= target_probs.sum(-1) > 0  # rows without mass stay: they finish as no_token
            target_probs = torch.where(verified[..., None], hot, target_probs)
        super().accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)


@zoo_entry(
    verdict=Verdict.GREEDY_ONLY, mechanism="verify-argmax-bonus-sampled", showcases=("plain", "temp_topk"), tv=0.9
)
def argmax_verified_sampled_bonus(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Every position that verifies a draft takes the target's argmax; only the bonus token is sampled (ATOM PR #2318).

    Unlike ``argmax_verify``, the row after the last draft (the bonus) keeps the temperature and truncation: the
    acceptance test and the residual see one-hot target rows, so a round emits the target's argmax at every verified
    position (the accepted draft when it is the argmax, the argmax recovered otherwise) and a sampled token only
    after full acceptance.

    Verdict: greedy-only. At temperature 0 every row is one-hot already, so nothing changes. At temperature > 0 the
    output is greedy up to each fully accepted round's bonus: a law unlike the target's, and unlike
    ``argmax_verify``'s single outcome (its certificates show several outcomes per prompt).
    """
    return _ArgmaxVerifiedSampledBonus(target, draft, entropy=entropy)
