"""certify(): verdict rules, protocol violations, coverage, budget, reproduction commands."""

import pytest

from specverify import InvalidArgument
from specverify.certification import CORE, SCENARIOS, certify
from specverify.reference import make_decoder
from tests.certification import bad_decoders

FAST = list(CORE)


def run(factory, scenarios=FAST, **kw):
    kw.setdefault("level", "quick")
    return certify(factory, scenarios=scenarios, isolation="none", **kw)


def test_reference_is_exact_with_evidence():
    cert = run(make_decoder, scenarios=FAST + ["unseeded-collision"])
    assert cert.verdict == "exact", cert.reason
    sampling = [s for s in cert.scenarios if s.kind in ("sampling", "mixed")]
    assert sampling and all(s.passed and s.n == s.planned_n and s.n > 1000 for s in sampling)
    for s in sampling:
        assert s.detectable_tv <= 0.05 + 1e-9 and 0 <= s.tv_estimate <= 1 and s.pvalue > 1e-6
        # the observed first-round acceptance agrees with its exact law (seeded, at a level that never flakes)
        assert s.accepted_observed and s.accepted_pvalue is not None and s.accepted_pvalue > 1e-7, s.name
    assert cert.reproducible is True and cert.speculation_observed is True
    assert "--scenario temperature-1 --seed 0" in cert.scenarios[0].reproduce


@pytest.mark.parametrize(
    "factory, fragment",
    [
        (bad_decoders.raises, "engine exploded"),
        (bad_decoders.wrong_count, "wrong count"),
        (bad_decoders.out_of_vocab, "outside the vocabulary"),
        (bad_decoders.tokens_after_eos, "after the finishing"),
        (bad_decoders.wrong_reason, "does not match"),
        (bad_decoders.broken_stream, "stream"),
        (bad_decoders.not_a_completion, "without tokens"),
    ],
)
def test_protocol_violations_are_invalid_never_a_pass(factory, fragment):
    cert = run(factory, scenarios=["eos-in-block"])
    assert cert.verdict == "invalid"
    assert fragment in cert.reason
    assert "Reproduce: specverify certify" in cert.reason


@pytest.mark.slow
def test_a_hang_in_the_worker_process_is_invalid():
    cert = certify("tests.certification.bad_decoders:hangs", level="quick", scenarios=["greedy"], timeout_s=3.0)
    assert cert.verdict == "invalid" and "hang" in cert.reason


def test_minimal_decoder_covers_core_and_lists_what_it_skips():
    cert = run(bad_decoders.minimal, scenarios=list(CORE) + ["penalties", "mixed-batch"])
    assert cert.verdict == "exact", cert.reason
    skipped = {s.name: s.note for s in cert.scenarios if not s.covered}
    assert set(skipped) == {"penalties", "mixed-batch"} and "not covered" in skipped["penalties"]
    assert cert.speculation_observed is None and cert.reproducible is None


def test_missing_core_scenarios_make_it_inconclusive_and_inconclusive_never_meets():
    cert = run(make_decoder, scenarios=["top-k"])
    assert cert.verdict == "inconclusive" and "core" in cert.reason
    assert not cert.meets("approximate")


def test_budget_exhaustion_is_inconclusive(monkeypatch):
    """The core runs, then the (injected) clock jumps past the budget: the rest is not run and the verdict says so."""
    from specverify.certification.execution import local, worker

    ticks = iter(range(10**6))
    monkeypatch.setattr(local, "_now", lambda: next(ticks))  # one second per look at the clock
    monkeypatch.setattr(worker, "_wall", lambda: 0.0)  # the between-calls deadline: off, whatever the load
    chosen = list(CORE) + ["penalties", "top-k"]
    cert = run(make_decoder, scenarios=chosen, budget_s=len(CORE) + 1.5, sequential=False)  # ticks: start, then
    # one look at the clock per part
    assert cert.verdict == "inconclusive"
    assert "budget" in cert.reason and "core" not in cert.reason, cert.reason
    covered = {s.name for s in cert.scenarios if s.covered}
    assert set(CORE) <= covered and "top-k" not in covered
    assert any("budget exhausted" in s.note for s in cert.scenarios if not s.covered)


def test_bad_arguments():
    with pytest.raises(InvalidArgument, match="level='fast'"):
        run(make_decoder, level="fast")
    with pytest.raises(InvalidArgument, match="Did you mean 'greedy'"):
        run(make_decoder, scenarios=["greedi"])
    with pytest.raises(InvalidArgument, match="alpha=2"):
        run(make_decoder, alpha=2.0)
    with pytest.raises(InvalidArgument, match="Did you mean"):
        certify("specverify.reference:make_decodr", isolation="none")


