"""The reference decoders of every family: their measured acceptance over every round matches the exact
expectation, tree and chain agree where they must, and the family caches agree with the pure laws."""

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify.errors import InvalidArgument
from specverify.oracles import exact_law
from specverify.oracles.acceptance_rounds import acceptance_law
from specverify.oracles.drafts import NgramDraft, TreeDraft, ngram_proposal
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference import BlockDecoder, FamilyChainDecoder, TreeDecoder, VectorizedDecoder, make_decoder
from tests.helpers import pooled_pvalue

from ._families import CHAINS, PROMPT, TREES, VOCAB, draft, target

ALPHA = 1e-6
N = 20_000
PARAMS = SamplingParams(max_tokens=5)
CASES = [(c, FamilyChainDecoder, None) for c in CHAINS] + [(c, BlockDecoder, "block") for c in ("ar", "mtp", "ngram")]
CASES += [(t, TreeDecoder, None) for t in TREES]
FAST = {
    ("heads", FamilyChainDecoder),
    ("ngram", FamilyChainDecoder),
    ("mtp", BlockDecoder),
    ("tree-top-k", TreeDecoder),
}


@pytest.mark.parametrize(
    "name, cls, rule",
    [pytest.param(*c, marks=[] if c[:2] in FAST else [pytest.mark.slow], id=f"{c[0]}-{c[1].__name__}") for c in CASES],
)
def test_measured_acceptance_matches_the_exact_expectation(name, cls, rule):
    """Outcomes, the all-round histogram, tokens per target call and per-position counts, each at α = 1e-6."""
    t = target(0.8)
    d = draft(name, 0.8)
    counts = cls(t, d, entropy=0).sample(Request(PROMPT, PARAMS, 3, seed=11), N)
    pvalue, _, impossible = pooled_pvalue(counts.outcomes, exact_law(t, PROMPT, PARAMS))
    assert impossible == 0 and pvalue > ALPHA
    law = acceptance_law(t, d, PROMPT, PARAMS, 3, rule=rule)
    assert law.rounds_pvalue(counts.rounds, N) > ALPHA, (counts.rounds, law.rounds_mean * N)
    tokens = sum(len(o[0]) * c for o, c in counts.outcomes.items())
    low, high = law.tokens_per_call_interval(N, alpha=ALPHA)
    assert low <= tokens / sum(counts.rounds.values()) <= high
    z = scipy.stats.norm.isf(ALPHA / (4 * 3))  # Bonferroni over 2 counts at each of 3 positions, two-sided
    for k, (verified, accepted) in enumerate(counts.positions):
        for seen, mean in ((verified, law.position_verified[k]), (accepted, law.position_accepted[k])):
            # a count per request is at most the rounds of a request (<= 5): variance <= 25 per request
            assert abs(seen / N - mean) <= z * 5 / np.sqrt(N)
    first = np.array([counts.accepted.get(m, 0) for m in range(4)])
    assert np.abs(first / N - law.first_round).max() < 0.02


def test_a_one_child_iid_tree_draws_what_the_chain_reference_draws():
    requests = [Request(PROMPT, PARAMS, 3, seed=s) for s in range(300)]
    chain = VectorizedDecoder(target(), draft("ar"))(requests)
    tree = TreeDecoder(target(), TreeDraft(draft("ar"), shape=(1, 1, 1)))(requests)
    assert chain == tree


def test_family_chains_on_an_ar_draft_draw_what_the_reference_draws():
    requests = [Request(PROMPT, PARAMS, 2, seed=s) for s in range(300)]
    assert VectorizedDecoder(target(), draft("ar"))(requests) == FamilyChainDecoder(target(), draft("ar"))(requests)


def test_a_requests_tree_shape_overrides_the_drafts():
    t, d = target(), draft("tree-iid")
    request = Request(PROMPT, SamplingParams(max_tokens=4), 3, seed=5, tree=(4, 1, 1))
    counts = TreeDecoder(t, d, entropy=0).sample(request, N)
    assert pooled_pvalue(counts.outcomes, exact_law(t, PROMPT, request.params))[0] > ALPHA
    law = acceptance_law(t, d, PROMPT, request.params, 3, tree=(4, 1, 1))
    assert law.rounds_pvalue(counts.rounds, N) > ALPHA
    other = acceptance_law(t, d, PROMPT, request.params, 3)
    assert law.rounds_pvalue(counts.rounds, N) > other.rounds_pvalue(counts.rounds, N)
    mixed = TreeDecoder(t, d)([request, Request(PROMPT, request.params, 3, seed=5)])
    assert mixed[0] == TreeDecoder(t, d)([request])[0]


def test_make_decoder_picks_the_familys_rule():
    assert type(make_decoder(target(), draft("ar"))) is VectorizedDecoder
    assert type(make_decoder(target(), draft("heads"))) is FamilyChainDecoder
    assert type(make_decoder(target(), draft("tree-top-k"))) is TreeDecoder


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=9), min_size=1, max_size=6))
def test_the_ngram_cache_looks_up_what_the_pure_proposal_gives(histories):
    ngram = NgramDraft(VOCAB, max_ngram=2, max_tokens=3)
    cache = ngram.new_batch_cache(len(histories), 12)
    for row, history in enumerate(histories):
        if len(history) > 1:
            cache.forward(np.array([row]), np.array([history[:-1]]))
    rows = np.arange(len(histories))
    cache.propose(rows, 0, np.array([h[-1] for h in histories]))
    for row, history in enumerate(histories):
        want = ngram_proposal(history, max_ngram=2, num_tokens=3)
        assert tuple(int(t) for t in cache.proposal[row] if t >= 0) == want


def test_tree_requests_and_drafts_are_validated():
    with pytest.raises(InvalidArgument, match=r"tree=\(2, 2\) must be None or a tuple of num_draft_tokens=3"):
        Request(PROMPT, PARAMS, 3, tree=(2, 2))
    with pytest.raises(InvalidArgument, match="must be a tree draft"):
        TreeDecoder(target(), draft("ar"))
    with pytest.raises(InvalidArgument, match="siblings='random' must be one of"):
        TreeDraft(draft("ar"), siblings="random")
