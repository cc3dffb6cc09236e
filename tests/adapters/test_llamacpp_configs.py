"""The llama.cpp adapter's engine configurations (docs/adapters.md, "Engine configurations"): each preset's mapping
onto the engine, and the state evidence read from real runs — llama-cpp-python's prompt cache (``Llama.n_tokens``
at each request's first ``eval``) and llama-server's slots and prompt cache (``timings.cache_n``, ``id_slot``,
``/metrics``). Engine tests run in the llama.cpp venv of .ci/llamacpp:

    SPECVERIFY_LLAMACPP_BIN=<build>/bin .venv-llama/bin/python -m pytest tests/adapters/test_llamacpp_configs.py -q

The certified verdicts per configuration are in docs/findings/llamacpp.md, "Engine configurations".
"""

import importlib.util
import os

import pytest

from specverify.adapters._llamacpp_common import BIN_ENV
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams
from specverify.protocol import EngineConfig, Request, engine_configs_of

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama_cpp / gguf not installed here: see .ci/llamacpp's venv")
SERVER_BIN = os.path.join(os.environ.get(BIN_ENV) or "/nonexistent", "llama-server")
needs_server = pytest.mark.skipif(
    not (HAVE_LLAMA and os.access(SERVER_BIN, os.X_OK)),
    reason=f"llama-server not found: set {BIN_ENV} to llama.cpp's bin directory (.ci/llamacpp builds it)",
)
PYTHON = ("python_draft_model", "python_prompt_lookup", "plain")
SERVER = ("server_draft_model", "server_plain")


def _requests(n=12, max_tokens=5):
    return [Request((0, 1), SamplingParams(temperature=1.0, max_tokens=max_tokens), 3, seed=s) for s in range(n)]


def _turns():
    """Turn 1 (31 tokens), then its turn 2 twice (33 tokens): the second turn 2 meets the first's tokens whole, so a
    prompt cache keeps 32 of them, one written by decoding (``long_prefix_hits``)."""
    from specverify.certification.matrix.checkpoint import TURN_1_OUTPUT, TURN_1_PROMPT

    params = SamplingParams(temperature=1.0, max_tokens=3)
    turn_2 = TURN_1_PROMPT + TURN_1_OUTPUT
    return [Request(TURN_1_PROMPT, params, 3, seed=20), Request(turn_2, params, 3, seed=21),
            Request(turn_2, params, 3, seed=22)]  # fmt: skip


# ------------------------------------------------------------------------------------------------ no engine needed


def test_each_factory_declares_its_presets_and_its_default():
    from specverify.adapters import llamacpp

    cache = {"cache_hit_requests": 1, "long_prefix_hits": 1}
    for name in PYTHON:
        presets, default = engine_configs_of(getattr(llamacpp, name))
        assert list(presets) == ["cache-prompt", "no-cache-prompt"] and default == "cache-prompt"
        assert presets["cache-prompt"].options == {"cache_prompt": True}
        assert presets["no-cache-prompt"].options == {"cache_prompt": False}
        assert presets["cache-prompt"].reaches == cache
    for name in PYTHON + SERVER:  # turn 1 then turn 2 (a long shared prefix) in both, so their α plans are alike
        presets, _ = engine_configs_of(getattr(llamacpp, name))
        turns = ("long-prompt", "multi-turn")
        assert presets["cache-prompt"].scenarios == turns == presets["no-cache-prompt"].scenarios
    for name in SERVER:
        presets, default = engine_configs_of(getattr(llamacpp, name))
        assert list(presets) == ["slots", "cache-prompt", "no-cache-prompt", "context-shift"] and default == "slots"
        assert presets["slots"].options == {"slots": 4}  # the factory's own default: the run without a preset
        assert presets["slots"].reaches == {"distinct_slots": 2, "parallel_slot_decodes": 1}
        assert presets["cache-prompt"].options == {"slots": 1, "cache_prompt": True}
        assert presets["cache-prompt"].reaches == cache and presets["slots"].scenarios == ()
        assert presets["no-cache-prompt"].options == {"slots": 1, "cache_prompt": False}
        assert "no law is defined for context shift" in presets["context-shift"].unreachable


def test_server_evidence_counts_cache_hits_slots_and_parallel_decodes():
    from specverify.adapters._llamacpp_bin import ServerEvidence, parse_metrics

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
    presets = engine_configs_of(__import__("specverify.adapters.llamacpp", fromlist=["x"]).server_plain)[0]
    assert presets["slots"].shortfall({"state": state}) is None
    assert presets["cache-prompt"].shortfall({"state": state}) is None
    assert "cache_hit_requests = 0 (needs >= 1)" in presets["cache-prompt"].shortfall(
        {"state": {**state, "cache_hit_requests": 0}}
    )
    assert "long_prefix_hits = 0 (needs >= 1)" in presets["cache-prompt"].shortfall(
        {"state": {**state, "long_prefix_hits": 0}}
    )


@needs_llama
def test_bad_options_are_refused(monkeypatch):
    from specverify.adapters import _llamacpp_bin as lb
    from specverify.adapters import llamacpp
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    pair = CHECKPOINT_PAIRS["main"].build()
    monkeypatch.setattr(lb.ServerDecoder, "_server", lambda self, gamma: None)
    with pytest.raises(InvalidArgument, match="slots=0 must be an int in"):
        llamacpp.server_plain(pair.target, pair.draft, slots=0)
    with pytest.raises(InvalidArgument, match="cache_prompt='yes' must be None"):
        llamacpp.server_plain(pair.target, pair.draft, cache_prompt="yes")
    with pytest.raises(InvalidArgument, match="cache_prompt=1 must be a bool"):
        llamacpp.plain(pair.target, pair.draft, cache_prompt=1)
    decoder = llamacpp.server_plain(pair.target, pair.draft, slots=1, cache_prompt=False)
    assert decoder._body(_requests(1)[0])["cache_prompt"] is False
    assert "cache_prompt" not in llamacpp.server_plain(pair.target, pair.draft)._body(_requests(1)[0])


