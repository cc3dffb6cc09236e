"""llama-server's factories (``specverify.adapters.llamacpp.server``) on the server adapter, against a stand-in
``llama-server`` (``llama_server_stand_in``: a real process started from the launch line, relaying to a stand-in
speaking ``/completion``): the launch line, one server per γ, every sampling field sent, tokens past an end reported
and not cut, an early stop raised, and the engine states read from the answers and ``/metrics``
(``ServerEvidence``). Real servers: test_decoders_engine.py, test_configs_engine.py."""

import pytest

from specverify.adapters import llamacpp
from specverify.adapters.boundary.finish import EngineStoppedEarly
from specverify.adapters.llamacpp.common import N_CTX
from specverify.adapters.llamacpp.server import DIALECT, SERVER_CAPABILITIES, ServerEvidence, parse_metrics
from specverify.adapters.server import ServerFault
from specverify.adapters.server.dialects import Answer
from specverify.params import SamplingParams
from specverify.protocol import Request, engine_configs_of

#: what the adapter declared before it moved onto the server adapter (its certificates must stay reproducible)
DECLARED = {"temperature", "max_tokens", "top_k", "top_p", "min_p", "repetition_penalty", "bad_token_ids", "stop",
            "seed", "batch"}  # fmt: skip


def _requests(n, gamma=3, **fields):
    params = SamplingParams(**{"temperature": 1.0, "max_tokens": 4, **fields})
    return [Request((0, 1), params, gamma, seed=100 + i) for i in range(n)]


def test_speculative_servers_one_per_gamma_with_the_launch_line_and_evidence(llama_server_stand_in):
    stand_in = llama_server_stand_in
    stand_in.fault = None
    pair = stand_in.pair
    decoder = llamacpp.server_draft_model(pair.target, pair.draft, slots=2, cache_prompt=False)
    try:
        assert decoder.capabilities == DECLARED == SERVER_CAPABILITIES and decoder.prefill_tokens == 1
        out = decoder(_requests(6) + _requests(2, gamma=2))
        again = decoder(_requests(6))
        assert [c.tokens for c in out[:6]] == [c.tokens for c in again]  # seeded: the same draws, in order
        assert all(len(c.tokens) <= 4 and c.finish_reason in ("eos", "length") for c in out)
        assert sorted(decoder.servers) == [2, 3]
        argv = decoder.servers[3].process.argv
        assert argv[argv.index("-np") + 1] == "2" and argv[argv.index("-c") + 1] == str(2 * N_CTX)
        assert argv[argv.index("--spec-draft-n-max") + 1] == "3" and "--metrics" in argv
        assert argv[argv.index("-m") + 1].endswith(".toy.gguf") and argv[argv.index("-ctk") + 1] == "f32"
        assert decoder.server.extra_fields == {"cache_prompt": False}
        assert decoder.engine_counters["draft_n"] > 0 and decoder.engine_counters["requests"] == 14
        processes = [live.process.proc for live in decoder.servers.values()]
    finally:
        decoder.close()
    assert decoder.servers == {} and all(p.poll() is not None for p in processes)
    info = decoder.engine_info  # read after close: the stopped servers' counters stay counted
    assert info["name"] == "llama-server"
    assert info["requested"] == {"method": "server_draft_model", "slots": 2, "cache_prompt": False}
    state = info["state"]
    assert state["requests"] == 14 and state["distinct_slots"] == 2 and state["cache_hit_requests"] == 0, state
    assert state["decode_calls"] > 0 and state["parallel_slot_decodes"] > 0, state


