"""The llama.cpp adapter's tests: the ``*_engine.py`` modules need llama.cpp (llama_cpp and gguf, and its executables
in ``$SPECVERIFY_LLAMACPP_BIN``: each test skips without what it needs; .ci/llamacpp runs them), every other module
runs anywhere, the main suite included."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _stand_in_gguf(model, pieces="toy"):
    return Path("/stand-in") / f"{getattr(model, 'path', 'model')}.{pieces}.gguf"


@pytest.fixture
def gguf_stand_in(monkeypatch):
    """The GGUF export (which needs ``gguf``) stood in by a file name, for decoders whose engine is a stand-in too."""
    from specverify.adapters.boundary import gguf_export
    from specverify.adapters.llamacpp import example

    monkeypatch.setattr(gguf_export, "gguf_file", _stand_in_gguf)
    monkeypatch.setattr(example, "gguf_file", _stand_in_gguf)


@pytest.fixture(scope="module")
def llama_server_stand_in(tmp_path_factory):
    """A ``llama-server`` executable that stands in for llama.cpp's: a script in a directory set as
    ``$SPECVERIFY_LLAMACPP_BIN`` that runs ``tests/adapters/server/proxy.py``, which relays to a ``StandIn`` speaking
    the ``llamacpp`` dialect in this process (the toy pair of ``ToyPairSpec(vocab_size=6)``, two slots; set its
    ``fault`` to change what it answers). The GGUF export is stood in by file names. Yields the ``StandIn``."""
    from specverify.adapters.boundary import gguf_export
    from specverify.adapters.llamacpp import common
    from specverify.oracles.pairs import ToyPairSpec
    from tests.adapters.server.standin import StandIn

    pair = ToyPairSpec(vocab_size=6).build()
    server = StandIn(pair.target, pair.draft, dialect="llamacpp", slots=2)
    server.pair = pair
    where = tmp_path_factory.mktemp("llama-bin")
    script = where / "llama-server"
    proxy = ROOT / "tests" / "adapters" / "server" / "proxy.py"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I "{proxy}" --to {server.url} "$@"\n')
    script.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(common.BIN_ENV, str(where))
        patch.setattr(gguf_export, "gguf_file", _stand_in_gguf)
        common.executable.cache_clear()
        try:
            yield server
        finally:
            common.executable.cache_clear()
            server.close()
