"""The collision check names shared randomness only when the requests' own law passes: a decoder whose law is
wrong collides more (or less) by itself, and its note says so instead of blaming the RNG."""

import specverify as sv
from specverify.reference import make_decoder


class _PairsReplay:
    """The reference, but request 2i+1 of a call replays request 2i's draws (their own law stays exact)."""

    def __init__(self, inner):
        self.inner = inner
        self.capabilities = inner.capabilities - {"accepted"}

    def __call__(self, requests):
        done = list(self.inner(requests))
        return [done[i - 1] if i % 2 else c for i, c in enumerate(done)]


def pairs_replay(target, draft):
    return _PairsReplay(make_decoder(target, draft))


def _collision(factory):
    cert = sv.certify(factory, level="quick", scenarios=["unseeded-collision"], isolation="none", seed=5)
    (row,) = cert.scenarios
    return row


def test_a_wrong_law_is_not_blamed_on_shared_randomness():
    row = _collision("specverify.zoo:argmax_verify")  # deterministic drafts-accept rule: every pair collides
    assert row.passed is False and "too many" in row.note, row.note
    assert "law of these requests is itself off the exact law" in row.note
    assert "share or replay" not in row.note


def test_pairs_that_replay_randomness_are_blamed_when_their_law_passes():
    row = _collision(pairs_replay)
    assert row.passed is False, row.note
    assert "share or replay randomness (their own law passes)" in row.note, row.note


def test_an_exact_decoder_collides_at_the_exact_rate():
    row = _collision("specverify.reference:make_decoder")
    assert row.passed is True and "too" not in row.note, row.note


def test_the_report_reads_the_collision_row_with_the_sampling_scenarios():
    from specverify.certification.checks.collision import blame
    from specverify.report import render_text
    from specverify.report.text import LAW_OFF

    assert LAW_OFF in blame(True, 0.0, 1e-8)  # the report recognises the check's note
    subset = ["temperature-1", "unseeded-collision"]
    wrong = sv.certify("specverify.zoo:argmax_verify", level="quick", scenarios=subset, isolation="none")
    assert "the sampling scenarios fail too (temperature-1): the law is wrong" in render_text(wrong)
    shared = sv.certify("specverify.zoo:unseeded_shared_stream", level="quick", scenarios=subset, isolation="none")
    (row,) = [s for s in shared.scenarios if s.kind == "collision"]
    assert row.passed is False and LAW_OFF in row.note  # one stream for the whole call: no pair is independent
    assert "every sampling scenario passes: the requests of a call share one RNG stream" in render_text(shared)
