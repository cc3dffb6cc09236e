"""Zoo entries for draft families, trees and block verification, and the approximate modes engines ship.

Each entry runs on its draft family's scenarios (``ZooEntry.drafts``: ``specverify certify specverify.zoo:NAME
--drafts FAMILY``); its tag is the verdict docs/design.md's rules derive there. The labelled-approximate modes keep
greedy output (so the rules give ``greedy-only``) except vLLM's synthetic acceptance (``approximate``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specverify.reference.block import BlockDecoder
from specverify.reference.chain_families import FamilyChainDecoder
from specverify.reference.tree import TreeDecoder
from specverify.reference.vectorized import VectorizedDecoder
from specverify.sampling import Purpose, residual_probs, sample_from_uniforms
from specverify.zoo._hooks import RowAware
from specverify.zoo._registry import zoo_entry

__all__ = [
    "medusa_padding_as_token_0",
    "medusa_independent_paths",
    "tree_slot_not_reordered",
    "block_token_wise_rule",
    "block_draft_probs_none",
    "block_draws_keyed_by_position",
    "bf16_draft_fp32_ratio",
    "draft_sampler_without_temperature",
    "sampled_silently_greedy",
    "silent_plain_fallback",
    "recurrent_state_from_first_block",
    "typical_acceptance",
    "threshold_acceptance",
    "relaxed_top_k_acceptance",
    "synthetic_acceptance",
    "tree_logits_slice_shifted",
    "tree_nodes_at_span_index",
]


class _PaddingAsToken0(TreeDecoder):
    def choose(self, st, rows, depth, p, q, kid_tok, kid_ok):
        return super().choose(st, rows, depth, p, q, kid_tok, np.ones_like(kid_ok))  # padding: token 0, no KV


@zoo_entry(verdict="greedy-only", mechanism="tree-padding-accepted-as-token-0", drafts="tree")
def medusa_padding_as_token_0(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Padded tree nodes (fewer real top-k candidates than the shape) are followed as candidates of token 0.

    Medusa pads short candidate paths with token 0; a target draw of 0 then follows a padded node, whose cache
    entry was never written, so the next position reads a stale row. Greedy keeps one real child per node and
    follows it or emits the argmax; the padded path is reached only when sampling. Verdict: greedy-only
    (``tree-padded``: top-k siblings under a top-k sampling law).
    """
    return _PaddingAsToken0(target, draft, entropy=entropy)


class _IndependentPaths(TreeDecoder):
    def choose(self, st, rows, depth, p, q, kid_tok, kid_ok):
        draws = [self.bonus(p, self.keyed(st, rows, depth, j, Purpose.TARGET)).numpy() for j in range(kid_tok.shape[1])]
        hit = (kid_tok == np.stack(draws, 1)) & kid_ok  # each path matched against its own draw
        choice = np.where(hit.any(1), hit.argmax(1), -1)
        return choice, np.where(choice >= 0, kid_tok[np.arange(rows.size), np.maximum(choice, 0)], draws[0])


