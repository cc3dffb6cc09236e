"""The llama.cpp adapter's tests: the ``*_engine.py`` modules need llama.cpp (llama_cpp and gguf, and its executables
in ``$SPECVERIFY_LLAMACPP_BIN``: each test skips without what it needs; .ci/llamacpp runs them), every other module
runs anywhere, the main suite included."""

from pathlib import Path

import pytest


@pytest.fixture
def gguf_stand_in(monkeypatch):
    """The GGUF export (which needs ``gguf``) stood in by a file name, for decoders whose engine is a stand-in too."""
    from specverify.adapters.llamacpp import example, server

    def gguf_file(model, pieces="toy"):
        return Path("/stand-in") / f"{getattr(model, 'path', 'model')}.{pieces}.gguf"

    monkeypatch.setattr(server, "gguf_file", gguf_file)
    monkeypatch.setattr(example, "gguf_file", gguf_file)
