"""A toy target with exact ties (``tie_rate``): tied rows hold two equal maxima, the other rows are unchanged, and
the greedy law takes the lower index of a tie (docs/design.md)."""

import torch

from specverify.oracles import greedy_outcome
from specverify.oracles.models import make_vocab, random_target
from specverify.params import SamplingParams
from specverify.sampling import next_token_probs


def test_tied_rows_have_two_equal_maxima_and_the_others_are_unchanged():
    plain, tied = (random_target(make_vocab(5), seed=3, tie_rate=rate) for rate in (0.0, 0.5))
    top = tied._table.topk(2, dim=-1).values
    ties = top[:, 0] == top[:, 1]
    assert 0.4 < float(ties.double().mean()) < 0.6
    assert torch.equal(tied._table[~ties], plain._table[~ties])
    assert not bool((plain._table.topk(2, dim=-1).values.diff(dim=-1) == 0).any())


def test_greedy_takes_the_lowest_index_of_a_tie():
    target = random_target(make_vocab(5), seed=3, tie_rate=1.0)
    params = SamplingParams(temperature=0.0, max_tokens=1)
    for prompt in [(0,), (1, 2), (3, 0, 1)]:
        logits = target.logits([prompt])[0]
        tied = torch.nonzero(logits == logits.max())[:, 0]
        assert tied.numel() == 2
        assert int(next_token_probs(logits, params, prompt=prompt, generated=()).argmax()) == int(tied[0])
        assert greedy_outcome(target, prompt, params)[0][0] == int(tied[0])