@zoo_entry(verdict="greedy-only", mechanism="tree-paths-sampled-independently", drafts="tree")
def medusa_independent_paths(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Nucleus tree verification: every candidate gets its own target draw and the walk keeps one that matched.

    Medusa's nucleus mode samples each path's tokens independently and keeps the longest match: a token that
    appears among the candidates gets several chances, so it is over-represented. Greedy draws are the argmax
    for every candidate alike. Verdict: greedy-only (``tree-top-k``).
    """
    return _IndependentPaths(target, draft, entropy=entropy)


class _SlotNotReordered(TreeDecoder):
    def reorder(self, tree):
        stored, order = super().reorder(tree)
        return replace(stored, slot=tree.slot), order  # parent, position and token moved; slot kept


@zoo_entry(verdict="greedy-only", mechanism="tree-slot-not-reordered", drafts="tree")
def tree_slot_not_reordered(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Tree nodes are reordered (siblings reversed) but their cache slots are not: nodes read other nodes' KV.

    The seed: a tree's parent, position, token and slot arrays must be reordered together. Siblings of a greedy
    tree are the same token (i.i.d. draws from a point mass), so the swapped slots hold identical entries; sampled
    siblings differ. Verdict: greedy-only (the validator of ``tree_data`` catches it directly).
    """
    return _SlotNotReordered(target, draft, entropy=entropy)


class _BlockTokenWise(BlockDecoder):
    def block_weights(self, drafts, draft_probs, target_probs, size):
        w, _ = super().block_weights(drafts, draft_probs, target_probs, size)
        return w, w.clone()  # the stop weight is the cumulative ratio alone

    def stop_residual(self, target_row, draft_row, weight):
        return residual_probs(target_row, draft_row)


@zoo_entry(verdict="greedy-only", mechanism="block-verify-token-wise-rule", drafts="mtp")
def block_token_wise_rule(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Block verification with the token-wise rule: stop on the cumulative ratio, draw from (p - q)+.

    vllm-ascend #7807 (fixed by PR #7808): the block path used the token-wise acceptance criterion and the
    token-wise residual instead of the paper's h_i and [w p - q]+. Greedy ratios are 0 or 1 either way.
    Verdict: greedy-only.
    """
    return _BlockTokenWise(target, draft, entropy=entropy)


class _BlockDraftProbsNone(BlockDecoder):
    def draft_token_probs(self, drafts, draft_probs):
        return torch.ones(drafts.shape, dtype=torch.float64)

    def block_weights(self, drafts, draft_probs, target_probs, size):
        return super().block_weights(drafts, torch.zeros_like(draft_probs), target_probs, size)

    def stop_residual(self, target_row, draft_row, weight):
        return super().stop_residual(target_row, torch.zeros_like(draft_row), weight)


@zoo_entry(verdict="greedy-only", mechanism="block-verify-draft-probs-none", drafts="ngram")
def block_draft_probs_none(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Block verification of n-gram drafts with draft_probs=None: each draft's probability one, the rows empty.

    vllm-ascend PR #7603: suffix / n-gram drafts carry no draft probabilities; the fallback 1.0 is right for the
    drafted token but the block weights and the residual then see empty draft rows, so a rejected draft can be
    drawn again. Greedy weights are 0 or 1 and the residual's argmax is the target's. Verdict: greedy-only.
    """
    return _BlockDraftProbsNone(target, draft, entropy=entropy)


class _BlockKeyedByPosition(BlockDecoder):
    uniforms = VectorizedDecoder.uniforms


@zoo_entry(verdict="greedy-only", mechanism="block-draws-keyed-by-position", drafts="heads")
def block_draws_keyed_by_position(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Block verification with draws keyed by position only: the next round reuses coins τ depended on.

    Found while writing the block reference: a block consumes coins and drafts past its stop point τ, and τ is
    the last coin below its weight, so those draws are conditioned; the next round starts inside that span and
    reuses them (the chain rule never looks past its first rejection). Greedy coins decide nothing.
    Verdict: greedy-only.
    """
    return _BlockKeyedByPosition(target, draft, entropy=entropy)


class _Bf16Draft(FamilyChainDecoder):
    def draft_laws(self, st, logits, prov, num_generated):
        rounded = logits.to(torch.bfloat16).to(torch.float64)
        return self.law(st, rounded, prov, num_generated), self.law(st, logits, prov, num_generated)


@zoo_entry(verdict="greedy-only", mechanism="draft-bf16-ratio-fp32", drafts="markov")
def bf16_draft_fp32_ratio(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The draft samples from bf16-rounded logits while the ratio divides by the float32 (here float64) law.

    DeepSpec #31. bf16 keeps 8 significant bits: a logit near 100 moves by up to 0.25, so the laws differ by
    several percent where logits are large (``large-logits``: every draft logit offset by 100, the same law); at
    the default toy scales (logits of a few units) the TV is ~0.001, below every level. Greedy keeps the target's
    argmax (a flipped draft argmax has q = 0 in the ratio and is rejected). Verdict: greedy-only.
    """
    return _Bf16Draft(target, draft, entropy=entropy)


class _DraftWithoutTemperature(FamilyChainDecoder):
    def draft_laws(self, st, logits, prov, num_generated):
        greedy = replace(st.params, temperature=0.0)
        return self.law(st, logits, prov, num_generated, greedy), self.law(st, logits, prov, num_generated)


@zoo_entry(verdict="greedy-only", mechanism="draft-sampled-without-temperature", drafts="heads")
def draft_sampler_without_temperature(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The draft sampler is called without the temperature (it drafts the argmax); the ratio divides by the
    tempered law.

    z-lab/dflash #74: a greedy draft against a stochastic target. Under greedy requests both are the argmax.
    Verdict: greedy-only.
    """
    return _DraftWithoutTemperature(target, draft, entropy=entropy)


class _SilentlyGreedy(VectorizedDecoder):
    def law(self, st, logits, prov, num_generated, params=None):
        params = st.params if params is None else params
        return super().law(st, logits, prov, num_generated, replace(params, temperature=0.0))


@zoo_entry(verdict="greedy-only", mechanism="sampled-request-decoded-greedily")
def sampled_silently_greedy(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Sampled requests are silently decoded greedily (every law at temperature 0).

    rMLX #519, pegainfer #512, tpu-inference #1386: the speculative path ignored the sampling parameters. The
    greedy output is the target's. Verdict: greedy-only.
    """
    return _SilentlyGreedy(target, draft, entropy=entropy)


class _SilentPlain(VectorizedDecoder):
    def propose(self, st, rows):
        drafts, draft_probs, draft_len = super().propose(st, rows)
        return drafts, draft_probs, np.where(st.params.temperature > 0, 0, draft_len)  # no draft: plain draws


@zoo_entry(verdict="exact", mechanism="silent-fallback-to-plain")
def silent_plain_fallback(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Sampled requests silently fall back to plain decoding (drafts computed, none verified).

    rMLX #519, pegainfer #512, tpu-inference #1386: plain target sampling is exact, so the verdict is too; the
    certificate shows every sampled round accepting 0 drafts (speculation not observed). Verdict: exact.
    """
    return _SilentPlain(target, draft, entropy=entropy)


class _StateFromFirstBlock(FamilyChainDecoder):
    def rollback(self, st, rows, drafts):
        first = st.target_cache.kv[rows, st.prompt_len[rows] + st.round_start[rows] - 1]  # after block[0]
        super().rollback(st, rows, drafts)
        moved = rows[(st.reason[rows] == 0) & (st.accepted[rows, st.rounds] > 0)]
        st.target_cache.kv[moved, st.target_cache.lengths[moved] - 1] = first[np.isin(rows, moved)]


@zoo_entry(verdict="approximate", mechanism="recurrent-state-from-first-block", drafts="ngram")
def recurrent_state_from_first_block(target, draft, *, entropy=None) -> VectorizedDecoder:
    """After a round with accepted n-gram drafts the target's (recurrent) state is the one after block[0].

    vLLM #40831 (PR #40738): a hybrid target read its state from the first block, not the last accepted one, so
    every round after an acceptance conditions on a shorter history. Greedy n-gram drafts are often accepted, so
    the greedy output moves too. Verdict: approximate.
    """
    return _StateFromFirstBlock(target, draft, entropy=entropy)


# ---------------------------------------------------------------------- approximate modes engines ship, labelled


class _RowRule(RowAware):
    """An acceptance rule that reads the target row of the position being verified (``self.row``)."""

    def uniforms(self, st, rows, offset, purpose):
        if purpose == Purpose.ACCEPT:
            self.row = self.round_probs[0][torch.from_numpy(self.position_of[rows]), offset]
        return super().uniforms(st, rows, offset, purpose)


class _Typical(_RowRule):
    def accept(self, target_p, draft_q, u):
        entropy = -(self.row * torch.log(self.row.clamp_min(1e-300))).sum(-1)
        return target_p > torch.clamp(0.3 * torch.exp(-entropy), max=0.09)  # min(ε, δ·exp(-H))

    def recover(self, target_row, draft_row, u):
        return sample_from_uniforms(target_row, u)


@zoo_entry(verdict="greedy-only", mechanism="typical-acceptance")
def typical_acceptance(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Medusa's typical acceptance (ε = 0.09, δ = 0.3): a draft is kept when p(x) > min(ε, δ·exp(-H(p))), else
    the target's own draw is taken. A labelled approximate mode: greedy keeps the argmax. Verdict: greedy-only."""
    return _Typical(target, draft, entropy=entropy)


class _Threshold(VectorizedDecoder):
    def accept(self, target_p, draft_q, u):
        return (u * draft_q * 0.5 < target_p) | (target_p >= 0.5)  # threshold_acc 0.5, threshold_single 0.5


@zoo_entry(verdict="greedy-only", mechanism="threshold-acceptance")
def threshold_acceptance(target, draft, *, entropy=None) -> VectorizedDecoder:
    """SGLang's threshold acceptance with threshold_acc = threshold_single = 0.5 (< 1): more drafts kept than the
    exact ratio allows. A labelled approximate mode: greedy ratios are 0 or 1. Verdict: greedy-only."""
    return _Threshold(target, draft, entropy=entropy)


class _RelaxedTopK(_RowRule):
    def accept(self, target_p, draft_q, u):
        top = self.row.topk(2, dim=-1).values
        relaxed = (target_p >= top[:, 1]) & (target_p >= top[:, 0] - 0.3)  # in the top 2, within δ of the max
        return relaxed | super().accept(target_p, draft_q, u)


@zoo_entry(verdict="greedy-only", mechanism="relaxed-top-k-acceptance")
def relaxed_top_k_acceptance(target, draft, *, entropy=None) -> VectorizedDecoder:
    """TensorRT-LLM MTP relaxed acceptance (top-2, δ = 0.3): a draft within δ of the target's most likely token is
    kept. A labelled approximate mode: a one-hot row keeps only the argmax. Verdict: greedy-only."""
    return _RelaxedTopK(target, draft, entropy=entropy)


class _Synthetic(VectorizedDecoder):
    def accept(self, target_p, draft_q, u):
        return u < 0.7  # the configured acceptance rate, whatever p and q


@zoo_entry(verdict="approximate", mechanism="synthetic-acceptance")
def synthetic_acceptance(target, draft, *, entropy=None) -> VectorizedDecoder:
    """vLLM's synthetic rejection sampler (acceptance rate 0.7): drafts kept at a fixed rate, a benchmarking mode.
    Drafts that disagree with the target's argmax are kept too. Verdict: approximate."""
    return _Synthetic(target, draft, entropy=entropy)


class _ShiftedSlice(TreeDecoder):
    def walk(self, st, rows, tree, tokens, valid, q_at, p_at):
        shifted = p_at.clone()
        shifted[:, 2:] = p_at[:, 1:-1]  # node c's row read at c (the slice start one short), the root's kept
        return super().walk(st, rows, tree, tokens, valid, q_at, shifted)


@zoo_entry(verdict="approximate", mechanism="tree-logits-slice-shifted", drafts="tree")
def tree_logits_slice_shifted(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Tree rejection sampling reads each node's target row one slot early (TensorRT-LLM PR #15098).

    The logits slice handed to the tree sampler starts one row short: node c is judged, and its children's tokens
    drawn, against the row of node c - 1 (the root's row for the first node).

    Verdict: approximate. At temperature 0, after the first node is accepted its children are judged against the
    root's row, one-hot at the token just emitted: that token is emitted again and greedy output differs.
    """
    return _ShiftedSlice(target, draft, entropy=entropy)


class _SpanIndexPositions(TreeDecoder):
    def node_offset(self, tree, node):
        return node + 1  # the node's index in the flattened tree (its span index), not its depth


@zoo_entry(verdict="approximate", mechanism="tree-position-from-span-index", drafts="tree")
def tree_nodes_at_span_index(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Tree nodes are verified at their index in the flattened tree as rotary position, not their depth (mlxcel PR
    #1214).

    Siblings share a depth but not a span index, so every node but the first child of each level is given a position
    past its own; on a target whose law reads positions its row is the law of another position. A target whose
    entry hashes the prefix (no explicit positions) cannot show it: ``tree-positional`` and
    ``greedy-tree-positional`` can. Verdict: approximate (greedy trees follow a node whose row is wrong).
    """
    return _SpanIndexPositions(target, draft, entropy=entropy)
