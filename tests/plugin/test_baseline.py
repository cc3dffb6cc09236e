"""Baselines: a stored certificate per decoder; a worse verdict or a drop in acceptance length fails the run."""

from dataclasses import replace

import pytest

from specverify.certification.results.evidence import ScenarioResult
from specverify.enums import ScenarioKind, Verdict
from specverify.testing.baseline import acceptance_drop, baseline_name, verdict_regression

SUITE = """
import pytest

@pytest.mark.specverify(factory="engine:make", require="greedy-only", scenarios={scenarios!r})
def test_engine():
    pass
"""
EXACT = "from specverify.reference import make_decoder as make\n"
GREEDY_ONLY = "from specverify.zoo import resample_from_target as make\n"  # the seed's failure mode: greedy-only
FAR_DRAFT = """
from specverify.oracles import draft_near
from specverify.reference import make_decoder

def make(target, draft):  # an exact decoder whose draft is farther away: fewer drafts accepted
    return make_decoder(target, draft_near(target, distance=1.0, seed=99))
"""


def test_a_worse_verdict_than_the_stored_one_fails_the_session(run_suite, pytester):
    import specverify as sv
    from specverify.testing.baseline import write_baseline

    # a stored exact certificate of engine:make (as a full-matrix run writes it; made here from one scenario)
    stored = sv.certify(
        "specverify.reference:make_decoder", level="quick", scenarios=["temperature-1"], isolation="none"
    )
    write_baseline(str(pytester.path / "base"), replace(stored, verdict=Verdict.EXACT, factory="engine:make"))
    pytester.makepyfile(engine=GREEDY_ONLY)
    result = run_suite(SUITE.format(scenarios=["temperature-1", "greedy-grammar"]), "--specverify-baseline", "base")
    # greedy-only meets require=greedy-only: only the baseline fails the run, in a report of its own (JUnit too)
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  VERDICT: GREEDY-ONLY — temperature-1: law rejected*",
            "  FAILS: regressed against the baseline base/engine--make.json: greedy-only is worse than its stored "
            "exact (level quick, seed 0)",
        ]
    )


def test_an_acceptance_length_drop_fails_the_item(run_suite, pytester):
    pytester.makepyfile(engine=EXACT)
    suite = SUITE.format(scenarios=["temperature-1"]).replace('require="greedy-only"', "allow_inconclusive=True")
    first = run_suite(suite, "--specverify-baseline", "base", "--specverify-update-baseline")
    assert first.ret == pytest.ExitCode.OK
    same = run_suite(suite, "--specverify-baseline", "base")  # same seed, same decoder: identical counts
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["  baseline base/engine--make.json: not worse than its stored inconclusive"])
    pytester.makepyfile(engine=FAR_DRAFT)
    worse = run_suite(suite, "--specverify-baseline", "base")
    worse.assert_outcomes(failed=1)
    worse.stdout.fnmatch_lines(
        [
            "specverify: engine:make · scenario temperature-1: regressed against the baseline base/engine--make.json: "
            "temperature-1: mean accepted drafts * < baseline * (N = *); its interval at α = 3e-08 ends at *"
            "(p = *; the first round's accepted drafts)",
        ]
    )


def _result(accepted, **kw):
    return ScenarioResult("s", ScenarioKind.SAMPLING, "", covered=True, accepted_observed=accepted, **kw)


def test_acceptance_drop_is_a_one_sided_test_at_the_given_alpha():
    base = _result({0: 300, 1: 300, 2: 400})
    assert acceptance_drop(_result({0: 300, 1: 300, 2: 400}), base, 1e-6) is None  # identical
    assert acceptance_drop(_result({0: 200, 1: 300, 2: 500}), base, 1e-6) is None  # longer is never a regression
    assert acceptance_drop(_result({0: 310, 1: 300, 2: 390}), base, 1e-6) is None  # within noise
    drop = acceptance_drop(_result({0: 600, 1: 300, 2: 100}), base, 1e-6)
    assert drop.startswith("s: mean accepted drafts 0.500 (N = 1000) < baseline 1.100 (N = 1000)")
    assert "has none" in acceptance_drop(_result(None), base, 1e-6)
    assert acceptance_drop(_result({0: 1}), _result(None), 1e-6) is None  # nothing stored: nothing to compare


def test_verdict_order_for_regressions():
    from specverify.certification import RunConfig
    from specverify.certification.matrix.scenarios import TOY_MATRIX
    from specverify.certification.results.verdict import finish_certificate

    config = RunConfig(factory="m:f", level="quick")
    cert = finish_certificate([], None, (None, ""), config=config, matrix=TOY_MATRIX, elapsed_s=0.0)
    exact, worse = replace(cert, verdict=Verdict.EXACT), replace(cert, verdict=Verdict.APPROXIMATE)
    assert verdict_regression(worse, exact) == "approximate is worse than its stored exact (level quick, seed 0)"
    assert verdict_regression(exact, worse) is None
    assert verdict_regression(replace(cert, verdict=Verdict.INCONCLUSIVE), worse) is not None
    assert baseline_name("pkg.mod:make", "checkpoint") == "pkg.mod--make.checkpoint.json"
