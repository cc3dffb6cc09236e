"""The draft heads of vLLM's head methods (``specverify.adapters.vllm.heads``, ``head_math``) without vLLM: built
beside the target, deterministic, checked, and fitted against a forward of the target that matches its oracle. The
methods on a real engine: test_methods_engine.py."""

import json

import pytest

from specverify.adapters.vllm import head_math as hm
from specverify.adapters.vllm import heads
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
from specverify.errors import InvalidArgument

HEADS = heads.HEAD_METHODS


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


def test_the_target_forward_of_the_head_fit_matches_the_oracle(pair):
    """The heads are fitted against a torch forward of the target: it is the oracle's (float64) to float32 rounding."""
    import torch

    target = hm.load_target(pair.target.path)
    ids = torch.tensor([[0, 1, 2, 3, 4, 0, 1], [3, 3, 2, 1, 0, 4, 4]])
    logits = hm.target_forward(target, ids)[0].double()  # [2, 7, V]
    prefixes = [tuple(row[: i + 1].tolist()) for row in ids for i in range(ids.shape[1])]
    want = pair.target.logits(prefixes).reshape(2, 7, -1)
    assert float((logits - want).abs().max()) < 1e-4


def test_heads_are_built_for_the_target(pair):
    """Each head sits beside the target, in the target's vocabulary, with the config vLLM reads; the fitted heads'
    first drafts agree with the target's argmax (Medusa: the sampled token) far above chance, 1 / V."""
    for method in HEADS:
        path = heads.head_for(method, pair.target)
        config = json.loads((path / "config.json").read_text())
        assert config["vocab_size"] == pair.target.vocab.size and path.parent == pair.target.path.parent
        agreement = heads.first_draft_agreement(path)
        assert (agreement is None) == (method == "dflash")
        assert agreement is None or agreement > 2 / pair.target.vocab.size
    eagle3 = json.loads((heads.head_for("eagle3", pair.target) / "config.json").read_text())
    assert eagle3["eagle_aux_hidden_state_layer_ids"] == [0, 1]
    dflash = json.loads((heads.head_for("dflash", pair.target) / "config.json").read_text())
    assert dflash["dflash_config"] == {"target_layer_ids": [0], "mask_token_id": pair.target.vocab.eos_token_id}


def test_a_head_build_is_deterministic(pair, tmp_path):
    spec = heads.HeadSpec("medusa", CHECKPOINT_PAIRS["main"].target, steps=20)
    first = heads.head_dir(spec, root=tmp_path / "a") / "model.safetensors"
    second = heads.head_dir(spec, root=tmp_path / "b") / "model.safetensors"
    assert first.read_bytes() == second.read_bytes()


def test_head_specs_are_checked(pair):
    with pytest.raises(InvalidArgument, match="method='lookahead' must be one of"):
        heads.HeadSpec("lookahead")
    with pytest.raises(InvalidArgument, match="not fitted"):
        heads.HeadSpec("dflash", steps=10)
    with pytest.raises(InvalidArgument, match="no specverify.json"):
        heads.head_for("eagle", object())
