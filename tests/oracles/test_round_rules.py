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
    assert ctx.draft_row((1, 2), ()) is row and len(ctx._draft) == 1