def test_first_round_acceptance_law_by_hand():
    """γ = 1: P(0 accepted) = 1 - Σ min(target, draft) at the first position; a copy of the target accepts all."""
    import numpy as np

    from specverify import SamplingParams
    from specverify.oracles import draft_copy, draft_near, make_vocab, random_target
    from specverify.oracles.acceptance_first import first_round_acceptance_law
    from specverify.sampling import next_token_probs

    target = random_target(make_vocab(5), seed=3)
    draft = draft_near(target, distance=0.8, seed=9)
    params, prompt = SamplingParams(max_tokens=4), (0, 1)
    kw = dict(prompt=prompt, generated=(), eos_token_id=target.vocab.eos_token_id)
    overlap = np.minimum(
        next_token_probs(target.logits([prompt])[0], params, **kw).numpy(),
        next_token_probs(draft.logits([prompt])[0], params, **kw).numpy(),
    ).sum()
    law = first_round_acceptance_law(target, draft, prompt, params, 1)
    assert law == pytest.approx([1 - overlap, overlap], abs=1e-12)
    assert first_round_acceptance_law(target, draft_copy(target), prompt, params, 3)[0] == pytest.approx(0, abs=1e-12)


def test_scenarios_stay_small_and_away_from_processor_boundaries():
    """≤ ~300 outcomes keep N small; a margin ≥ 1e-3 keeps float32 engines from failing on rounding (docs/design.md)."""
    from specverify.oracles import exact_law
    from specverify.oracles.law import boundary_margin

    for s in SCENARIOS.values():
        if s.kind in ("sampling", "greedy"):
            target = s.models().target
            assert len(exact_law(target, s.prompt, s.params)) <= 400, s.name
            margin = boundary_margin(target, s.prompt, s.params)
            assert margin == 0 if s.pair.target_ties else margin >= 1e-3, s.name  # greedy-ties: ties on purpose


def test_a_wrong_law_on_the_unseeded_path_alone_is_refused_exact():
    cert = run(bad_decoders.UnseededHotter, scenarios=FAST + ["unseeded-law"])
    assert cert.verdict == "greedy-only" and "unseeded-law" in cert.reason, cert.reason
    assert {s.name for s in cert.failures} == {"unseeded-law"}
    assert run(make_decoder, scenarios=["unseeded-law"]).scenarios[0].passed is True


class _Closing:
    """The reference decoder, recording when the certifier closes it."""

    log: list = []

    def __init__(self, target, draft):
        self.inner = make_decoder(target, draft)
        self.capabilities = self.inner.capabilities
        self.sample = self.inner.sample

    def __call__(self, requests):
        return self.inner(requests)

    def close(self):
        _Closing.log.append(id(self))


def test_decoders_are_closed_when_their_pair_is_done_and_at_the_end():
    _Closing.log.clear()
    scenarios = ["temperature-1", "near-deterministic"]  # two model pairs
    cert = certify(_Closing, level="quick", scenarios=scenarios, isolation="none", max_samples=15_500)
    assert cert.scenarios[0].passed and cert.scenarios[1].passed, cert.reason
    pairs = {SCENARIOS[name].pair for name in ("temperature-1", "near-deterministic")}
    assert len(pairs) == 2 and len(_Closing.log) == 2 and len(set(_Closing.log)) == 2  # each decoder once


class _FailingClose(_Closing):
    def close(self):
        raise RuntimeError("the engine would not shut down")


def test_a_close_that_raises_after_the_run_is_a_warning_not_a_print(capsys):
    from specverify.certification.run.runner import DecoderCloseWarning

    with pytest.warns(DecoderCloseWarning, match="the engine would not shut down"):
        cert = certify(_FailingClose, level="quick", scenarios=["greedy"], isolation="none")
    assert cert.scenarios[0].passed and capsys.readouterr().err == ""  # the library itself prints nothing


def test_mixed_members_each_stop_at_their_own_sequential_decision():
    """Under the default look rule each member of a mixed scenario runs its own design on its draws in the shuffled
    calls (a prefix of its own stream): the reference passes each at or below the fixed plan's N, with a sequential
    note; the fixed plan draws every member's planned N."""
    kw = dict(level="quick", seed=0, scenarios=["mixed-batch"], isolation="none")
    looked = certify("specverify.reference:make_decoder", **kw)
    fixed = certify("specverify.reference:make_decoder", sequential=False, **kw)
    assert [r.name for r in looked.scenarios] == [r.name for r in fixed.scenarios] and len(fixed.scenarios) == 3
    for seq, whole in zip(looked.scenarios, fixed.scenarios):
        assert seq.passed and whole.passed and whole.n == whole.planned_n, (seq, whole)
        assert seq.n == seq.planned_n and "sequential: " in seq.note, seq.note
    assert sum(r.n for r in looked.scenarios) < sum(r.n for r in fixed.scenarios)
