"""``speculation_observed``: from the completions' per-round accepted counts, else from the engine's own counters (a
server reports no rounds, but its ``/metrics`` counts accepted draft tokens), else unknown."""

from types import SimpleNamespace

from specverify.certification.results.verdict import speculation_observed


def _result(window):
    counters = None if window is None else {"ok": True, "identities": [], "window": window}
    return SimpleNamespace(counters=counters)


def test_per_round_counts_decide_first():
    assert speculation_observed([], [{0: 5, 2: 1}]) is True
    assert speculation_observed([_result({"num_accepted_tokens": 9})], [{0: 5}]) is False


def test_the_engine_counters_decide_when_no_round_was_reported():
    assert speculation_observed([_result({"num_accepted_tokens": 0}), _result({"num_accepted_tokens": 3})], []) is True
    assert speculation_observed([_result({"num_accepted_tokens": 0, "num_drafts": 40})], []) is False


def test_unknown_without_rounds_or_counters():
    assert speculation_observed([_result(None), _result({"num_drafts": None})], []) is None
    assert speculation_observed([], []) is None
