"""The llama.cpp adapter's engine configurations on real engines (docs/adapters.md, "Engine configurations"): the
state evidence read from real runs — llama-cpp-python's prompt cache (``Llama.n_tokens`` at each request's first
``eval``) and llama-server's slots and prompt cache (``timings.cache_n``, ``id_slot``, ``/metrics``); the presets'
mapping is test_configs.py's. Run in the llama.cpp venv of .ci/llamacpp:

    SPECVERIFY_LLAMACPP_BIN=<build>/bin .venv-llama/bin/python -m pytest tests/adapters/llamacpp -q

The certified verdicts per configuration are in docs/findings/llamacpp.md, "Engine configurations".
"""

import pytest

from specverify.params import SamplingParams
from specverify.protocol import EngineConfig, Request, engine_configs_of
from tests.adapters.llamacpp._engines import needs_llama, needs_server

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
            argv = server.process.argv  # the launch line of the server adapter's managed process
            assert argv[argv.index("-np") + 1] == str(slots) and "--metrics" in argv
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
    from specverify.certification.execution.certify import certify_configurations

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