# ------------------------------------------------------------------------------------------------ engine


@pytest.fixture(scope="module")
def pair():
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    return CHECKPOINT_PAIRS["main"].build()


@needs_llama
@pytest.mark.parametrize("name", PYTHON)
def test_python_prompt_cache_is_read_from_the_engine(pair, name):
    """cache-prompt: every request after the first keeps the KV of the prompt's common prefix with the last call
    (``Llama.n_tokens`` > 0 at its first eval), and the second turn 2 keeps 32 tokens (a long prefix hit);
    no-cache-prompt keeps none. Seeded outputs are the same either way (one uniform per emitted token)."""
    from specverify.adapters import llamacpp

    presets, _ = engine_configs_of(getattr(llamacpp, name))
    outputs = {}
    for config in ("cache-prompt", "no-cache-prompt"):
        decoder = getattr(llamacpp, name)(pair.target, pair.draft, **presets[config].options)
        outputs[config] = [c.tokens for c in decoder(_requests() + _turns())]
        state = decoder.engine_info["state"]
        assert state["requests"] == 15, state
        if config == "cache-prompt":
            assert state["cache_hit_requests"] == 14 and state["cached_prompt_tokens"] >= 14 + 32, state
            assert state["long_prefix_hits"] >= 1, state
            assert presets[config].shortfall(decoder.engine_info) is None
        else:
            assert state["cache_hit_requests"] == 0 == state["cached_prompt_tokens"] == state["long_prefix_hits"], state
    same = sum(a == b for a, b in zip(outputs["cache-prompt"], outputs["no-cache-prompt"]))
    assert same >= 14, outputs  # float rounding of a batched vs single-token evaluation may move one


@needs_server
@pytest.mark.parametrize("name", SERVER)
def test_server_slots_and_prompt_cache_are_read_from_real_runs(pair, name):
    """slots: 12 requests sent four at a time land on several slots and some llama_decode calls serve two slots or
    more (the server's n_busy_slots_per_decode); cache-prompt (-np 1): every request after the first reuses the
    slot's prefix (timings.cache_n > 0); no-cache-prompt: none does. Seeded outputs agree across the three."""
    from specverify.adapters import llamacpp

    presets, _ = engine_configs_of(getattr(llamacpp, name))
    outputs = {}
    for config in ("slots", "cache-prompt", "no-cache-prompt"):
        decoder = getattr(llamacpp, name)(pair.target, pair.draft, **presets[config].options)
        try:
            outputs[config] = [c.tokens for c in decoder(_requests() + _turns())]
            server = next(iter(decoder.servers.values()))
            slots = 4 if config == "slots" else 1
            assert server.args[server.args.index("-np") + 1] == str(slots) and "--metrics" in server.args
        finally:
            decoder.close()
        state = decoder.engine_info["state"]  # read after close: the retired server's counters are kept
        assert state["requests"] == 15 and state["decode_calls"] > 0, state
        if config == "slots":
            assert state["distinct_slots"] >= 2 and state["parallel_slot_decodes"] >= 1, state
        elif config == "cache-prompt":
            assert state["distinct_slots"] == 1 and state["cache_hit_requests"] == 14, state
            assert state["long_prefix_hits"] >= 1, state
            assert state["parallel_slot_decodes"] == 0, state  # one slot: never two in one decode
        else:
            assert state["cache_hit_requests"] == 0 == state["cached_prompt_tokens"] == state["long_prefix_hits"], state
        assert presets[config].shortfall(decoder.engine_info) is None
    for config in ("cache-prompt", "no-cache-prompt"):
        same = sum(a == b for a, b in zip(outputs["slots"], outputs[config]))
        assert same >= 14, (config, outputs)
    if name == "server_draft_model":
        assert decoder.engine_counters["draft_n_accepted"] > 0  # it speculated


@needs_server
def test_a_certified_configuration_shows_its_state_or_is_not_covered(pair):
    """Through the certifier (one scenario, quick level): cache-prompt's run of ``multi-turn`` alone (turn 2 after
    turn 2) shows long cache hits in the certificate's engine record and is covered; the same preset with the cache
    forced off by an engine option is not covered."""
    from specverify.certification.execution.configurations import certify_configurations

    run = dict(level="quick", models="checkpoint", isolation="none", scenarios=["multi-turn"])
    factory = "specverify.adapters.llamacpp:server_plain"
    covered = certify_configurations(factory, ["cache-prompt"], **run).results[0]
    state = covered.certificate.engine["state"]
    assert covered.covered is True and state["cache_hit_requests"] > 100 < state["long_prefix_hits"], covered.note
    assert covered.certificate.verdict != "invalid", covered.certificate.reason
    assert covered.certificate.engine["requested"] == {"method": "server_plain", "slots": 1, "cache_prompt": True}
    forced = certify_configurations(factory, ["cache-prompt"], engine_options={"cache_prompt": False}, **run)
    result = forced.results[0]
    assert result.covered is False and "cache_hit_requests = 0 (needs >= 1)" in result.note
    assert "long_prefix_hits = 0 (needs >= 1)" in result.note
    assert isinstance(result.preset, EngineConfig) and not forced.met
