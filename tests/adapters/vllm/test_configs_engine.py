"""vLLM's engine configurations (issue #25, ``specverify.adapters.vllm.configs``): each preset's option mapping, the
evidence of its state read from a real engine (prefix-cache hits of 32 tokens, preemptions, split prefills, packed
``n`` requests), and "not covered" while the state is not reached. Run from the vLLM venv:

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_configs_engine.py -q
"""

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

import specverify as sv  # noqa: E402
from specverify.adapters import vllm as va  # noqa: E402
from specverify.adapters.vllm import configs  # noqa: E402
from specverify.certification.matrix.checkpoint import configuration_scenarios  # noqa: E402
from specverify.certification.matrix.scenarios import SCENARIOS  # noqa: E402
from specverify.metrics.acceptance import completion_violation  # noqa: E402
from specverify.protocol import Request, engine_of  # noqa: E402

STATE = configuration_scenarios(SCENARIOS)
PAIR = STATE["multi-turn"].models()


def _requests(name: str, n: int, first_seed=None) -> list:
    s = STATE[name]
    return [Request(s.prompt, s.params, s.num_draft_tokens, seed=None if first_seed is None else first_seed + i)
            for i in range(n)]  # fmt: skip


def _decoder(preset: str, method: str = "draft_model"):
    return getattr(va, method)(PAIR.target, PAIR.draft, **va.ENGINE_CONFIGS[preset].options)


def test_prefix_cache_hits_and_their_absence_without_it():
    on = _decoder("prefix-cache")
    on(_requests("long-prompt", 100, first_seed=0))  # turn 1: its first block fills while decoding
    first = on(_requests("multi-turn", 1, first_seed=100))  # turn 2's first request, served from turn 1's block
    assert on.engine_info["state"]["cached_tokens"] == 32 and on.engine_info["state"]["prefix_hits"] == 1
    on(_requests("multi-turn", 50, first_seed=200))
    state = on.engine_info["state"]
    assert state["cached_tokens"] == 32 * 51 and state["requests"] == 151, state
    assert on.engine_info["effective"]["3"]["prefix_caching"] is True and len(first) == 1
    assert va.ENGINE_CONFIGS["prefix-cache"].shortfall(engine_of(on)) is None  # covered
    on.close()
    off = _decoder("no-prefix-cache")
    off(_requests("long-prompt", 20, first_seed=0) + _requests("multi-turn", 20, first_seed=100))
    assert off.engine_info["state"]["cached_tokens"] == 0
    assert off.engine_info["effective"]["3"]["prefix_caching"] is False
    assert va.ENGINE_CONFIGS["prefix-cache"].shortfall(engine_of(off)) is not None  # no hit: not covered
    off.close()


def test_preemptions_are_counted_and_short_requests_alone_are_not_covered():
    decoder = _decoder("preempt")
    preset = va.ENGINE_CONFIGS["preempt"]
    assert decoder.engine_info["effective"]["3"]["num_gpu_blocks"] == configs.PREEMPT_BLOCKS
    decoder([Request((0, 1), sv.SamplingParams(max_tokens=3), 3, seed=i) for i in range(100)])  # one block each
    assert decoder.engine_info["state"]["preemptions"] == 0
    assert "preemptions = 0 (needs >= 1)" in preset.shortfall(engine_of(decoder))  # not covered, never a pass
    out = decoder(_requests("second-block", 200, first_seed=0))
    assert decoder.engine_info["state"]["preemptions"] >= 1 and preset.shortfall(engine_of(decoder)) is None
    assert all(len(c.tokens) >= 1 for c in out)  # resumed requests finish
    # a preempted request's resume samples a token outside any round: its rounds are not reported
    # (configs.record_preempted); every other request's counts fit one token before its first round
    unreported = sum(c.accepted is None for c in out)
    assert 1 <= unreported <= decoder.engine_info["state"]["preemptions"], unreported
    reported = [c for c in out if c.accepted is not None]
    assert reported and all(completion_violation(len(c.tokens), c.accepted, 3, prefill=1) is None for c in reported)
    decoder.close()


def test_chunked_prefill_of_seeded_requests_crashes_and_unseeded_ones_split():
    for method in ("draft_model", "plain"):  # the rewind is the model runner's, with or without speculation
        shipped = _decoder("chunked-prefill", method=method)
        with pytest.raises(RuntimeError, match="CPU Generator does not use offset"):  # finding 3, as shipped
            shipped(_requests("long-prompt", 20, first_seed=0))
        assert shipped.engine_info["state"]["partial_prefills"] >= 1
        shipped.close()
        va.close_all()
    unseeded = _decoder("chunked-prefill-unseeded")
    assert "seed" not in unseeded.capabilities
    assert unseeded.engine_info["effective"]["3"]["max_num_batched_tokens"] == 64
    out = unseeded(_requests("long-prompt", 40) + _requests("multi-turn", 40))
    assert len(out) == 80 and unseeded.engine_info["state"]["partial_prefills"] >= 1
    # 300 running requests, 64 at a time, need 4 tokens a step each: the budget of 64 cuts the last ones' drafts
    # (configs.record_scheduled_drafts); their rounds are not reported, every other request's add up
    before = unseeded.engine_info["state"]["short_requests"]
    out = unseeded(_requests("one-token-prompt", 300))
    state = unseeded.engine_info["state"]
    short = state["short_requests"] - before
    assert state["short_rounds"] >= short >= 1, state
    reported = [c for c in out if c.accepted is not None]
    assert len(reported) == 300 - short and state["preemptions"] == 0, state
    assert all(completion_violation(len(c.tokens), c.accepted, 3, prefill=1) is None for c in reported)
    unseeded.close()


def test_parallel_n_packs_identical_unseeded_requests_into_one_vllm_request():
    decoder = _decoder("parallel-n", method="plain")
    out = decoder(_requests("long-prompt", 64) + _requests("multi-turn", 2, first_seed=0))
    state = decoder.engine_info["state"]
    assert (state["parallel_requests"], state["parallel_samples"], state["requests"]) == (1, 64, 3), state
    assert len({c.tokens for c in out[:64]}) > 1  # the siblings are not copies of one draw
    decoder.close()


def test_eagle_drops_a_hits_last_block_and_keeps_one_of_two():
    """vLLM drops the last matched block of an EAGLE-family drafter's hit (v1/core/single_type_kv_cache_manager.py:
    609-626): turn 2 of the 31-token turn 1 shares one 32-token block, which is never served, while turn 2 of the
    63-token turn 1 (65 tokens) shares two, one of which is served (docs/findings/vllm.md, Configurations)."""
    decoder = _decoder("prefix-cache", method="eagle")
    decoder(_requests("long-prompt", 50, first_seed=0))
    decoder(_requests("multi-turn", 50, first_seed=100))
    assert decoder.engine_info["state"]["cached_tokens"] == 0 and decoder.engine_info["state"]["requests"] == 100
    assert "cached_tokens = 0" in va.ENGINE_CONFIGS["prefix-cache"].shortfall(engine_of(decoder))
    decoder(_requests("long-prompt-63", 50, first_seed=200))
    decoder(_requests("multi-turn-65", 50, first_seed=300))
    state = decoder.engine_info["state"]
    assert state["prefix_hits"] >= 49 and state["cached_tokens"] == 32 * state["prefix_hits"], state  # one block each
    assert va.ENGINE_CONFIGS["prefix-cache"].shortfall(engine_of(decoder)) is None
    decoder.close()
