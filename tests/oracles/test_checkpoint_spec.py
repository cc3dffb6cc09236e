"""The checkpoint specs are light plain data: scenario matrices name their pairs without torch or transformers."""

import subprocess
import sys

import pytest

from specverify.errors import InvalidArgument
from specverify.oracles import checkpoint_spec as cs


def test_specs_and_their_keys_import_neither_torch_nor_transformers():
    code = (
        "import sys\n"
        "from specverify.oracles.checkpoint_spec import CheckpointPairSpec, CheckpointSpec\n"
        "CheckpointPairSpec(CheckpointSpec(seed=3), draft_sigma=0.1).key()\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_keys_name_the_same_directories_as_before_the_move():
    # the cache directories of existing users: a new digest rebuilds every checkpoint, so only a FORMAT_VERSION bump
    # may change them (2: max_position_embeddings 128; version 1 named 1531d8576eb4e9c82bff and de9c72355eef3dbfd525)
    assert cs.FORMAT_VERSION == 2
    assert cs.CheckpointSpec().key() == "bb504ce8caf9e8daa462"
    assert cs.CheckpointPairSpec().key() == "aac94da8573d2dda3158"


def test_the_vocabulary_sizes_are_the_toy_vocabulary_s():
    models = pytest.importorskip("specverify.oracles.models")
    accepted = []
    for size in range(0, 20):
        try:
            models.make_vocab(size)
            accepted.append(size)
        except InvalidArgument:
            pass
    assert accepted == list(cs.TOY_VOCAB_SIZES) == list(range(2, len(models.TOKEN_STRINGS) + 2))
    for size in (1, 17, True):
        with pytest.raises(InvalidArgument, match="vocab_size"):
            cs.CheckpointSpec(vocab_size=size)
    assert cs.CheckpointSpec(vocab_size=8).vocab == models.make_vocab(8)


def test_the_recipe_reads_specs_by_their_fields_and_refuses_anything_else(tmp_path):
    ck = pytest.importorskip("specverify.oracles.checkpoint")
    with pytest.raises(InvalidArgument, match="must be a CheckpointSpec"):
        ck.target_dir(cs.CheckpointPairSpec(), root=tmp_path)  # a pair is not a target
    with pytest.raises(InvalidArgument, match="must be a CheckpointPairSpec"):
        ck.draft_dir(cs.CheckpointSpec(), root=tmp_path)
