"""The GGUF export of the checkpoint models (``specverify.adapters.boundary.gguf_export``) without gguf: the RoPE
row order and the one-letter pieces. The files against llama.cpp itself:
tests/adapters/llamacpp/test_gguf_export_engine.py."""

import numpy as np
import pytest

from specverify.adapters.boundary import gguf_export as lg


def test_rope_rows_interleaves_each_head():
    w = np.arange(16).reshape(16, 1)  # two heads of 8
    assert lg.rope_rows(w, 2)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]


def test_char_pieces_round_trip():
    tokens = [0, 4, 3, 5, 1]
    assert lg.char_tokens(lg.char_text(tokens, eos=5), eos=5) == tokens
    with pytest.raises(ValueError):
        lg.char_tokens("AZ", eos=5)
