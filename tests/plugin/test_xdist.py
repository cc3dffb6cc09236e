"""Under pytest-xdist the items spread over workers, and the controller decides the same verdict as a serial run
and writes the same JUnit properties.

The run under real xdist workers (processes that import torch: ~15 s on 2 cores) is ``-m slow``; the fast suite
drives the plugin's side of xdist's protocol in-process — the options ``pytest_configure_node`` hands a worker in,
each worker's ledger out through ``workeroutput`` into ``pytest_testnodedown`` — with each decoder's items split
over two runs acting as workers, and checks the same verdicts, summary and JUnit properties as a serial run.
"""

import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

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


EXPECTED_VERDICTS = {
    "test_reference[temperature-1]": "pass",
    "test_reference[gamma-1]": "pass",
    "test_engine[temperature-1]": "FAIL",  # the off-by-one draft probs; at γ = 1 there is no second draft
    "test_engine[gamma-1]": "pass",
}
COMMON = ("--specverify-isolation", "none", "-p", "no:randomly", "--specverify-json", "cert.json")


def _serial_run(pytester):
    """The suite run serially, its certificates moved to serial/."""
    pytester.makepyfile(test_engine=SUITE)
    serial = pytester.runpytest(*COMMON, "--junitxml", "serial.xml")
    serial.assert_outcomes(passed=3, failed=1)
    (pytester.path / "serial").mkdir()
    for file in pytester.path.glob("cert-*.json"):
        file.rename(pytester.path / "serial" / file.name)
    return serial


class _Controller:
    """An in-process run's xdist controller hooks: what ``pytest_configure_node`` hands a worker, and at the end the
    workers' outputs fed to ``pytest_testnodedown`` as xdist feeds them."""

    def __init__(self, outputs=()):
        self.outputs, self.workerinput = outputs, None

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        node = SimpleNamespace(config=config, workerinput={})
        config.hook.pytest_configure_node(node=node)
        self.workerinput = node.workerinput

    @pytest.hookimpl(wrapper=True)  # before every plugin's sessionfinish, as xdist's nodes go down during the loop
    def pytest_sessionfinish(self, session):
        for output in self.outputs:
            node = SimpleNamespace(config=session.config, workeroutput=output)
            session.config.hook.pytest_testnodedown(node=node, error=None)
        return (yield)


class _Worker:
    """Makes an in-process run an xdist worker (``config.workerinput`` / ``workeroutput``, as xdist sets them), and
    keeps each item's ``user_properties``: what xdist forwards to the controller's JUnit file (workers write none)."""

    def __init__(self, workerinput):
        self.workerinput, self.output, self.properties = workerinput, None, {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        config.workerinput, config.workeroutput = dict(self.workerinput), {}
        self.output = config.workeroutput

    def pytest_runtest_logreport(self, report):
        if report.when == "teardown":  # where junitxml reads them
            name = report.nodeid.split("::")[-1]
            self.properties[name] = [(key, str(value)) for key, value in report.user_properties]


def test_workers_results_reach_the_controller_which_decides_the_serial_runs_verdict(pytester):
    serial = _serial_run(pytester)
    handed = _Controller()
    pytester.runpytest(*COMMON, "--collect-only", plugins=[handed])
    assert set(handed.workerinput) == {"specverify_options"}
    outputs, worker_lines, properties = [], [], {}
    for share in ("temperature-1", "gamma-1"):  # each decoder's items over both workers
        worker = _Worker(handed.workerinput)
        ran = pytester.runpytest(*COMMON, "-k", share, plugins=[worker])
        assert ran.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), ran.stdout.str()[-2000:]
        decided = "  VERDICT:" in ran.stdout.str() or list(pytester.path.glob("cert-*.json"))
        assert not decided, "a worker leaves the decision to the controller"
        assert set(worker.output) == {"specverify"}
        outputs.append(worker.output)
        worker_lines += [line for line in _summary(ran) if " · scenario " in line]
        properties |= worker.properties
    controller = pytester.runpytest(*COMMON, "-k", "no_item_runs_here", plugins=[_Controller(outputs)])
    # the serial run's summary: a failing item's own line (a worker's, here) and the controller's decision
    item_lines = [line for line in _summary(serial) if " · scenario " in line]
    assert item_lines and item_lines == worker_lines
    assert [line for line in _summary(serial) if line not in item_lines] == _summary(controller)
    assert any("FAILS: inconclusive does not meet require=exact" in line for line in _summary(controller))
    got, want = _verdicts(pytester.path), _verdicts(pytester.path / "serial")
    assert got == want and set(got) == {"specverify.reference:make_decoder", "specverify.zoo:draft_probs_off_by_one"}
    assert properties == _junit(pytester.path / "serial.xml") and len(properties) == 4
    assert {name: dict(props).get("specverify_verdict") for name, props in properties.items()} == EXPECTED_VERDICTS


@pytest.mark.slow
def test_xdist_run_decides_the_serial_runs_verdict(pytester):
    serial = _serial_run(pytester)
    spread = pytester.runpytest("-n", "2", "-v", *COMMON, "--junitxml", "spread.xml")
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
    assert verdicts == EXPECTED_VERDICTS
