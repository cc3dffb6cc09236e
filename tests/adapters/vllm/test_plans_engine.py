"""Engine-aware plans on vLLM (issue #24): the greedy scenarios of one (pair, γ) in one call, and batch composition on
a live engine (no engine start per call). Engine starts are counted by the adapter (``decoder.engine_start_s``).
Run from the vLLM venv:

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_plans_engine.py -q
"""

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

from specverify import certify  # noqa: E402
from specverify.adapters import vllm as va  # noqa: E402
from specverify.certification.checks.greedy import GREEDY_GAMMAS  # noqa: E402

SAME_PAIR = ["greedy-processors", "greedy-penalties"]  # both on the main pair, no prompts sent alone


class Recorded:
    """A vLLM decoder whose calls are recorded: each call's γ list and the engine starts made before it returned."""

    def __init__(self, decoder):
        self.decoder, self.calls, self.sent = decoder, [], []

    def __getattr__(self, name):
        return getattr(self.decoder, name)

    def __call__(self, requests):
        out = self.decoder(requests)
        self.calls.append(([r.num_draft_tokens for r in requests], len(self.decoder.engine_start_s)))
        self.sent.append(list(requests))
        return out


def _certify(names, **kw):
    made = []

    def factory(target, draft):
        made.append(Recorded(va.draft_model(target, draft)))
        return made[-1]

    cert = certify(factory, scenarios=names, level="quick", isolation="none", models="checkpoint", **kw)
    va.close_all()
    return cert, made


def test_the_greedy_scenarios_of_one_pair_and_gamma_take_one_call():
    cert, (decoder,) = _certify(SAME_PAIR)
    assert all(r.passed for r in cert.scenarios if r.scenario in SAME_PAIR), cert.scenarios
    greedy_calls = [(gammas, starts) for gammas, starts in decoder.calls if len(gammas) > 3]  # repro: 1 or 3
    assert sorted(set(g) for g, _ in greedy_calls) == [{g} for g in GREEDY_GAMMAS], [g for g, _ in greedy_calls]
    # every request answered, each distinct one sent once (identical greedy requests share an answer: 212 sent for
    # 238 answered on 2026-12-06); the calls of more than 3 requests are the greedy ones
    sent = [(r.prompt, r.params, r.num_draft_tokens, r.seed) for call in decoder.sent if len(call) > 3 for r in call]
    answered = [r for r in cert.scenarios if r.scenario in SAME_PAIR]
    assert all(r.n == r.planned_n > 0 for r in answered), answered
    assert len(set(sent)) == len(sent) <= sum(r.n for r in answered), (len(set(sent)), len(sent))
    # the engine made at set-up (γ 3), then one start per γ of the greedy calls at most
    assert greedy_calls[-1][1] <= 1 + len(GREEDY_GAMMAS), greedy_calls


def _composition_calls(decoder):
    """The calls of batch-composition: every call before the reproducibility check's first (a call of one at γ 3
    followed by a call of three)."""
    calls = decoder.calls
    for i in range(len(calls) - 1):
        if calls[i][0] == [3] and len(calls[i + 1][0]) == 3:
            return calls[:i]
    return calls


@pytest.fixture(scope="module")
def composition():
    """One quick batch-composition certification of ``draft_model`` (its plan cut to 1500 draws), recorded."""
    cert, (decoder,) = _certify(["batch-composition"], max_samples=1500)
    return cert, decoder


def test_batch_composition_small_calls_run_on_a_live_engine(composition):
    cert, decoder = composition
    calls = _composition_calls(decoder)
    small = [(g, s) for g, s in calls if len(g) <= 2]
    assert len(small) >= 100, len(calls)
    assert {tuple(set(g)) for g, _ in small} == {(2,)}  # the small-call shape's γ
    assert small[-1][1] - small[0][1] == 0, (small[0], small[-1])  # no engine start between the first and last
    small_members = [r for r in cert.scenarios if r.member in ("small", "alone")]
    assert len(small_members) == 2 and all(r.covered for r in small_members), cert.scenarios


def test_batch_composition_large_calls_take_same_gamma_neighbours_on_a_fixed_gamma_engine(composition):
    cert, decoder = composition
    calls = _composition_calls(decoder)
    large = [(g, s) for g, s in calls if len(g) > 2]
    assert large and all(set(g) == {3} for g, _ in large), [sorted(set(g)) for g, _ in large]
    assert large[-1][1] - large[0][1] == 0  # the γ 3 engine started in the first large call serves them all
    assert decoder.fixed_gamma is True


def test_threads_is_a_checked_option_and_holds_through_ngram_calls():
    """``threads`` (default 1) is torch's intra-op thread count for the engines; the n-gram proposer resets OpenMP's
    count through numba around each proposal, so the adapter sets numba's too (``engine.set_threads``)."""
    import torch

    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
    from specverify.errors import InvalidArgument
    from specverify.params import SamplingParams
    from specverify.protocol import Request

    pair = CHECKPOINT_PAIRS["main"].build()
    with pytest.raises(InvalidArgument, match="threads=0 must be an int >= 1"):
        va.ngram(pair.target, pair.draft, threads=0)
    decoder = va.ngram(pair.target, pair.draft)
    try:
        assert decoder.options["threads"] == 1 and decoder.engine_info["effective"]["3"]["threads"] == 1
        done = decoder([Request((0, 1, 0, 1), SamplingParams(max_tokens=6), 3, seed=s) for s in range(64)])
        assert len(done) == 64 and torch.get_num_threads() == 1
        assert decoder.last_counters.get("num_drafts", 0) > 0  # it proposed (numba ran), and counters still diff
    finally:
        decoder.close()
