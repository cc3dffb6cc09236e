"""The exact acceptance oracle: every rule it models implies the exact output law, its first round agrees with the
certifier's independent first-round law, and block verification reproduces the paper's figures."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from specverify.errors import InvalidArgument
from specverify.oracles import exact_law, make_vocab
from specverify.oracles.acceptance_first import first_round_acceptance_law
from specverify.oracles.acceptance_rounds import acceptance_law, first_round_law
from specverify.oracles.drafts import DRAFT_FAMILIES, NgramDraft, ngram_proposal
from specverify.params import SamplingParams

from ._families import CHAINS, PROMPT, TREES, VOCAB, draft, target

PARAMS = {
    "plain": SamplingParams(max_tokens=4),
    "processors": SamplingParams(max_tokens=4, repetition_penalty=1.5, temperature=0.7, top_k=3, stop=("ab",)),
}


def _implied_law_error(law, acceptance) -> float:
    exact = dict(zip(law.outcomes, law.probs))
    keys = set(exact) | set(acceptance.outcome_law)
    return max(abs(exact.get(k, 0.0) - acceptance.outcome_law.get(k, 0.0)) for k in keys)


CASES = [(c, "chain") for c in CHAINS] + [(c, "block") for c in CHAINS] + [(t, None) for t in TREES]
FAST_PROCESSOR_CASES = {("markov", "chain"), ("ngram", "block"), ("tree-without-replacement", None)}


@pytest.mark.parametrize(
    "name, rule, params",
    [(n, r, "plain") for n, r in CASES]
    + [
        pytest.param(n, r, "processors", marks=[] if (n, r) in FAST_PROCESSOR_CASES else [pytest.mark.slow])
        for n, r in CASES
    ],
)
def test_every_rule_implies_the_exact_law(name, rule, params):
    """Chaining the enumerated rounds gives plain target sampling's law exactly: each rule is exact."""
    params = PARAMS[params]
    acceptance = acceptance_law(target(), draft(name), PROMPT, params, 3, rule=rule)
    assert _implied_law_error(exact_law(target(), PROMPT, params), acceptance) < 1e-12
    assert abs(acceptance.first_round.sum() - 1) < 1e-12 and acceptance.expected_rounds >= 1
    assert np.all(acceptance.position_accepted <= acceptance.position_verified + 1e-12)
    assert acceptance.tokens_per_call >= 1.0


def test_first_round_agrees_with_the_certifiers_independent_law():
    for params in PARAMS.values():
        ours = first_round_law(target(), draft("ar"), PROMPT, params, 3)
        theirs = first_round_acceptance_law(target(), draft("ar"), PROMPT, params, 3)
        assert np.abs(ours - theirs).max() < 1e-12
        full = acceptance_law(target(), draft("ar"), PROMPT, params, 3).first_round
        assert np.abs(ours - full).max() < 1e-12


def test_block_verification_accepts_at_least_as_much_as_the_chain_rule():
    for name in CHAINS:
        chain = first_round_law(target(), draft(name), PROMPT, PARAMS["plain"], 3)
        block = first_round_law(target(), draft(name), PROMPT, PARAMS["plain"], 3, rule="block")
        assert block @ np.arange(4) >= chain @ np.arange(4) - 1e-12, name


@dataclass(frozen=True, eq=False)
class ContextFree:
    """A model whose next-token law ignores the prefix (the paper's motivating example); EOS has probability 0."""

    probs: tuple
    vocab: object = make_vocab(3)

    def logits(self, prefixes):
        row = torch.log(torch.tensor(self.probs + (0.0,), dtype=torch.float64))
        return row.expand(len(prefixes), -1)


def test_block_verification_reproduces_the_papers_example():
    """Sun et al. 2024, section 2: target (1/3, 2/3), draft (2/3, 1/3), γ = 2: 10/9 vs 11/9 accepted per round."""
    big, small = ContextFree((1 / 3, 2 / 3)), ContextFree((2 / 3, 1 / 3))
    params = SamplingParams(max_tokens=8)
    accepted = np.arange(3)
    chain = first_round_law(big, small, (0,), params, 2, rule="chain")
    block = first_round_law(big, small, (0,), params, 2, rule="block")
    assert abs(chain @ accepted - 10 / 9) < 1e-12 and abs(block @ accepted - 11 / 9) < 1e-12


def test_the_product_rule_is_not_the_exact_expectation_when_requests_finish_inside_blocks():
    acceptance = acceptance_law(target(0.8), draft("ar", 0.8), PROMPT, SamplingParams(max_tokens=4), 3)
    rates = acceptance.acceptance_rates()
    assert np.all((rates >= 0) & (rates <= 1))
    assert abs(acceptance.product_rule() - acceptance.tokens_per_call) > 0.05


def test_tree_shapes_of_a_request_override_the_drafts():
    wide = first_round_law(target(), draft("tree-iid"), PROMPT, PARAMS["plain"], 3, tree=(4, 1, 1))
    narrow = first_round_law(target(), draft("tree-iid"), PROMPT, PARAMS["plain"], 3, tree=(1, 1, 1))
    chain = first_round_law(target(), draft("ar"), PROMPT, PARAMS["plain"], 3)
    assert np.abs(narrow - chain).max() < 1e-12  # a one-child tree is the chain
    assert wide[0] < narrow[0]  # more first-level candidates, fewer first rejections


def test_ngram_proposals_are_the_latest_longest_match():
    assert ngram_proposal((1, 2, 3, 1, 2), max_ngram=3, num_tokens=4) == (3, 1, 2)
    assert ngram_proposal((1, 2, 3, 4), max_ngram=3, num_tokens=4) == ()
    assert ngram_proposal((5, 1, 5, 2, 5), max_ngram=1, num_tokens=2) == (2, 5)
    row = NgramDraft(VOCAB).proposal_logits((0, 1, 0), ())
    assert row.tolist() == [float("-inf"), 0.0, float("-inf"), float("-inf"), float("-inf")]


def test_bad_arguments_raise_invalid_argument():
    with pytest.raises(InvalidArgument, match="rule='tree' needs a tree draft"):
        acceptance_law(target(), draft("ar"), PROMPT, PARAMS["plain"], 3, rule="tree")
    with pytest.raises(InvalidArgument, match=r"rule='fancy' must be one of"):
        acceptance_law(target(), draft("ar"), PROMPT, PARAMS["plain"], 3, rule="fancy")
    with pytest.raises(InvalidArgument, match="num_draft_tokens=0"):
        acceptance_law(target(), draft("ar"), PROMPT, PARAMS["plain"], 0)
    law = acceptance_law(target(), draft("ar"), PROMPT, PARAMS["plain"], 3)
    with pytest.raises(InvalidArgument, match=r"outside \[0, 3\]"):
        law.rounds_pvalue({7: 1}, 1)
    with pytest.raises(InvalidArgument, match="n=0"):
        law.tokens_per_call_interval(0)
    assert set(DRAFT_FAMILIES) == {"ar", "heads", "markov", "mtp", "ngram", "tree"}
