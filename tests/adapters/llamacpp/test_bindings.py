"""llama-cpp-python's path (``specverify.adapters.llamacpp.bindings``) without llama_cpp: the accepted drafts read
from the draft calls, and the set-up error when llama_cpp or its library is missing. On the engine:
test_decoders_engine.py."""

import sys

import pytest

from specverify.adapters.llamacpp.bindings import accepted_rounds, import_llama_cpp


def test_accepted_rounds_from_draft_calls():
    # prompt of 2; token 0 from the prefill; round 1 drafts [1, 1, 1] after it: 1, 1 accepted, 2 resampled
    assert accepted_rounds([(3, [1, 1, 1]), (6, [2])], 2, (0, 1, 1, 2, 2)) == (2, 1)
    assert accepted_rounds([(2, [])], 1, (3, 5)) == (0,)  # an empty draft is a round that accepts nothing


class _LibraryMissing:  # a meta-path finder: importing llama_cpp fails as it does without its shared library
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp":
            raise FileNotFoundError("Shared library with base name 'llama' not found")
        return None


def test_missing_llama_cpp_or_its_library_is_a_setup_error_saying_how_to_fix_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not installed
    with pytest.raises(RuntimeError, match="pip install llama-cpp-python==0.3.36"):
        import_llama_cpp()
    monkeypatch.delitem(sys.modules, "llama_cpp")
    monkeypatch.setattr(sys, "meta_path", [_LibraryMissing(), *sys.meta_path])
    with pytest.raises(RuntimeError, match="LLAMA_CPP_LIB_PATH"):
        import_llama_cpp()
