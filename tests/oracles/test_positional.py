"""The position-aware toy target: its cache reads the same law as its pure function and crops exactly; an entry
given another position is another law (what a tree verified at the wrong positions reads)."""

import numpy as np
import pytest
import torch

from specverify.errors import InvalidArgument
from specverify.oracles.models import make_vocab
from specverify.oracles.positional import positional_target
from specverify.oracles.toy_hash import _ROOT_KV


@pytest.fixture(scope="module")
def target():
    return positional_target(make_vocab(5), seed=3)


def test_the_cache_reads_the_pure_function_and_crops_exactly(target):
    tokens = np.random.default_rng(0).integers(0, 4, size=(4, 7))
    cache = target.new_batch_cache(4, 10)
    logits = cache.forward(np.arange(4), tokens)
    for r in range(4):
        want = target.logits([tokens[r, : j + 1].tolist() for j in range(7)])
        assert torch.equal(logits[r], want)
    cache.crop(np.arange(4), np.full(4, 3))
    assert torch.equal(cache.forward(np.arange(4), tokens[:, 3:]), logits[:, 3:])


def test_an_entry_at_another_position_is_another_law(target):
    root = np.array([_ROOT_KV], dtype=np.uint64)
    at = [target.head(target.step_kv(root, np.array([1]), np.array([p]))) for p in (0, 1)]
    assert not torch.equal(at[0], at[1]) and torch.equal(at[0], target.logits([[1]]))
    with pytest.raises(InvalidArgument, match="needs each token's position"):
        target.step_kv(root, np.array([1]))
