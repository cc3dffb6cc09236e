"""The marker: one item per scenario, each failing on its own rejection; the verdict decided once per decoder."""

import xml.etree.ElementTree as ET

import pytest

from tests.extras import needs

CORE = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy"]

PASSING = f"""
import pytest

@pytest.mark.specverify(factory="specverify.reference:make_decoder", scenarios={CORE!r})
def test_reference_is_exact(specverify_result):
    assert specverify_result.status == "pass" and specverify_result.covered
    assert specverify_result.results[0].name == specverify_result.scenario
"""

FAILING = """
import pytest

@pytest.mark.specverify(factory="specverify.zoo:residual_softmax", scenarios=["temperature-1"])
def test_engine_is_exact():
    pass
"""


def test_passing_suite_header_summary_and_junit(run_suite, pytester):
    result = run_suite(PASSING, "--specverify-seed", "11", "--specverify-fixed", "--junitxml", "junit.xml", "-rA")
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "specverify: level=quick seed=11 alpha=1e-06 models=toy isolation=none "
            "(reproduce: --specverify-seed=11 --specverify-level=quick --specverify-fixed)",
            "*= specverify certification =*",
            "specverify.reference:make_decoder — test_engine.py::test_reference_is_exact · level quick · seed 11*",
            "  temperature-1 * sampling * pass * 14888 *",
            "  greedy * greedy * pass * 120 *",
            "  VERDICT: EXACT — exact on 4 of * scenarios: temperature-1, eos-in-block, max-tokens-not-multiple, "
            "greedy*",
            "  meets: exact meets require=exact",
            "  reproduce: pytest 'test_engine.py::test_reference_is_exact' --specverify-seed=11 "
            "--specverify-level=quick --specverify-fixed",
            "             specverify certify specverify.reference:make_decoder --level quick --isolation none "
            "--fixed *",
            "specverify: 1 of 1 decoder certification(s) meet their requirement",
            "PASSED test_engine.py::test_reference_is_exact[[]temperature-1[]]",
        ]
    )
    assert "Certificate(" not in out
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    first = props["test_reference_is_exact[temperature-1]"]
    assert first["specverify_verdict"] == "pass" and first["specverify_n"] == "14888"
    assert first["specverify_seed"] == "11" and first["specverify_scenario"] == "temperature-1"
    assert first["specverify_pvalue"].startswith("temperature-1=") and float(first["specverify_tv_estimate"]) < 0.05
    assert "--scenario temperature-1 --seed 11" in first["specverify_reproduce"]
    assert props["test_reference_is_exact[greedy]"]["specverify_pvalue"] == "-"


@needs("report", "--specverify-html")
def test_failing_suite_names_the_bug_and_how_to_reproduce(run_suite, pytester):
    result = run_suite(FAILING, "--specverify-html", "report.html")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "specverify: specverify.zoo:residual_softmax · scenario temperature-1: law rejected at the per-test α *",
            "✗ temperature-1 (first-position, middle and full acceptance; residual; bonus)",
            "    N = * of * planned; p-value * < * (its planned per-test α); the omnibus test's own p *",
            "    TV estimate 0.* [[]*]; an exact decoder shows <= 0.* at this N (95 %)",
            "    worst outcomes (observed vs expected under the exact law, standardized residual):",
            "known bug: residual_softmax — The residual is passed through softmax*",
            "Reproduce: pytest 'test_engine.py::test_engine_is_exact[[]temperature-1[]]' --specverify-seed=0 *",
            "           specverify certify specverify.zoo:residual_softmax --level quick --isolation none "
            "--sequential --scenario temperature-1 --seed 0",
            "  temperature-1 * sampling * FAIL * *",
            "  FAILS: inconclusive does not meet require=exact",
        ]
    )
    assert "Certificate(" not in out and "Traceback" not in out
    page = (pytester.path / "report.html").read_text()
    assert "specverify.zoo:residual_softmax" in page and "temperature-1" in page


