"""llama-server's mapping (``specverify.adapters.llamacpp.server``) on a stand-in server: tokens past an end
reported, not cut, and the engine states read from responses and ``/metrics`` (``ServerEvidence``). Real servers:
test_decoders_engine.py, test_configs_engine.py."""

import pytest

from specverify.adapters import llamacpp
from specverify.adapters.boundary.finish import EngineStoppedEarly
from specverify.adapters.llamacpp.server import ServerDecoder, ServerEvidence
from specverify.adapters.llamacpp.server_process import parse_metrics
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
from specverify.params import SamplingParams
from specverify.protocol import Request, engine_configs_of


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


class _FakeServer:
    def __init__(self, tokens, stop_type):
        self.answer = {"tokens": tokens, "timings": {}, "stop_type": stop_type}

    def complete(self, body):
        return self.answer

    def metrics(self):  # no /metrics: the evidence counts the responses only
        return {}

    def close(self):
        pass


def test_server_tokens_after_eos_are_reported_not_cut(pair, monkeypatch, gguf_stand_in):
    """llama-server is asked to honour EOS, stop strings and n_predict, so the adapter cuts nothing."""
    eos = pair.target.vocab.eos_token_id
    server = {"now": _FakeServer([2, eos, 1], "eos")}
    monkeypatch.setattr(ServerDecoder, "_server", lambda self, gamma: server["now"])
    decoder = ServerDecoder(pair.target, pair.draft, speculative=True)
    assert decoder.prefill_tokens == 1
    c = decoder([Request((0, 1), SamplingParams(max_tokens=4), 3)])[0]
    assert (c.tokens, c.finish_reason) == ((2, eos, 1), "eos")
    server["now"] = _FakeServer([2, 2, 2, 2, 2], "limit")
    assert decoder([Request((0, 1), SamplingParams(max_tokens=4), 3)])[0].tokens == (2, 2, 2, 2, 2)
    server["now"] = _FakeServer([2], "word")
    with pytest.raises(EngineStoppedEarly, match="llama-server stopped after 1 tokens .* stop_type 'word'"):
        decoder([Request((0, 1), SamplingParams(max_tokens=4), 3)])


def test_server_evidence_counts_cache_hits_slots_and_parallel_decodes():
    class Server:
        def __init__(self, text):
            self.text = text

        def metrics(self):
            return parse_metrics(self.text)

    a = Server("# TYPE x counter\nllamacpp:n_decode_total 40\nllamacpp:n_busy_slots_per_decode 1.5\n")
    b = Server("llamacpp:n_decode_total 10\nllamacpp:n_busy_slots_per_decode 1\n")
    evidence = ServerEvidence()
    answers = [{"timings": {"cache_n": 0}, "id_slot": 0}, {"timings": {"cache_n": 3}, "id_slot": 2}]
    evidence.observe(a, answers)
    evidence.observe(b, [{"timings": {}, "id_slot": 2}, {"timings": {"cache_n": 32}, "id_slot": 2}])
    state = evidence.state([a, b])
    assert state == {"requests": 4, "cache_hit_requests": 2, "cached_prompt_tokens": 35, "long_prefix_hits": 1,
                     "distinct_slots": 2, "decode_calls": 50, "parallel_slot_decodes": 20}  # fmt: skip
    evidence.retire(a)  # a retired server's counters stay counted
    assert evidence.state([b]) == state
    presets = engine_configs_of(llamacpp.server_plain)[0]
    assert presets["slots"].shortfall({"state": state}) is None
    assert presets["cache-prompt"].shortfall({"state": state}) is None
    assert "cache_hit_requests = 0 (needs >= 1)" in presets["cache-prompt"].shortfall(
        {"state": {**state, "cache_hit_requests": 0}}
    )
    assert "long_prefix_hits = 0 (needs >= 1)" in presets["cache-prompt"].shortfall(
        {"state": {**state, "long_prefix_hits": 0}}
    )
