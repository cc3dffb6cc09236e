"""vLLM's spec-decode counters as ``decoder.reported_metrics()`` (``specverify.adapters.vllm.counters``) without vLLM;
the counters of real engines and the rates vLLM's logger prints: test_counters_engine.py."""

import types

from specverify.adapters import vllm as va
from specverify.metrics.counters import ReportedMetrics


def test_plain_reports_no_counters():
    plain = types.SimpleNamespace(_speculative=False, engine_counters={})  # no engine needed for the answer
    assert va.VllmDecoder.reported_metrics(plain) is None
    assert va.VllmDecoder.reported_metrics(types.SimpleNamespace(_speculative=True, engine_counters={})) == (
        ReportedMetrics()
    )  # before any call


def test_counters_are_diffed_and_summed_key_by_key():
    from specverify.adapters.vllm.counters import add_counters, counter_delta

    before = {"num_drafts": 3.0, "num_accepted_tokens_per_pos": [2.0, 1.0]}
    after = {"num_drafts": 5.0, "num_accepted_tokens_per_pos": [3.0, 1.0, 1.0]}  # a longer γ since
    delta = counter_delta(before, after)
    assert delta == {"num_drafts": 2.0, "num_accepted_tokens_per_pos": [1.0, 0.0, 1.0]}
    total = {"num_accepted_tokens_per_pos": [1.0]}
    add_counters(total, delta)
    assert total == {"num_accepted_tokens_per_pos": [2.0, 0.0, 1.0], "num_drafts": 2.0}
