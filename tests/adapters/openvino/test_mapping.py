"""The OpenVINO GenAI adapter's mapping without the engine (the main suite runs these): generation-config fields,
seeds, precision properties, request checks, factories and configurations."""

import numpy as np
import pytest

from specverify.adapters.openvino.mapping import (
    CONFIDENCE_THRESHOLD,
    check_request,
    engine_seed,
    generation_fields,
    properties,
)
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams
from specverify.protocol import Request


def test_generation_fields_send_sampling_always_and_the_rest_only_when_set():
    fields = generation_fields(Request((0, 1), SamplingParams(max_tokens=3), 2), "plain", eos=5, seed=4)
    assert fields == {"max_new_tokens": 3, "eos_token_id": 5, "rng_seed": 4, "do_sample": True, "temperature": 1.0}
    set_ = SamplingParams(temperature=0.0, top_k=2, top_p=0.9, min_p=0.1, min_tokens=2, max_tokens=4)
    fields = generation_fields(Request((0,), set_, 3), "prompt_lookup", eos=5, seed=0)
    assert fields["do_sample"] is False and fields["top_k"] == 2 and fields["min_new_tokens"] == 2
    assert fields["num_assistant_tokens"] == 3 and fields["max_ngram_size"] == 2
    confident = generation_fields(Request((0,), SamplingParams(max_tokens=3), 3), "draft_model_confidence", 5, 0)
    assert (
        confident["assistant_confidence_threshold"] == CONFIDENCE_THRESHOLD and "num_assistant_tokens" not in confident
    )


def test_unseeded_requests_get_fresh_seeds_and_seeded_ones_a_stable_hash():
    rng = np.random.default_rng(0)
    assert len({engine_seed(None, rng) for _ in range(1000)}) == 1000  # the engine's default would be 0 for all
    assert engine_seed(3, None) == engine_seed(3, rng) and len({engine_seed(s, None) for s in range(1000)}) == 1000


def test_precision_properties():
    assert properties("f32") == {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
    assert properties("default") == {}
    with pytest.raises(InvalidArgument, match="precision='bf16'"):
        properties("bf16")


def test_check_request_refuses_undeclared_fields():
    caps = frozenset({"temperature", "max_tokens"})
    with pytest.raises(InvalidArgument, match="does not map exactly"):
        check_request(Request((0,), SamplingParams(repetition_penalty=1.5, max_tokens=3), 1), caps, "plain")


def test_factories_are_named_by_the_package_with_the_four_configurations():
    from specverify.adapters import openvino
    from specverify.adapters.openvino.decoder import CB_CHUNK
    from specverify.protocol import engine_configs_of

    for name in ("plain", "draft_model", "draft_model_confidence", "prompt_lookup", "cb_plain", "cb_draft_model"):
        factory = getattr(openvino, name)
        assert factory.__module__ == "specverify.adapters.openvino"
        presets, default = engine_configs_of(factory)
        assert set(presets) == {"f32", "f32-no-prefix-cache", "f32-no-prefix-cache-whole-batch", "default-precision"}
        assert default == "f32"
    whole = presets["f32-no-prefix-cache-whole-batch"].options
    assert whole["prefix_caching"] is False and whole["max_num_batched_tokens"] >= CB_CHUNK * 64
    assert "batch" in openvino.CAPABILITIES["cb_plain"] and "batch" not in openvino.CAPABILITIES["plain"]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "256"])
def test_the_step_budget_is_refused_unless_a_positive_int(bad):
    from specverify.adapters.openvino.decoder import OpenvinoDecoder
    from specverify.oracles import make_vocab

    model = type("M", (), {"vocab": make_vocab(4)})()
    with pytest.raises(InvalidArgument, match="max_num_batched_tokens="):
        OpenvinoDecoder(model, model, "cb_draft_model", max_num_batched_tokens=bad)
