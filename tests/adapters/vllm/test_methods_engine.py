"""vLLM's head methods (eagle, eagle3, medusa, dflash) on the checkpoint family, with heads built for the target by
``specverify.adapters.vllm.heads``, and ``mtp`` on the MiMo pair (its drafts come from the MTP layer inside the
target, ``specverify.oracles.checkpoint_mimo``). Run from the vLLM venv (docs/findings/vllm.md, methods with heads):

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_methods_engine.py -q -p no:cacheprovider

Per method: greedy output equals the target's on 20 prompts; the law of one scenario (prompt (0, 1), temperature 1,
``max_tokens`` 3, γ 3, N 3000, battery at α 1e-6) is rejected as shipped (finding 1: the verifying rows' temperature
is uninitialised) and exact with ``workaround="expand-kernel"``; vLLM's counters show speculation with accepted drafts.
Each method runs two engines (as shipped, then with the workaround), one alive at a time (finding 5).
"""

import collections
import time

import numpy as np
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

from specverify.adapters import vllm as va  # noqa: E402
from specverify.adapters.vllm import heads  # noqa: E402
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, MIMO_PAIRS  # noqa: E402
from specverify.oracles.law import exact_law, greedy_outcome  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402
from specverify.stats import battery  # noqa: E402

HEADS = heads.HEAD_METHODS
LAW_N = 3000
LAW_PROMPT = (0, 1)
LAW_PARAMS = SamplingParams(max_tokens=3)  # the checkpoint matrix's temperature-1 scenario
GREEDY_PARAMS = SamplingParams(temperature=0.0, max_tokens=5)
GAMMA = 3
_RUNS: dict = {}  # (method, workaround) -> what one engine produced (see _run)


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


@pytest.fixture(scope="module")
def mimo():
    return MIMO_PAIRS["mimo"].build()


def _greedy_prompts() -> list:
    rng = np.random.default_rng(0)
    return [tuple(int(t) for t in rng.integers(0, 5, size=rng.integers(1, 6))) for _ in range(20)]


def _run(pair, method: str, workaround, **options) -> dict:
    """One decoder (one engine, γ 3) per (method, workaround, options), closed before the next: greedy prompts, then
    LAW_N draws of the law scenario in one call."""
    key = (method, workaround, tuple(sorted(options.items())))
    if key in _RUNS:
        return _RUNS[key]
    va.close_all()  # one live engine, and one workaround setting, per process
    options = {**options, **({"workaround": workaround} if workaround else {})}
    started = time.perf_counter()
    decoder = getattr(va, method)(pair.target, pair.draft, **options)
    try:
        out = {"start_s": time.perf_counter() - started, "engine_info": decoder.engine_info}
        greedy = [Request(p, GREEDY_PARAMS, GAMMA) for p in _greedy_prompts()]
        out["greedy"] = list(zip(greedy, decoder(greedy)))
        out["greedy_counters"] = dict(decoder.last_counters)
        started = time.perf_counter()
        law = decoder([Request(LAW_PROMPT, LAW_PARAMS, GAMMA)] * LAW_N)
        out["law_s"] = time.perf_counter() - started
        out["law"] = law
        out["law_counters"] = dict(decoder.last_counters)
    finally:
        decoder.close()
    _RUNS[key] = out
    return out


def _greedy_wrong(pair, run) -> list:
    """The greedy prompts of ``run`` whose output is not the target's greedy outcome: (prompt, tokens, expected)."""
    return [
        (r.prompt, c.tokens, greedy_outcome(pair.target, r.prompt, r.params))
        for r, c in run["greedy"]
        if (c.tokens, c.finish_reason) != greedy_outcome(pair.target, r.prompt, r.params)
    ]


def _battery(pair, completions):
    law = exact_law(pair.target, LAW_PROMPT, LAW_PARAMS)
    counts = collections.Counter((c.tokens, c.finish_reason) for c in completions)
    vec, unknown = law.align(counts)
    assert not unknown, f"outcomes outside the law: {unknown}"
    return battery(vec, law.probs, alpha=1e-6, seed=0), len(counts)


# ------------------------------------------------------------------------------------------------ one engine each


