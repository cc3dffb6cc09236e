"""The ONNX Runtime GenAI adapter on the engine (the checkpoint family converted by its model builder): a small law
check at temperature 1 and greedy equality per factory, seeds, the EOS the engine does not return, stop strings cut by
the adapter, the engine's counters. Run in the venv of .ci/onnxruntime_genai:

    .venv-ortgenai/bin/python -m pytest tests/adapters/onnxruntime_genai -q
"""

import pytest

from specverify.params import SamplingParams
from specverify.protocol import Request
from tests.adapters._law import greedy_mismatches, law_check

pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai not installed here: see .ci/onnxruntime_genai")
pytest.importorskip("onnx_ir", reason="the model builder needs onnx-ir: see .ci/onnxruntime_genai")

LAW_N = 4000
FACTORIES = ("plain", "draft_model", "draft_model_adaptive", "ngram")


@pytest.fixture(scope="module")
def pair():
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    return CHECKPOINT_PAIRS["main"].build()


def _make(name, pair, **options):
    from specverify.adapters import onnxruntime_genai

    return getattr(onnxruntime_genai, name)(pair.target, pair.draft, **options)


@pytest.mark.parametrize("name", FACTORIES)
def test_each_factory_passes_the_law_check_and_greedy(name, pair):
    decoder = _make(name, pair)
    result, impossible, out = law_check(decoder, pair, LAW_N, seed=11)
    assert result.passed and not impossible, (name, result.pvalue_min, result.tv.estimate)
    assert not greedy_mismatches(decoder, pair)
    if name == "draft_model":
        rounds = [a for c in out for a in c.accepted]
        assert set(rounds) == {0, 1, 2, 3}  # first-position, middle and full acceptance all seen
        assert decoder.reported_metrics()["num_accepted_tokens"] >= sum(rounds)


def test_unseeded_requests_follow_the_law_too(pair):
    result, impossible, _ = law_check(_make("draft_model", pair), pair, LAW_N)
    assert result.passed and not impossible, (result.pvalue_min, result.tv.estimate)


def test_the_eos_the_engine_stops_on_is_returned_and_seeds_replay(pair):
    decoder = _make("draft_model", pair)
    params = SamplingParams(max_tokens=4)
    out = decoder([Request((0, 1, 2), params, 3, seed=s) for s in range(300)])
    eos = [c for c in out if c.finish_reason == "eos"]
    assert eos and all(c.tokens[-1] == pair.target.vocab.eos_token_id for c in eos)
    again = decoder([Request((0, 1, 2), params, 3, seed=s) for s in range(300)])
    assert [c.tokens for c in again] == [c.tokens for c in out]


def test_stop_strings_are_cut_by_the_adapter(pair):
    params = SamplingParams(max_tokens=4, stop=("ab",))
    out = _make("ngram", pair)([Request((0, 1, 2), params, 2, seed=s) for s in range(200)])
    stopped = [c for c in out if c.finish_reason == "stop"]
    text = pair.target.vocab.strings
    assert stopped and all("ab" in "".join(text[t] for t in c.tokens) for c in stopped)
    assert all("ab" not in "".join(text[t] for t in c.tokens[:-1]) for c in stopped)  # cut at the completing token


def test_engine_info_names_the_version_and_the_counters(pair):
    decoder = _make("draft_model", pair, cooldown=True)
    decoder([Request((0, 1), SamplingParams(max_tokens=3), 3, seed=1)])
    info = decoder.engine_info
    assert info["name"] == "onnxruntime-genai" and info["version"] and info["requested"]["cooldown"] is True
    assert info["state"]["requests"] == 1 and info["state"]["rounds"] >= 1
