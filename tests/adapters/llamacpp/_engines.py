"""What the llama.cpp engine tests need, as skip markers: llama_cpp and gguf installed, and llama.cpp's executables
in ``$SPECVERIFY_LLAMACPP_BIN`` (.ci/llamacpp builds both)."""

import importlib.util
import os

import pytest

from specverify.adapters.llamacpp.common import BIN_ENV

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None


def _have_bin(name: str) -> bool:
    where = os.environ.get(BIN_ENV)
    return bool(where) and os.access(os.path.join(where, name), os.X_OK)


needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama_cpp / gguf not installed here: see .ci/llamacpp's venv")
needs_server = pytest.mark.skipif(
    not (HAVE_LLAMA and _have_bin("llama-server")),
    reason=f"llama-server not found: set {BIN_ENV} to llama.cpp's bin directory (.ci/llamacpp builds it)",
)
needs_example = pytest.mark.skipif(
    not (HAVE_LLAMA and _have_bin("llama-speculative")),
    reason=f"llama-speculative not found: set {BIN_ENV} to llama.cpp's bin directory (.ci/llamacpp builds it)",
)