def test_not_covered_is_reported_and_inconclusive_fails_unless_allowed(run_suite, pytester):
    pytester.makepyfile(
        engine="""
        from specverify.reference import make_decoder

        def no_top_k(target, draft):
            decoder = make_decoder(target, draft)
            decoder.capabilities = decoder.capabilities - {"top_k"}
            return decoder
        """
    )
    source = """
import pytest

@pytest.mark.specverify(factory="engine:no_top_k", scenarios=["temperature-1", "top-k"])
def test_strict():
    pass

@pytest.mark.specverify(factory="engine:no_top_k", scenarios=["temperature-1", "top-k"], allow_inconclusive=True)
def test_allowed():
    pass
"""
    result = run_suite(source, "-rs")
    result.assert_outcomes(passed=2, skipped=2, failed=1)  # test_strict's verdict report
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # test_strict: inconclusive (core scenarios not covered)
    result.stdout.fnmatch_lines(
        [
            "  top-k * sampling * not covered *",
            "  meets: inconclusive, allowed (allow_inconclusive=True; require=exact)",
            "  FAILS: inconclusive does not meet require=exact",
            "specverify: 1 of 2 decoder certification(s) meet their requirement; failing: engine:no_top_k",
            "SKIPPED [[]1[]] test_engine.py:*: specverify: top-k not covered: the decoder does not declare "
            "[[]'top_k'[]]",
        ]
    )


def test_marker_arguments_override_options_and_fixtures_serve_pairs_and_matrix(run_suite):
    source = """
import pytest
from specverify.certification import Certificate

@pytest.mark.specverify(factory="specverify.reference:make_decoder", scenarios=["temperature-1"], seed=3,
                        allow_inconclusive=True)
def test_marker(specverify_result):
    assert "--seed 3" in specverify_result.result.reproduce

def test_fixture(specverify_certify, specverify_options, specverify_scenarios):
    cert = specverify_certify("specverify.reference:make_decoder", scenarios=["temperature-1"])
    assert isinstance(cert, Certificate) and cert.seed == 8 == specverify_options["seed"]
    assert "greedy" in specverify_scenarios and specverify_scenarios["greedy"].core

@pytest.mark.parametrize("specverify_pair", [0.0, ("toy", 1.0), {"vocab_size": 6}], indirect=True)
def test_pairs(specverify_pair):
    assert specverify_pair.target.vocab == specverify_pair.draft.vocab

def test_result_needs_the_marker(specverify_result):
    pass
"""
    result = run_suite(source, "--specverify-seed", "8")
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_result_needs_the_marker: specverify_result needs @pytest.mark.specverify(factory='module:attr')*",
            "specverify.reference:make_decoder — test_engine.py::test_fixture · level quick · seed 8 *",
            "  reproduce: specverify certify specverify.reference:make_decoder --level quick --isolation none "
            "--sequential --scenario temperature-1 --seed 8",
        ]
    )


def test_a_skip_mark_is_honoured_before_anything_is_certified(run_suite):
    source = """
import pytest

@pytest.mark.skip(reason="engine not built here")
@pytest.mark.specverify(factory="nosuchmodule:make", scenarios=["temperature-1"])
def test_engine():
    pass
"""
    result = run_suite(source, "-rs")
    result.assert_outcomes(skipped=1)
    assert result.ret == pytest.ExitCode.OK and "specverify certification" not in result.stdout.str()


SHARED = """
import pytest

from specverify.reference import make_decoder

MADE = []


def counted(target, draft):
    MADE.append(1)
    return make_decoder(target, draft)


def breaks_once(target, draft):  # the reference, until its first call of a sampled item
    decoder = make_decoder(target, draft)
    MADE.append(1)
    if len(MADE) == 1:
        decoder.sample = lambda request, n, start=0: 1 / 0
    return decoder


@pytest.mark.specverify(factory=f"{__name__}:counted", scenarios=["temperature-1", "top-k", "top-p"],
                        allow_inconclusive=True)  # one model pair; not the core
def test_shared(specverify_result):
    pass


def test_zz_one_decoder_for_its_items():
    assert len(MADE) == 1
"""


def test_the_items_of_one_decoder_share_its_worker_and_a_broken_one_is_not_reused(run_suite):
    """One pytest process makes a decoder once for all its items (each item runs its parts on the kept worker); after
    an item broke the protocol the next one starts afresh, as it would alone."""
    result = run_suite(SHARED, "--specverify-level", "quick")
    result.assert_outcomes(passed=4)
    broken = SHARED.replace(":counted", ":breaks_once").replace("assert len(MADE) == 1", "assert len(MADE) == 2")
    result = run_suite(broken, "test_broken.py", "--specverify-level", "quick", name="test_broken")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1 and outcomes.get("passed") == 3, result.stdout.str()[-2000:]
    assert "ZeroDivisionError" in result.stdout.str()  # the failed item says why; the others passed on a fresh one
    result.stdout.fnmatch_lines(["FAILED test_broken.py::test_shared[[]temperature-1[]]*"])
