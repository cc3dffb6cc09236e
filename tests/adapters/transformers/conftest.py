"""The transformers adapter's tests, all of which need transformers (the hf extra: the main suite's venv has it, so
they run there), and the model pairs they share."""

import pytest

from specverify.oracles.checkpoint_spec import CheckpointPairSpec, CheckpointSpec
from specverify.oracles.pairs import ToyPairSpec


@pytest.fixture(scope="module")
def checkpoint_pair():
    return CheckpointPairSpec(CheckpointSpec(), draft_sigma=0.005).build()


@pytest.fixture(scope="module")
def toy_pair():
    return ToyPairSpec().build()
