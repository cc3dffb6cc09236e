"""The recurrent axis: only decoders declaring ``recurrent`` receive its scenarios (the others are not covered, with
the reason), the reference passes them and ``recurrent_state_not_rolled_back`` is refused on both."""

import pytest

from specverify import certify

RECURRENT = ["recurrent", "greedy-recurrent"]


def results(factory, scenarios):
    cert = certify(factory, level="quick", seed=0, scenarios=scenarios, isolation="none")
    return cert, {s.name: s for s in cert.scenarios}


def test_a_decoder_that_does_not_declare_recurrent_is_not_covered_there_with_the_reason():
    cert, got = results("specverify.zoo:reference", RECURRENT)  # the KV-cache reference: no 'recurrent'
    for name in RECURRENT:
        assert not got[name].covered and "does not declare ['recurrent']" in got[name].note, got[name].note
    assert cert.verdict == "inconclusive", cert.reason  # never a silent pass


@pytest.mark.slow
def test_the_reference_passes_the_recurrent_scenarios_and_the_unrestored_state_is_refused():
    _, ref = results("specverify.reference:make_decoder", ["temperature-1", "greedy"] + RECURRENT)
    assert all(s.covered and s.passed for s in ref.values()), {n: s.note for n, s in ref.items()}
    cert, got = results("specverify.zoo:recurrent_state_not_rolled_back", ["temperature-1", "greedy"] + RECURRENT)
    failed = {n for n, s in got.items() if s.covered and not s.passed}
    assert failed == set(RECURRENT), cert.reason
    assert cert.verdict == "approximate", cert.reason
