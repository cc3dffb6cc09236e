"""The llama.cpp adapter's engine configurations (``specverify.adapters.llamacpp.configs``) without llama.cpp: each
factory's presets and default, and the options they set, checked. Their states on real engines:
test_configs_engine.py."""

import pytest

from specverify.adapters import llamacpp
from specverify.errors import InvalidArgument
from specverify.oracles.pairs import ToyPairSpec
from specverify.params import SamplingParams
from specverify.protocol import Request, engine_configs_of

PYTHON = ("python_draft_model", "python_prompt_lookup", "plain")
SERVER = ("server_draft_model", "server_plain")


def _requests(n=12, max_tokens=5):
    return [Request((0, 1), SamplingParams(temperature=1.0, max_tokens=max_tokens), 3, seed=s) for s in range(n)]


def test_each_factory_declares_its_presets_and_its_default():
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


def test_bad_options_are_refused_before_any_server_starts(monkeypatch):
    """Refused in the factory, before a server is started (no llama-server here: one would fail otherwise)."""
    from specverify.adapters.llamacpp import common

    monkeypatch.delenv(common.BIN_ENV, raising=False)
    common.executable.cache_clear()
    pair = ToyPairSpec(vocab_size=6).build()
    with pytest.raises(InvalidArgument, match="slots=0 must be an int in"):
        llamacpp.server_plain(pair.target, pair.draft, slots=0)
    with pytest.raises(InvalidArgument, match="cache_prompt='yes' must be None"):
        llamacpp.server_plain(pair.target, pair.draft, cache_prompt="yes")
    with pytest.raises(InvalidArgument, match="cache_prompt=1 must be a bool"):
        llamacpp.plain(pair.target, pair.draft, cache_prompt=1)
    with pytest.raises(RuntimeError, match="SPECVERIFY_LLAMACPP_BIN is not set"):
        llamacpp.server_plain(pair.target, pair.draft, slots=1)  # the executable is looked up at set-up
