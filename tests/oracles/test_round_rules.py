"""The round law's row cache: an AR draft's row is shared by every split of a history into committed tokens and
drafts, and sharing it changes no number of the acceptance law."""

import numpy as np
import pytest

from specverify.oracles import draft_near, make_vocab, random_target
from specverify.oracles.acceptance_rounds import acceptance_law
from specverify.oracles.round_rules import RoundContext
from specverify.params import SamplingParams


class SplitKeyed:
    """The same AR draft behind ``proposal_logits``: the round law then keys its rows by (committed, drafted)."""

    def __init__(self, model):
        self.model, self.vocab = model, model.vocab

    def proposal_logits(self, history, drafted):
        return self.model.logits([tuple(history) + tuple(drafted)])[0]


@pytest.mark.parametrize(
    "params",
    [SamplingParams(max_tokens=4), SamplingParams(max_tokens=4, min_tokens=2, temperature=0.8, top_k=5)],
)
def test_sharing_rows_across_splits_changes_no_number(params):
    target = random_target(make_vocab(6), seed=4, eos_bias=-0.5)
    draft = draft_near(target, distance=0.4, seed=9)
    shared = acceptance_law(target, draft, (0, 1), params, 3)
    split = acceptance_law(target, SplitKeyed(draft), (0, 1), params, 3)
    for field in ("first_round", "_mean", "_cov"):
        assert np.array_equal(getattr(shared, field), getattr(split, field)), field
    assert shared.outcome_law == split.outcome_law


def test_one_row_per_history():
    target = random_target(make_vocab(6), seed=4)
    ctx = RoundContext(target, draft_near(target, distance=0.4, seed=9), (0,), SamplingParams(max_tokens=4), 2)
    row = ctx.draft_row((1,), (2,))
    assert ctx.draft_row((1, 2), ()) is row
    # computed with its siblings (the parent's other unfinished children), keyed by history alone
    assert set(ctx._draft) == {(1, t) for t in range(6) if t != 5}


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(max_tokens=4),
        SamplingParams(max_tokens=4, min_tokens=2, temperature=0.7, top_p=0.9, repetition_penalty=1.3),
        SamplingParams(max_tokens=4, frequency_penalty=0.4, presence_penalty=0.2, top_k=3, min_p=0.05, stop=("ab",)),
        SamplingParams(max_tokens=3, temperature=0.0, bad_token_ids=(2,)),
    ],
)
def test_batched_rows_are_the_single_history_rows(params):
    """A row computed with its siblings is the row of its history alone, bit for bit (no tolerance)."""
    target = random_target(make_vocab(6), seed=4, eos_bias=-0.5)
    draft = draft_near(target, distance=0.4, seed=9)
    ctx = RoundContext(target, draft, (0, 1), params, 2)
    for g in [(), (0,), (3,), (0, 2), (4, 4), (1, 0, 3)]:
        alone = RoundContext(target, draft, (0, 1), params, 2)
        assert np.array_equal(ctx.target_row(g), alone._probs(target.logits([(0, 1) + g])[0], g)), g
        assert np.array_equal(ctx.draft_row(g[:1], g[1:]), alone._probs(draft.logits([(0, 1) + g])[0], g)), g
