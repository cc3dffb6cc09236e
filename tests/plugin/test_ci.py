"""The plugin as CI reads it (#26, item 5): the decoder's verdict in the terminal counts and in JUnit, a summary
that agrees with its failed items, the look rule / --require-* / timeout as options and marker arguments, reproduce
lines that keep --specverify-scenario, baselines that do not churn and a tolerance for them."""

import xml.etree.ElementTree as ET

import pytest

SUBSET = """
import pytest

@pytest.mark.specverify(factory="specverify.reference:make_decoder", scenarios=["temperature-1"])
def test_subset(specverify_result):
    assert specverify_result.status == "pass"
"""


def _junit(pytester):
    root = ET.parse(pytester.path / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return suite, {c.get("name"): c for c in suite.iter("testcase")}


def test_a_decoder_that_misses_its_requirement_fails_in_the_counts_and_in_junit(run_suite, pytester):
    result = run_suite(SUBSET, "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)  # was "1 passed" with exit status 1 and failures="0"
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED test_engine.py::test_subset::specverify-verdict - *"])
    suite, cases = _junit(pytester)
    assert suite.get("failures") == "1" and suite.get("tests") == "2"
    failure = cases["specverify-verdict"].find("failure")
    assert "inconclusive does not meet require=exact" in failure.get("message")
    assert "specverify certify specverify.reference:make_decoder" in failure.text
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["specverify_verdict[test_engine.py::test_subset]"].startswith("inconclusive (FAILS:")


def test_a_decoder_that_meets_its_requirement_adds_no_report(run_suite, pytester):
    source = SUBSET.replace('scenarios=["temperature-1"]', 'scenarios=["temperature-1"], allow_inconclusive=True')
    result = run_suite(source, "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    suite, cases = _junit(pytester)
    assert suite.get("failures") == "0" and "specverify-verdict" not in cases
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["specverify_verdict[test_engine.py::test_subset]"].startswith("inconclusive (meets:")


def test_the_verdict_report_under_xdist(run_suite, pytester):
    pytest.importorskip("xdist")
    result = run_suite(SUBSET, "-n", "2", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    suite, _ = _junit(pytester)
    assert suite.get("failures") == "1"


BASELINE_SUITE = """
import pytest

@pytest.mark.specverify(factory="engine:make", allow_inconclusive=True, scenarios=["temperature-1", "eos-in-block"])
def test_engine():
    pass
"""
EXACT = "from specverify.reference import make_decoder as make\n"
FAR_DRAFT = """
from specverify.oracles import draft_near
from specverify.reference import make_decoder

def make(target, draft):  # an exact decoder whose draft is farther away: fewer drafts accepted
    return make_decoder(target, draft_near(target, distance=1.0, seed=99))
"""


def test_a_regressed_item_is_not_summarised_as_meeting_the_baseline(run_suite, pytester):
    pytester.makepyfile(engine=EXACT)
    assert run_suite(BASELINE_SUITE, "--specverify-baseline", "b", "--specverify-update-baseline").ret == 0
    pytester.makepyfile(engine=FAR_DRAFT)
    worse = run_suite(BASELINE_SUITE, "--specverify-baseline", "b")
    worse.assert_outcomes(failed=2)  # both scenarios' acceptance dropped; no extra verdict report
    out = worse.stdout.str()
    assert "  meets:" not in out and "not worse than inconclusive\n" not in out, out
    worse.stdout.fnmatch_lines(
        [
            "  temperature-1 * sampling * regressed *",
            "  FAILS: inconclusive, allowed (allow_inconclusive=True; require=exact), but 2 item(s) failed: "
            "temperature-1 (regressed), eos-in-block (regressed)",
            "  baseline b/engine--make.json: verdict inconclusive, not worse than inconclusive, but 2 scenario(s) "
            "regressed against it: temperature-1, eos-in-block",
        ]
    )
    tolerant = run_suite(BASELINE_SUITE, "--specverify-baseline", "b", "--specverify-baseline-tolerance", "90%")
    tolerant.assert_outcomes(passed=2)  # the drop is significant, but within 90 % of the stored mean


def test_a_baseline_update_rewrites_nothing_when_nothing_changed(run_suite, pytester):
    pytester.makepyfile(engine=EXACT)
    assert run_suite(BASELINE_SUITE, "--specverify-baseline", "b", "--specverify-update-baseline").ret == 0
    path = pytester.path / "b" / "engine--make.json"
    first = path.read_bytes()
    assert b'"elapsed_s": 0.0' in first and b'"elapsed_s": 0.' in first
    assert run_suite(BASELINE_SUITE, "--specverify-baseline", "b", "--specverify-update-baseline").ret == 0
    assert path.read_bytes() == first  # the same seed and decoder: byte for byte (was: elapsed times churned)
    assert run_suite(BASELINE_SUITE, "--specverify-baseline", "b").ret == 0  # the stored file still loads


@pytest.mark.parametrize("value", ["1.5", "-1", "x"])
def test_a_bad_tolerance_is_a_usage_error(run_suite, value):
    result = run_suite(SUBSET, "--specverify-baseline-tolerance", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--specverify-baseline-tolerance='{value}' must be a fraction in [[]0, 1)*"])


REQUIRE = """
import pytest

@pytest.mark.specverify(factory="specverify.zoo:never_speculate", scenarios=["temperature-1"],
                        allow_inconclusive=True, {marker})
def test_engine():
    pass
"""


def test_require_speculation_as_a_marker_argument_and_as_an_option(run_suite):
    marked = run_suite(REQUIRE.format(marker="require_speculation=True"))
    marked.assert_outcomes(passed=1, failed=1)
    marked.stdout.fnmatch_lines(["  FAILS: inconclusive does not meet require=exact; require_speculation: NOT *"])
    plain = run_suite(REQUIRE.format(marker="timeout=30"))
    plain.assert_outcomes(passed=1)
    flagged = run_suite(REQUIRE.format(marker="timeout=30"), "--specverify-require-speculation")
    flagged.assert_outcomes(passed=1, failed=1)
    flagged.stdout.fnmatch_lines(
        ["  reproduce: pytest 'test_engine.py::test_engine' * --specverify-require-speculation*",
         "             specverify certify specverify.zoo:never_speculate * --timeout 30 *--require-speculation*"]
    )  # fmt: skip


def test_timeout_require_and_the_look_rule_as_options_reach_the_certificate(run_suite):
    args = ["--specverify-timeout", "45", "--specverify-require", "greedy-only", "--specverify-fixed"]
    result = run_suite(SUBSET.replace("scenarios=", 'require="exact", scenarios='), *args)
    result.stdout.fnmatch_lines(
        [
            "  reproduce: pytest 'test_engine.py::test_subset' --specverify-seed=0 --specverify-level=quick "
            "--specverify-fixed --specverify-timeout=45 --specverify-require=greedy-only",
            "             specverify certify specverify.reference:make_decoder --level quick --isolation none "
            "--timeout 45 --fixed --scenario temperature-1 --seed 0",
        ]
    )  # the marker's require="exact" wins over --specverify-require (its certificate says exact: no --require)


def test_the_marker_takes_the_look_rule(run_suite):
    source = SUBSET.replace("scenarios=", "sequential=False, allow_inconclusive=True, scenarios=")
    result = run_suite(source)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["             specverify certify * --fixed --scenario temperature-1 --seed 0"])


def test_reproduce_lines_keep_the_session_scenarios(run_suite):
    source = SUBSET.replace(', scenarios=["temperature-1"]', ", allow_inconclusive=True")
    result = run_suite(source, "--specverify-scenario", "temperature-1", "--specverify-scenario", "greedy")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "  reproduce: pytest 'test_engine.py::test_subset' --specverify-seed=0 --specverify-level=quick "
            "--specverify-sequential --specverify-scenario=temperature-1 --specverify-scenario=greedy",
        ]
    )
