"""The recurrent toy target: its cache reads the law of its pure function, keeps one state per row that no crop
undoes, and puts a row back only to a checkpoint; a decoder written for a KV cache is refused there loudly."""

import numpy as np
import pytest
import torch

from specverify.certification.matrix.scenarios import matrix
from specverify.errors import InvalidArgument
from specverify.oracles import make_vocab, random_target
from specverify.oracles.recurrent import is_recurrent, recurrent_target
from specverify.protocol import Request
from specverify.reference import VectorizedDecoder, make_decoder

TARGET = recurrent_target(make_vocab(4), seed=3)


def test_its_law_is_the_toy_model_s_and_its_cache_reads_it():
    assert is_recurrent(TARGET) and not is_recurrent(random_target(make_vocab(4), seed=3))
    prefixes = [(0, 1, 2), (2, 2, 0, 1, 3)]
    assert torch.equal(TARGET.logits(prefixes), random_target(make_vocab(4), seed=3).logits(prefixes))
    cache = TARGET.new_batch_cache(2, 8)
    cache.fill(np.array([0, 1]), np.array([0, 1]))
    logits, states = cache.forward_states(np.array([0, 1]), np.array([[2, 0], [2, 1]]))
    want = TARGET.logits([(0, 1, 2), (0, 1, 2, 0), (0, 1, 2), (0, 1, 2, 1)]).reshape(2, 2, -1)
    assert torch.equal(logits, want) and states.shape == (2, 2)
    assert list(cache.lengths) == [4, 4]


def test_a_rollback_is_a_restore_of_a_checkpoint_never_a_crop():
    cache = TARGET.new_batch_cache(1, 8)
    rows = np.array([0])
    cache.forward(rows, np.array([[0, 1]]))
    _, states = cache.forward_states(rows, np.array([[2, 0, 1]]))
    cache.crop(rows, np.array([5]))  # the current length: a no-op
    with pytest.raises(InvalidArgument, match="restore"):
        cache.crop(rows, np.array([3]))
    cache.restore(rows, states[:, 0], np.array([3]))  # back to the state after (0, 1, 2)
    after = cache.forward(rows, np.array([[1]]))[0, 0]
    assert torch.equal(after, TARGET.logits([(0, 1, 2, 1)])[0])
    with pytest.raises(InvalidArgument, match="checkpoint"):
        cache.restore(rows, states[:, 0], np.array([9]))


def test_a_kv_cache_decoder_is_refused_and_the_recurrent_reference_is_chosen():
    pair = matrix("toy")["recurrent"].models()
    requests = [Request((0, 1), matrix("toy")["recurrent"].params, 3, seed=s) for s in range(20)]  # rejections
    with pytest.raises(InvalidArgument, match="recurrent"):
        VectorizedDecoder(pair.target, pair.draft)(requests)
    assert "recurrent" in make_decoder(pair.target, pair.draft).capabilities
    plain = matrix("toy")["temperature-1"].models()
    assert "recurrent" not in make_decoder(plain.target, plain.draft).capabilities
