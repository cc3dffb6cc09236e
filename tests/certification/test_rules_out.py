"""The exact verdict line names the TV it rules out: the level's scenarios' largest detectable TV, rounded up, and
batch composition's coarser plans apart."""

import math

from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.results.verdict import rules_out_phrase
from specverify.enums import ScenarioKind


def _result(name, kind, tv, member=None, covered=True):
    return ScenarioResult(name, kind, "", covered=covered, passed=True, detectable_tv=tv, member=member)


def test_the_largest_detectable_tv_rounded_up_and_composition_apart():
    results = [
        _result("temperature-1", ScenarioKind.SAMPLING, 0.02),
        _result("top-k", ScenarioKind.SAMPLING, 0.01931),
        _result("mixed-batch", ScenarioKind.MIXED, 0.02001, member="a"),
        _result("batch-composition", ScenarioKind.COMPOSITION, 0.04, member="small"),
        _result("batch-composition", ScenarioKind.COMPOSITION, 0.2, member="large"),
        _result("greedy", ScenarioKind.GREEDY, None),
        _result("unrun", ScenarioKind.SAMPLING, 0.5, covered=False),
    ]
    phrase = rules_out_phrase(results)
    assert phrase == " — rules out TV ≥ 0.021 per scenario; batch composition: small 0.04, large 0.2"


def test_no_phrase_without_a_finite_detectable_tv():
    assert rules_out_phrase([_result("greedy", ScenarioKind.GREEDY, None)]) == ""
    assert rules_out_phrase([_result("t", ScenarioKind.SAMPLING, math.inf)]) == ""
