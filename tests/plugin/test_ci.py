"""The plugin as CI reads it (#26, item 5): the decoder's verdict in the terminal counts and in JUnit, a summary
that agrees with its failed items, the look rule / --require-* / timeout as options and marker arguments, reproduce
lines that keep --specverify-scenario, baselines that do not churn and a tolerance for them."""

import time
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


@pytest.mark.slow  # real xdist workers import torch: ~30 s on 2 cores
def test_the_verdict_report_under_xdist(run_suite, pytester):
    pytest.importorskip("xdist")
    result = run_suite(SUBSET, "-n", "2", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    suite, _ = _junit(pytester)
    assert suite.get("failures") == "1"


BASELINE_SUITE = """
import pytest

@pytest.mark.specverify(factory="engine:make", allow_inconclusive=True, scenarios=["temperature-1"])
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
    worse.assert_outcomes(failed=1)  # the acceptance dropped; no extra verdict report
    out = worse.stdout.str()
    assert "  meets:" not in out and "not worse than inconclusive\n" not in out, out
    worse.stdout.fnmatch_lines(
        [
            "  temperature-1 * sampling * regressed *",
            "  FAILS: inconclusive, allowed (allow_inconclusive=True; require=exact), but 1 item(s) failed: "
            "temperature-1 (regressed)",
            "  baseline b/engine--make.json: not worse than its stored inconclusive, but 1 scenario(s) regressed "
            "against it: temperature-1",
        ]
    )
    tolerant = run_suite(BASELINE_SUITE, "--specverify-baseline", "b", "--specverify-baseline-tolerance", "90%")
    tolerant.assert_outcomes(passed=1)  # the drop is significant, but within 90 % of the stored mean


def test_a_baseline_of_an_unchanged_decoder_is_the_same_file_byte_for_byte():
    import specverify as sv
    from specverify.report import render_json
    from specverify.testing.baseline import baseline_text

    runs = [
        sv.certify("specverify.reference:make_decoder", level="quick", scenarios=["temperature-1"], isolation="none")
        for _ in range(2)
    ]
    assert render_json(runs[0]) != render_json(runs[1])  # the certificates differ in their elapsed times
    assert baseline_text(runs[0]) == baseline_text(runs[1])  # the stored baselines do not (was: every update churned)
    assert '"elapsed_s": 0.0' in baseline_text(runs[0])


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


HELPERS = """
from specverify.testing import assert_exact

def test_helper_fails():
    assert_exact("specverify.zoo:residual_softmax", level="quick", scenarios=["temperature-1"], isolation="none")

def test_bad_argument(specverify_certify):
    specverify_certify("specverify.reference:make_decoder", level="bogus")

def test_own_assertion():
    assert 1 + 1 == 3
"""


def _failure_sections(result) -> dict:
    text = result.stdout.str()
    body = text.split("= FAILURES =")[1].split("short test summary info")[0]
    sections, name = {}, None
    for line in body.splitlines():
        if line.startswith("____") and line.endswith("____"):
            name = line.strip("_ ")
            sections[name] = []
        elif name:
            sections[name].append(line)
    return sections


def test_a_helper_failure_shows_the_test_line_and_the_message_not_library_frames(run_suite):
    result = run_suite(HELPERS)
    result.assert_outcomes(failed=3)
    sections = _failure_sections(result)
    for name in ("test_helper_fails", "test_bad_argument"):
        lines = sections[name]
        assert not any("specverify/" in line and ".py:" in line for line in lines), "\n".join(lines)
        assert len(lines) < 25, "\n".join(lines)  # was ~40 lines of the helper's and certify's source
    assert any(
        "E       Reproduce: specverify certify specverify.zoo:residual_softmax" in x
        for x in sections["test_helper_fails"]
    )
    assert any("level='bogus' must be one of" in line for line in sections["test_bad_argument"])
    assert any("assert (1 + 1) == 3" in line for line in sections["test_own_assertion"])  # untouched
    full = run_suite(HELPERS, "--full-trace", "-k", "bad_argument")
    assert "specverify/certification/config/run_config.py" in full.stdout.str()  # --full-trace keeps every frame


SLOW_ENGINE = """
import time

from specverify.reference import make_decoder


class Slow:  # the reference, with a first call that takes half a second (an engine warming up)
    def __init__(self, inner):
        self.inner, self.capabilities, self.calls = inner, inner.capabilities, 0

    def __call__(self, requests):
        self.calls += 1
        if self.calls == 1:
            time.sleep(0.5)
        return self.inner(requests)


def make(target, draft):
    return Slow(make_decoder(target, draft))
"""


def test_a_long_item_prints_progress_lines(run_suite, pytester):
    pytester.makepyfile(engine=SLOW_ENGINE)
    slow = SUBSET.replace('"specverify.reference:make_decoder", scenarios=["temperature-1"]', '"engine:make", '
                          'scenarios=["greedy"], allow_inconclusive=True')  # fmt: skip
    result = run_suite(slow, "--specverify-progress", "0.1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["specverify: test_engine.py::test_subset[[]greedy[]] still certifying after 0 s — [[]1/2[]] greedy"]
    )


def test_the_heartbeat_stops_with_its_block():
    from specverify.testing.progress import Heartbeat

    lines = []
    with Heartbeat(lines.append, "x::y", 0.01) as beat:
        beat.progress("specverify: [1/2] greedy (elapsed 0 s)")
        time.sleep(0.1)
    count = len(lines)
    time.sleep(0.05)
    assert count >= 2 and len(lines) == count  # stopped with the block
    assert lines[-1] == "specverify: x::y still certifying after 0 s — [1/2] greedy"
