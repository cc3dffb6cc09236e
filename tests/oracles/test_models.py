"""The toy models' pure ``logits(prefixes)`` against the cache API: the oracle's Python-int hash of a prefix is the
decoders' numpy ``step_kv`` chain, bit for bit."""

import numpy as np
import pytest
import torch

from specverify.errors import InvalidArgument
from specverify.oracles import draft_near, make_vocab, random_target
from specverify.oracles.models import _prefix_kv, step_kv

VOCAB = make_vocab(8)
TARGET = random_target(VOCAB, seed=3, eos_bias=-1.0)
DRAFT = draft_near(TARGET, distance=0.5, seed=7)


def _numpy_kv(prefix) -> int:
    h = np.array([TARGET.root_kv], dtype=np.uint64)
    for tok in prefix:
        h = step_kv(h, np.array([tok]))
    return int(h[0])


def test_prefix_kv_is_the_numpy_chain():
    rng = np.random.default_rng(0)
    for _ in range(200):
        prefix = tuple(int(t) for t in rng.integers(0, VOCAB.size, size=int(rng.integers(1, 30))))
        assert _prefix_kv(prefix) == _numpy_kv(prefix), f"prefix {prefix}"


@pytest.mark.parametrize("model", [TARGET, DRAFT], ids=["table", "mixed"])
def test_logits_equal_the_batch_cache(model):
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, VOCAB.size, size=(16, 9))
    cache = model.new_batch_cache(16, 9)
    out = cache.forward(np.arange(16), tokens)  # [16, 9, V]
    for j in range(9):
        want = model.logits([tuple(int(t) for t in row[: j + 1]) for row in tokens])
        assert torch.equal(out[:, j], want)


def test_logits_accept_numpy_ids_and_reject_bad_ones():
    assert torch.equal(TARGET.logits([(np.int64(0), np.int64(5))]), TARGET.logits([(0, 5)]))
    with pytest.raises(InvalidArgument, match="outside the vocabulary"):
        TARGET.logits([(0, 8)])
    with pytest.raises(InvalidArgument, match="outside the vocabulary"):
        TARGET.logits([(0, -1)])
    with pytest.raises(InvalidArgument, match="outside the vocabulary"):
        TARGET.logits([(0, 1.0)])
