"""Under pytest-xdist the items spread over workers, and the controller decides the same verdict as a serial run
and writes the same JUnit properties."""

import json
import xml.etree.ElementTree as ET

import pytest

SUITE = """
import pytest

@pytest.mark.specverify(factory="specverify.reference:make_decoder", scenarios=["temperature-1", "gamma-1"],
                        allow_inconclusive=True)
def test_reference(specverify_result):
    pass

@pytest.mark.specverify(factory="specverify.zoo:draft_probs_off_by_one", scenarios=["temperature-1", "gamma-1"])
def test_engine():
    pass
"""


def _verdicts(path):
    doc_of = {}
    for file in sorted(path.glob("cert-*.json")):
        doc = json.loads(file.read_text())
        doc_of[doc["factory"]] = (
            doc["verdict"],
            [(s["name"], s["n"], s["pvalue"], s["passed"]) for s in doc["scenarios"]],
        )
    return doc_of


def _summary(result):
    lines = result.stdout.str().splitlines()
    return [line for line in lines if line.startswith(("  VERDICT:", "  meets:", "  FAILS:", "specverify: "))]


def _junit(path):
    cases = ET.parse(path).getroot().iter("testcase")
    return {c.get("name"): [(p.get("name"), p.get("value")) for p in c.iter("property")] for c in cases}


def test_xdist_run_decides_the_serial_runs_verdict(pytester):
    pytester.makepyfile(test_engine=SUITE)
    common = ("--specverify-isolation", "none", "-p", "no:randomly", "--specverify-json", "cert.json")
    serial = pytester.runpytest(*common, "--junitxml", "serial.xml")
    serial.assert_outcomes(passed=3, failed=1)
    (pytester.path / "serial").mkdir()
    for file in pytester.path.glob("cert-*.json"):
        file.rename(pytester.path / "serial" / file.name)
    spread = pytester.runpytest("-n", "2", "-v", *common, "--junitxml", "spread.xml")
    spread.assert_outcomes(passed=3, failed=1)
    assert serial.ret == spread.ret == pytest.ExitCode.TESTS_FAILED
    ran_on = {line.split("]")[0] for line in spread.stdout.lines if line.startswith("[gw")}
    assert ran_on == {"[gw0", "[gw1"}, spread.stdout.str()  # the items were spread over both workers
    assert _summary(serial) == _summary(spread)
    assert any("FAILS: inconclusive does not meet require=exact" in line for line in _summary(spread))
    got, want = _verdicts(pytester.path), _verdicts(pytester.path / "serial")
    assert got == want and set(got) == {"specverify.reference:make_decoder", "specverify.zoo:draft_probs_off_by_one"}
    # JUnit: the workers' items carry their properties to the controller's file, the same as a serial run's
    junit_serial, junit_spread = _junit(pytester.path / "serial.xml"), _junit(pytester.path / "spread.xml")
    assert junit_spread == junit_serial and len(junit_spread) == 4
    verdicts = {name: dict(props).get("specverify_verdict") for name, props in junit_spread.items()}
    assert verdicts == {
        "test_reference[temperature-1]": "pass",
        "test_reference[gamma-1]": "pass",
        "test_engine[temperature-1]": "FAIL",  # the off-by-one draft probs; at γ = 1 there is no second draft
        "test_engine[gamma-1]": "pass",
    }
