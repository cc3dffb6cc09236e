"""What a session leaves for CI: one certificate file and one summary block per decoder (fixture certificates named
apart, listed without a verdict of their own), the report extra checked at start-up, JUnit as before."""

import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from specverify.enums import Verdict

TWO_DECODERS = """
import pytest

@pytest.mark.specverify(factory="specverify.reference:make_decoder", scenarios=["temperature-1"],
                        allow_inconclusive=True)
def test_reference(specverify_result):
    pass

@pytest.mark.specverify(factory="specverify.zoo:never_speculate", scenarios=["temperature-1"], allow_inconclusive=True)
def test_zoo(specverify_result):
    pass

def test_fixture(specverify_certify):
    specverify_certify("specverify.reference:make_decoder", scenarios=["temperature-1"])
"""


def _blocks(stdout: str) -> list:
    summary = stdout.split("specverify certification")[1].split("\nspecverify: ")[0]
    return [b for b in summary.strip("= \n").split("\n\n") if b.strip() and not b.startswith("p-value: ")]


def test_one_certificate_file_per_decoder_and_the_fixtures_named_apart(run_suite, pytester):
    import specverify.report

    (pytester.path / "out").mkdir()
    result = run_suite(TWO_DECODERS, "--specverify-json", "out/cert.json")
    result.assert_outcomes(passed=3)
    files = sorted(p.name for p in (pytester.path / "out").iterdir())
    assert files == [
        "cert-specverify.reference--make_decoder.json",
        "cert-specverify.zoo--never_speculate.json",
        "cert.fixture-test_fixture.json",
    ]
    zoo = specverify.report.load_certificate(str(pytester.path / "out" / files[1]))
    assert zoo.factory == "specverify.zoo:never_speculate"
    blocks = _blocks(result.stdout.str())
    assert len(blocks) == 2  # one per decoder: the fixture's call sits in the reference's block
    reference = blocks[0]
    assert reference.count("VERDICT:") == 1 and reference.count("specverify.reference:make_decoder — ") == 1
    assert "  specverify_certify in test_engine.py::test_fixture (its test asserts on it): temperature-1 pass" in (
        reference
    )
    assert "certificate written: out/cert.fixture-test_fixture.json" in reference


def test_one_decoder_writes_the_path_given(run_suite, pytester):
    (pytester.path / "out").mkdir()
    source = TWO_DECODERS.split('@pytest.mark.specverify(factory="specverify.zoo')[0]
    source += "\ndef test_fixture(specverify_certify):\n"
    source += '    specverify_certify("specverify.reference:make_decoder", scenarios=["temperature-1"])\n'
    result = run_suite(source, "--specverify-json", "out/cert.json")
    result.assert_outcomes(passed=2)
    assert sorted(p.name for p in (pytester.path / "out").iterdir()) == ["cert.fixture-test_fixture.json", "cert.json"]


REGRESSION = """
import pytest

@pytest.mark.specverify(factory="engine:make", require="greedy-only", scenarios=["temperature-1", "greedy"])
def test_engine():
    pass

def test_fixture(specverify_certify):
    specverify_certify("engine:make", scenarios=["greedy"])
"""


def test_a_regressed_decoder_has_one_block_one_verdict_and_its_name_once(run_suite, pytester):
    import specverify as sv
    from specverify.testing.baseline import write_baseline

    stored = sv.certify("specverify.reference:make_decoder", level="quick", scenarios=["greedy"], isolation="none")
    write_baseline(str(pytester.path / "base"), replace(stored, verdict=Verdict.EXACT, factory="engine:make"))
    pytester.makepyfile(engine="from specverify.zoo import resample_from_target as make\n")
    result = run_suite(REGRESSION, "--specverify-baseline", "base", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=3, failed=1)
    (block,) = _blocks(result.stdout.str())
    assert block.count("VERDICT:") == 1 and block.count("engine:make — ") == 1, block  # was: two blocks, two verdicts
    assert "  FAILS: regressed against the baseline base/engine--make.json (merged from 2 tests): greedy-only is " in (
        block
    )
    root = ET.parse(pytester.path / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    props = [p.get("name") for p in suite.find("properties")]
    assert props == ["specverify_verdict[test_engine.py::test_engine]"]  # the fixture's test keeps its own verdict
    failure = next(c for c in suite.iter("testcase") if c.get("name") == "specverify-verdict").find("failure")
    assert failure.text.count("VERDICT:") == 1 and failure.text.count("engine:make —") == 1, failure.text


@pytest.mark.parametrize("ini", [False, True])
def test_html_without_the_report_extra_stops_pytest_at_start_up(run_suite, pytester, monkeypatch, ini):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    if ini:
        pytester.makeini("[pytest]\nspecverify_html = cert.html\n")
    args = () if ini else ("--specverify-html", "cert.html")
    result = run_suite(TWO_DECODERS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    where = "ini specverify_html" if ini else "--specverify-html"
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {where}='cert.html': matplotlib is not installed here. "
            "* pip install 'specverify-toolkit[[]report[]]'*"
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "specverify certification" not in result.stdout.str()  # nothing ran


def test_an_html_page_is_written_per_decoder(run_suite, pytester):
    pytest.importorskip("matplotlib")
    source = TWO_DECODERS.split('@pytest.mark.specverify(factory="specverify.zoo')[0]
    result = run_suite(source, "--specverify-html", "cert.html")
    result.assert_outcomes(passed=1)
    page = (pytester.path / "cert.html").read_text()
    assert "<img" in page and "omnibus p" in page
