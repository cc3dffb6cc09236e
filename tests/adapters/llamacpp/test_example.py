"""The ``llama-speculative`` example's mapping (``specverify.adapters.llamacpp.example``) on a stand-in process:
its arguments checked, its output past its ends reported and its stop strings cut. The executable itself:
test_decoders_engine.py."""

import pytest

from specverify.adapters.boundary import gguf_export as lg
from specverify.adapters.boundary.finish import EngineStoppedEarly
from specverify.adapters.llamacpp import example
from specverify.adapters.llamacpp.example import ExampleDecoder
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams
from specverify.protocol import Request


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


def test_tree_example_arguments_are_checked(pair):
    for bad in (dict(branches=0), dict(branches=True), dict(p_split=1.5), dict(p_split="0.1")):
        with pytest.raises(InvalidArgument, match=next(iter(bad))):
            ExampleDecoder(pair.target, pair.draft, **bad)


def test_example_output_past_its_ends_is_reported_and_its_stop_strings_cut(pair, monkeypatch, gguf_stand_in):
    """llama-speculative honours EOS and -n (tokens past them are returned: finding 6) but knows no stop strings,
    which the adapter matches and cuts at."""
    monkeypatch.setattr(example, "executable", lambda name: "/bin/true")
    decoder = ExampleDecoder(pair.target, pair.draft)
    eos = pair.target.vocab.eos_token_id
    prompt = (0, 1)

    def run_printing(tokens):
        text = "\n\n" + lg.char_text(prompt, eos) + lg.char_text(tokens, eos)
        return lambda args: (text, f"n_predict = {len(tokens)}\n", 0)

    monkeypatch.setattr(decoder, "_run", run_printing([2, eos, 1]))
    c = decoder([Request(prompt, SamplingParams(max_tokens=4), 3)])[0]
    assert (c.tokens, c.finish_reason) == ((2, eos, 1), "eos") and decoder.overshoot == 1
    monkeypatch.setattr(decoder, "_run", run_printing([2, 2, 2, 2]))
    assert decoder([Request(prompt, SamplingParams(max_tokens=3), 3)])[0].tokens == (2, 2, 2, 2)
    stop = pair.target.vocab.strings[2] * 2  # completed by the second token
    c = decoder([Request(prompt, SamplingParams(max_tokens=4, stop=(stop,)), 3)])[0]
    assert (c.tokens, c.finish_reason) == ((2, 2), "stop")
    monkeypatch.setattr(decoder, "_run", run_printing([2]))
    with pytest.raises(EngineStoppedEarly, match="llama-speculative stopped after 1 tokens"):
        decoder([Request(prompt, SamplingParams(max_tokens=3), 3)])