def test_every_sampling_field_is_sent_and_the_prompt_cache_is_read(llama_server_stand_in):
    stand_in = llama_server_stand_in
    stand_in.fault, stand_in.slots, stand_in.slot_prompts = None, 1, {}
    pair = stand_in.pair
    decoder = llamacpp.server_plain(pair.target, pair.draft, slots=1)
    try:
        assert not hasattr(decoder, "prefill_tokens")
        body = DIALECT.body(_requests(1)[0], decoder.server._context())
        assert body["samplers"] == ["penalties", "temperature", "top_k", "top_p", "min_p"]
        assert body["top_k"] == 0 and body["repeat_last_n"] == N_CTX and 0 <= body["seed"] < 2**32 - 1
        assert decoder.server.extra_fields == {}  # cache_prompt None: the server's default
        decoder(_requests(3, gamma=3) + _requests(2, gamma=5))  # one server for every γ
        assert list(decoder.servers) == [0] and "--spec-draft-n-max" not in decoder.servers[0].process.argv
        state = decoder.engine_info["state"]
        assert state["cache_hit_requests"] == 4 and state["cached_prompt_tokens"] == 4, state  # the same prompt
        assert state["distinct_slots"] == 1
        with pytest.raises(Exception, match="frequency_penalty"):
            decoder(_requests(1, frequency_penalty=0.5))  # not declared: refused, never sent
    finally:
        stand_in.slots = 2
        decoder.close()


def test_tokens_past_an_end_are_reported_and_an_early_stop_raises(llama_server_stand_in):
    """llama-server is asked to honour EOS, stop strings and n_predict, so the adapter cuts nothing."""
    stand_in = llama_server_stand_in
    pair = stand_in.pair
    decoder = llamacpp.server_plain(pair.target, pair.draft, slots=2)
    try:
        stand_in.fault = "past-end"
        greedy = decoder(_requests(4, temperature=0.0, max_tokens=4))
        for c in greedy:
            assert c.tokens[-1] == 0 and (len(c.tokens) == 5 or pair.target.vocab.eos_token_id in c.tokens[:-1])
        stand_in.fault = "early-stop"
        with pytest.raises(EngineStoppedEarly, match="llama-server stopped after 1 tokens .* stop_type 'word'"):
            decoder(_requests(4, max_tokens=4))  # a first token that is not EOS among them
        stand_in.fault = "5xx"
        with pytest.raises(ServerFault, match="HTTP 500.*Reproduce: curl .*/completion"):
            decoder(_requests(1))
    finally:
        stand_in.fault = None
        decoder.close()


def test_server_evidence_counts_cache_hits_slots_and_parallel_decodes():
    class Client:
        def __init__(self, text):
            self.text = text

        def get_text(self, path, timeout_s=None):
            assert path == "/metrics"
            return 200, self.text

    class Live:
        def __init__(self, text):
            self.client = Client(text)

    def answers(*states):
        return [Answer((1,), "limit", state=s) for s in states]

    a = Live("# TYPE x counter\nllamacpp:n_decode_total 40\nllamacpp:n_busy_slots_per_decode 1.5\n")
    b = Live("llamacpp:n_decode_total 10\nllamacpp:n_busy_slots_per_decode 1\n")
    evidence = ServerEvidence()
    evidence.observe(a, answers({"cache_n": 0, "id_slot": 0}, {"cache_n": 3, "id_slot": 2}))
    evidence.observe(b, answers({"id_slot": 2}, {"cache_n": 32, "id_slot": 2}))
    state = evidence.state([a, b])
    assert state == {"requests": 4, "cache_hit_requests": 2, "cached_prompt_tokens": 35, "long_prefix_hits": 1,
                     "distinct_slots": 2, "decode_calls": 50, "parallel_slot_decodes": 20}  # fmt: skip
    evidence.retire(a)  # a retired server's counters stay counted
    assert evidence.state([b]) == state
    assert parse_metrics("llamacpp:n_decode_total 12\nvllm:x 1\n") == {"n_decode_total": 12.0}
    presets = engine_configs_of(llamacpp.server_plain)[0]
    assert presets["slots"].shortfall({"state": state}) is None
    assert presets["cache-prompt"].shortfall({"state": state}) is None
    assert "cache_hit_requests = 0 (needs >= 1)" in presets["cache-prompt"].shortfall(
        {"state": {**state, "cache_hit_requests": 0}}
    )
    assert "long_prefix_hits = 0 (needs >= 1)" in presets["cache-prompt"].shortfall(
        {"state": {**state, "long_prefix_hits": 0}}
    )
