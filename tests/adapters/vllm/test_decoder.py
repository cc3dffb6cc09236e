"""``VllmDecoder``'s checks before any engine starts (``specverify.adapters.vllm.decoder``), without vLLM: what it can
load, and the one workaround setting per process."""

import types
import weakref

import pytest

from specverify.adapters import vllm as va
from specverify.adapters.vllm import decoder as decoder_module
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
from specverify.errors import InvalidArgument
from specverify.oracles.pairs import ToyPairSpec


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


def test_toy_models_are_a_setup_error():
    toy = ToyPairSpec().build()
    with pytest.raises(InvalidArgument, match="no .path"):
        va.draft_model(toy.target, toy.draft)


def test_draft_families_other_than_ar_are_refused(pair):
    heads = types.SimpleNamespace(family="heads", path="/nowhere")
    with pytest.raises(InvalidArgument, match=r"family 'heads' \(--drafts heads\): .* AR matrix"):
        va.draft_model(pair.target, heads)


class _Held:
    """A live decoder as ``_check_one_workaround_setting`` sees it."""

    def __init__(self, method, workaround):
        self.method, self.options, self._closed = method, {"workaround": workaround}, False


def test_decoders_with_and_without_the_workaround_cannot_share_a_process(monkeypatch, vllm_0_32_on_cpu):
    monkeypatch.setattr(decoder_module, "_DECODERS", weakref.WeakSet())
    held = _Held("draft_model", "expand-kernel")
    decoder_module._DECODERS.add(held)
    decoder_module._check_one_workaround_setting(_Held("ngram", "expand-kernel"))  # the same setting: fine
    with pytest.raises(InvalidArgument, match="workaround=None: .*'expand-kernel' .*--against .*--isolation"):
        decoder_module._check_one_workaround_setting(_Held("plain", None))
    held._closed = True
    decoder_module._check_one_workaround_setting(_Held("plain", None))  # closed decoders hold no engine