@pytest.mark.parametrize("method", HEADS)
def test_greedy_equals_the_target(pair, method):
    run = _run(pair, method, None)
    assert not _greedy_wrong(pair, run), _greedy_wrong(pair, run)
    assert run["greedy_counters"]["num_drafts"] > 0  # the greedy prompts were speculated


@pytest.mark.parametrize("method", HEADS)
def test_speculation_is_observed_with_accepted_drafts(pair, method):
    """vLLM's counters over the law call: rounds ran, drafts were accepted at every position, and the per-request
    first rounds (the adapter's ``accepted``) accepted a draft in a fair share of requests."""
    run = _run(pair, method, "expand-kernel")
    counters = run["law_counters"]
    assert counters["num_drafts"] > 0 and counters["num_draft_tokens"] <= GAMMA * counters["num_drafts"]
    assert counters["num_accepted_tokens"] == sum(counters["num_accepted_tokens_per_pos"])
    assert min(counters["num_accepted_tokens_per_pos"]) > 0
    first = [c.accepted[0] for c in run["law"] if c.accepted]
    assert np.mean([a > 0 for a in first]) > 0.3


@pytest.mark.parametrize("method", HEADS)
def test_law_as_shipped_is_rejected_finding_1(pair, method):
    run = _run(pair, method, None)
    result, _ = _battery(pair, run["law"])
    assert not result.passed, f"{method} passed as shipped: has vLLM fixed finding 1? min p {result.pvalue_min:.3g}"


@pytest.mark.parametrize("method", HEADS)
def test_law_with_the_expand_kernel_workaround_is_exact(pair, method):
    run = _run(pair, method, "expand-kernel")
    assert run["engine_info"]["requested"]["options"]["workaround"] == "expand-kernel"
    result, _ = _battery(pair, run["law"])
    assert result.passed, f"{method}: min p {result.pvalue_min:.3g}, TV {result.tv.estimate:.3f}"


def test_sampled_head_drafts_with_the_workaround_are_exact(pair):
    """``draft_sample_method="probabilistic"`` (eagle3): the head's drafts are sampled and verified with their cached
    probabilities (``draft_probs_used``), and the law is exact with the workaround."""
    run = _run(pair, "eagle3", "expand-kernel", draft_sample_method="probabilistic")
    effective = run["engine_info"]["effective"]["3"]
    assert effective["draft_sample_method"] == "probabilistic" and effective["draft_probs_used"] is True
    result, _ = _battery(pair, run["law"])
    assert result.passed, f"min p {result.pvalue_min:.3g}, TV {result.tv.estimate:.3f}"


# ------------------------------------------------------------------------------------------------ mtp (MiMo pair)


def test_mtp_greedy_equals_the_target(mimo):
    run = _run(mimo, "mtp", None)
    assert not _greedy_wrong(mimo, run), _greedy_wrong(mimo, run)
    assert run["greedy_counters"]["num_drafts"] > 0 and run["greedy_counters"]["num_accepted_tokens"] > 0
    effective = run["engine_info"]["effective"]["3"]
    assert effective["method"] == "mtp" and effective["draft_architectures"] == ["MiMoMTPModel"]
    assert effective["n_predict"] == 1 and effective["draft_sample_method"] == "greedy"


def test_mtp_law_as_shipped_is_rejected_finding_1(mimo):
    result, _ = _battery(mimo, _run(mimo, "mtp", None)["law"])
    assert not result.passed, f"mtp passed as shipped: has vLLM fixed finding 1? min p {result.pvalue_min:.3g}"


def test_mtp_law_with_the_expand_kernel_workaround_is_exact_and_speculates(mimo):
    """The MTP layer drafts for real: drafts are accepted at every position; its first round (prompt (0, 1): the layer
    has not seen the prompt's first token, which vLLM masks at position 0) accepts less often than the heads'."""
    run = _run(mimo, "mtp", "expand-kernel")
    result, _ = _battery(mimo, run["law"])
    assert result.passed, f"mtp: min p {result.pvalue_min:.3g}, TV {result.tv.estimate:.3f}"
    counters = run["law_counters"]
    assert counters["num_accepted_tokens"] == sum(counters["num_accepted_tokens_per_pos"])
    assert min(counters["num_accepted_tokens_per_pos"]) > 0
    first = [c.accepted[0] for c in run["law"] if c.accepted]
    assert np.mean([a > 0 for a in first]) > 0.1
