"""The ONNX Runtime GenAI adapter's mapping without the engine (the main suite runs these): search options, seeds,
rounds from the engine's counters, the request checks, the composed speculative config, and that importing the
package loads no engine."""

import pytest

from specverify.adapters.onnxruntime_genai.export import compose_config
from specverify.adapters.onnxruntime_genai.mapping import (
    RoundLog,
    check_request,
    engine_seed,
    reported,
    search_options,
)
from specverify.errors import InvalidArgument
from specverify.metrics.counters import ReportedMetrics
from specverify.params import SamplingParams
from specverify.protocol import Request

CAPS = frozenset({"temperature", "max_tokens", "top_k", "top_p", "stop", "seed"})


def test_search_options_always_send_sampling_and_top_k_and_count_the_prompt():
    options = search_options(Request((0, 1, 2), SamplingParams(max_tokens=4), 2, seed=5))
    # the builder's genai_config says do_sample false and top_k 50 (> vocab 6): both must be overridden
    assert options["do_sample"] is True and options["top_k"] == 0 and options["temperature"] == 1.0
    assert options["max_length"] == 3 + 4 and options["random_seed"] == engine_seed(5) >= 0
    assert "top_p" not in options
    greedy = search_options(Request((0,), SamplingParams(temperature=0.0, top_p=0.9, max_tokens=2), 1))
    assert greedy["do_sample"] is False and greedy["top_p"] == pytest.approx(0.9) and greedy["random_seed"] == -1


def test_seeds_are_distinct_per_request_seed_and_in_the_engines_range():
    seeds = {engine_seed(s) for s in range(2000)}
    assert len(seeds) == 2000 and all(0 <= s < 2**31 - 1 for s in seeds)


def test_round_log_reads_rounds_drains_and_plain_steps():
    log = RoundLog()
    steps = [(1, 3), (1, 3), (1, 3), (1, 3), (2, 3), (2, 3), (2, 3)]  # (rounds, accepted) after each step
    for rounds, accepted in steps:
        log.step({"rounds": rounds, "draft_tokens_accepted": accepted})
    # a round of 3 (four tokens), a round of 0 (one token), then two plain steps
    assert log.per_round == [3, 0, 0, 0]
    with pytest.raises(RuntimeError, match="expected 0 or 1 round"):
        log.step({"rounds": 4, "draft_tokens_accepted": 3})


def test_reported_counts_are_valid_reported_metrics():
    fields = reported({"rounds": 2, "draft_tokens_evaluated": 5, "draft_tokens_accepted": 3})
    metrics = ReportedMetrics(**fields)
    assert (metrics.num_drafts, metrics.num_draft_tokens, metrics.num_accepted_tokens) == (2, 5, 3)
    assert metrics.acceptance_rate is None  # the engine's rates are per generator, never passed on


@pytest.mark.parametrize(
    "params, match",
    [
        (SamplingParams(min_p=0.1, max_tokens=3), "does not map exactly"),
        (SamplingParams(top_k=1, max_tokens=3), "top_k 1 as off"),
        (SamplingParams(top_k=7, max_tokens=3), "top_k"),
    ],
)
def test_check_request_refuses_what_is_not_mapped(params, match):
    with pytest.raises(InvalidArgument, match=match):
        check_request(Request((0,), params, 1), CAPS, "plain", vocab_size=6)
    check_request(Request((0,), SamplingParams(top_k=2, max_tokens=3), 1), CAPS, "plain", vocab_size=6)


def test_compose_config_places_target_and_draft_in_subfolders_and_refuses_other_vocabs():
    target = {"model": {"decoder": {"filename": "model.onnx", "head_size": 32}, "vocab_size": 6}, "search": {}}
    draft = {"model": {"decoder": {"filename": "model.onnx", "head_size": 16}, "vocab_size": 6}, "search": {}}
    config = compose_config(target, draft)
    assert config["model"]["decoder"]["filename"] == "target/model.onnx"
    assert config["model"]["draft"] == {"filename": "draft/model.onnx", "head_size": 16}
    assert target["model"]["decoder"]["filename"] == "model.onnx"  # the inputs are left as they were
    draft["model"]["vocab_size"] = 7
    with pytest.raises(InvalidArgument, match="vocab_size"):
        compose_config(target, draft)


def test_factories_are_named_by_the_package_and_speculative_ones_have_configurations():
    from specverify.adapters import onnxruntime_genai
    from specverify.protocol import engine_configs_of

    for name in ("plain", "draft_model", "draft_model_adaptive", "ngram"):
        assert getattr(onnxruntime_genai, name).__module__ == "specverify.adapters.onnxruntime_genai"
    presets, default = engine_configs_of(onnxruntime_genai.draft_model)
    assert set(presets) == {"fixed", "cooldown"} and default == "fixed"
    assert "accepted" not in onnxruntime_genai.CAPABILITIES["draft_model_adaptive"]
