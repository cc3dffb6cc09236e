"""The slow-decoder note says what it measured: a fixed cost per scenario or a cost per outcome drawn, and names
the fast path ``decoder.sample(request, n)``."""

from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.results.verdict import slow_note

SIZES = (900, 2600, 5300, 6600)


def _rows(fixed_s: float, per_outcome_s: float) -> list:
    return [
        ScenarioResult(f"s{i}", "sampling", "", covered=True, n=n, elapsed_s=fixed_s + n * per_outcome_s)
        for i, n in enumerate(SIZES)
    ]


def test_a_cost_per_outcome_names_the_fast_path():
    note = slow_note(_rows(0.05, 0.0078))  # a per-request Python decoder: ~128 outcomes/s
    assert note.startswith("note: the decoder is slow (128 outcomes/s < 1,000); measured over 4 sampling scenario")
    assert "0.05 s per scenario + 7.8 ms per outcome" in note  # the fit recovers both parts
    assert "the cost is per outcome drawn" in note and "decoder.sample(request, n)" in note
    assert "thread" not in note  # oversubscription was never measured


def test_a_fixed_cost_per_scenario_is_named_as_such():
    note = slow_note(_rows(5.0, 0.00005))  # an engine that starts per scenario, then draws fast
    assert "5 s per scenario + 0.05 ms per outcome" in note
    assert "a fixed one per scenario (start-up or per-call overhead), not the draws" in note


def test_a_fast_decoder_or_a_short_run_gets_no_note():
    assert slow_note(_rows(0.01, 0.00001)) == ""
    assert slow_note(_rows(0.0, 0.0001)[:1]) == ""  # 0.09 s: too little to measure
