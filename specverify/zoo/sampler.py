"""Zoo entries that feed the sampler the wrong thing: a constant coin, a probability row mutated in place,
probabilities where it expects logits, greedy ties broken by the highest index (issue 45's field reports).

Greedy derivations use docs/design.md's rule: at temperature 0 the processed rows are one-hot at the argmax (lowest
index on ties), so the reference accepts a draft x iff x is the target's argmax y, and a rejection emits y.
"""

from __future__ import annotations

import torch

from specverify.enums import Verdict
from specverify.reference.vectorized import VectorizedDecoder
from specverify.sampling import Purpose, residual_probs, sample_from_uniforms
from specverify.zoo._hooks import RowAware
from specverify.zoo._registry import zoo_entry

__all__ = ["constant_accept_coin", "probs_mutated_in_place", "probs_passed_as_logits", "greedy_ties_last_index"]


class _ConstantCoin(VectorizedDecoder):
    def uniforms(self, st, rows, offset, purpose):
        u = super().uniforms(st, rows, offset, purpose)
        return torch.zeros_like(u) if purpose == Purpose.ACCEPT else u  # the coin a stub left at 0


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="constant-acceptance-coin", showcases=("plain",), tv=0.53)
def constant_accept_coin(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The acceptance coin is the constant u = 0: every draft with p(x) > 0 is kept (vllm-ascend PR #13470).

    At temperature > 0 every draft the target does not forbid is accepted (acceptance 1.0), so the output follows the
    draft's law, not the target's.

    Verdict: greedy-only. At temperature 0 the target row is one-hot at y: p(x) > 0 iff x = y, the reference's own
    test, so greedy output is kept; at temperature > 0 the law is the draft's.
    """
    return _ConstantCoin(target, draft, entropy=entropy)


class _MutatedInPlace(VectorizedDecoder):
    def recover(self, target_row, draft_row, u):  # [n, V], [n, V], [n] -> [n]
        # the acceptance step divided the target row by q in place (where q > 0) to form its ratios
        ratios = torch.where(draft_row > 0, target_row / draft_row.clamp_min(1e-300), target_row)
        return sample_from_uniforms(residual_probs(ratios, draft_row), u)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="probs-mutated-in-place", showcases=("plain",), tv=0.21)
def probs_mutated_in_place(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The ratio p / q is computed in place in the target row, which the recovery step then reads (``probs.div_(q)``).

    vllm-ascend PR #2881 and vLLM PR #16952: the acceptance step divided the probability tensor by the draft's in
    place, and the residual read the divided tensor: recovered tokens come from norm((p / q - q)+), not norm((p - q)+).

    Verdict: greedy-only. At temperature 0 a rejection has p one-hot at y and q one-hot at x ≠ y: p / q is 0 at x
    and p elsewhere, so the residual is still one-hot at y; at temperature > 0 recovered tokens follow a wrong law.
    """
    return _MutatedInPlace(target, draft, entropy=entropy)


class _ProbsAsLogits(RowAware):
    def bonus(self, target_row, u):
        st, _, _ = self.draw
        if st.params.temperature == 0:  # the greedy sampler takes the argmax, which softmax keeps
            return super().bonus(target_row, u)
        return super().bonus(torch.softmax(target_row, -1), u)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="probs-passed-as-logits", showcases=("plain", "temp_topk"), tv=0.069)
def probs_passed_as_logits(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The bonus sampler is handed probabilities where it expects logits and applies softmax again (vllm-ascend #6685).

    After an interface change the caller passed the processed probabilities to a sampler that takes logits: the bonus
    token is drawn from softmax(p), which is flatter than p and gives tokens the target removed positive mass.

    Verdict: greedy-only. At temperature 0 the sampler takes the argmax, and softmax keeps it; at temperature > 0
    the bonus token's law is wrong (with truncation, outcomes of exact probability 0 appear).
    """
    return _ProbsAsLogits(target, draft, entropy=entropy)


class _TiesLastIndex(VectorizedDecoder):
    def law(self, st, logits, prov, num_generated, params=None):  # [n, V] -> [n, V]
        probs = super().law(st, logits, prov, num_generated, params)
        if (st.params if params is None else params).temperature != 0:
            return probs
        tied = logits == logits.max(-1, keepdim=True).values
        at_max = tied.gather(1, probs.argmax(-1, keepdim=True))[:, 0] & (tied.sum(-1) > 1)
        if not at_max.any():
            return probs
        last = logits.shape[-1] - 1 - tied.flip(-1).to(torch.int8).argmax(-1)  # an argmax that scans from the end
        hot = torch.nn.functional.one_hot(last, logits.shape[-1]).to(probs.dtype)
        return torch.where(at_max[:, None], hot, probs)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="greedy-tie-highest-index", showcases=("ties",))
def greedy_ties_last_index(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Greedy argmax keeps the highest index among exactly tied logits, not the lowest (a reduction from the end).

    The canonical rule (docs/design.md) makes the lowest index win a tie. The toy families keep every argmax gap at
    ≥ 1e-3, so only a scenario with exact ties (``greedy-ties``) can see this; every other scenario passes it.

    Verdict: approximate. On a greedy path that crosses an exact tie the decoder emits the other tied token: greedy
    output differs. Sampling is untouched (TV 0 away from temperature 0).
    """
    return _TiesLastIndex(target, draft, entropy=entropy)
