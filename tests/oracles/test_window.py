"""The sliding-window toy target: its cache reads the same law as its pure function, crops exactly, and the law
depends on the last ``window`` tokens only."""

import numpy as np
import pytest
import torch

from specverify.errors import InvalidArgument
from specverify.oracles.models import make_vocab
from specverify.oracles.window import window_target


@pytest.fixture(scope="module")
def target():
    return window_target(make_vocab(5), seed=3, window=3)


def test_the_cache_reads_the_pure_function_and_crops_exactly(target):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 4, size=(6, 9))
    cache = target.new_batch_cache(6, 16)
    cache.fill(np.arange(6), tokens[0, :2])  # every row starts from one prompt, then its own tokens
    rows = np.arange(6)
    logits = cache.forward(rows, tokens[:, 2:])  # [6, 7, V]
    for r in range(6):
        history = [int(t) for t in tokens[0, :2]] + [int(t) for t in tokens[r, 2:]]
        want = target.logits([history[: j + 1] for j in range(2, 9)])
        assert torch.equal(logits[r], want)
    cache.crop(rows, np.full(6, 4))  # a rollback: the same tokens again give the same rows
    again = cache.forward(rows, tokens[:, 4:])
    assert torch.equal(again, logits[:, 2:])


def test_the_law_reads_the_last_window_tokens_only(target):
    a, b = target.logits([(0, 1, 2, 3, 1)]), target.logits([(2, 2, 3, 1)])  # same last three tokens
    assert torch.equal(a, b) and not torch.equal(a, target.logits([(0, 1, 2, 1, 1)]))


def test_a_window_below_one_is_refused():
    with pytest.raises(InvalidArgument, match=r"window=0 must be an int >= 1"):
        window_target(make_vocab(5), seed=3, window=0)
