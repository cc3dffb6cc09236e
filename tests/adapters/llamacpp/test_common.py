"""What the llama.cpp decoders share (``specverify.adapters.llamacpp.common``): seeds and the executables."""

import numpy as np
import pytest

from specverify.adapters.llamacpp.common import BIN_ENV, executable, seed32


def test_seed32_is_a_uint32_and_never_the_default_seed():
    seeds = {seed32(s, None) for s in range(2000)}
    assert len(seeds) == 2000 and max(seeds) < 0xFFFFFFFF
    rng = np.random.default_rng(0)
    assert seed32(None, rng) != seed32(None, rng)


def test_missing_executables_name_the_variable(monkeypatch):
    executable.cache_clear()
    monkeypatch.delenv(BIN_ENV, raising=False)
    with pytest.raises(RuntimeError, match=BIN_ENV):
        executable("llama-server")
    monkeypatch.setenv(BIN_ENV, "/nonexistent")
    with pytest.raises(RuntimeError, match="no executable"):
        executable("llama-server")
    executable.cache_clear()
