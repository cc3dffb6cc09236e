"""Certificates from real certify runs (once per session: the report tests share them) and a shard file."""

import dataclasses
import json

import pytest

import specverify as sv
from specverify.certification.results.evidence import ScenarioResult
from specverify.enums import NotRun

SCENARIOS = ["temperature-1", "greedy"]


def _certify(factory, **kw):
    return sv.certify(factory, level="quick", scenarios=SCENARIOS, isolation="none", **kw)


@pytest.fixture(scope="session")
def reference_cert():
    return _certify("specverify.reference:make_decoder")


@pytest.fixture(scope="session")
def zoo_cert():
    """A failing certificate: argmax_verify is greedy-only (temperature-1 fails, greedy passes)."""
    cert = _certify("specverify.zoo:argmax_verify")
    assert cert.verdict == "greedy-only" and [s.name for s in cert.failures] == ["temperature-1"]
    return cert


@pytest.fixture(scope="session")
def shard_path(tmp_path_factory):
    """The counts file of shard 1/2 of a real run, written as `--counts-out` writes it."""
    cert = sv.certify(
        "specverify.reference:make_decoder", level="quick", scenarios=["temperature-1"], isolation="none", shard=(1, 2)
    )
    path = tmp_path_factory.mktemp("shard") / "part1.json"
    path.write_text(json.dumps(cert.shard_info, indent=1))
    return path


@pytest.fixture(scope="session")
def odd_cert(zoo_cert):
    """The zoo certificate with what a run may also hold: a protocol violation (covered, n = 0 in memory), an
    impossible outcome, an infinite residual, and a scenario the budget left out."""
    first = zoo_cert.scenarios[0]
    worst = ((first.worst[0][0], 3, 0.0, float("inf")),) + first.worst[1:]
    impossible = dataclasses.replace(first, scenario="eos-in-block", impossible=(("'b' [1] length", 2),), worst=worst)
    violation = ScenarioResult(
        "max-tokens-not-multiple",
        first.kind,
        "max_tokens not a multiple of the block",
        covered=True,
        passed=False,
        violation="tokens after the finishing token: (0, 3) finished (eos) at index 0 but goes on",
        reproduce="specverify certify X --scenario max-tokens-not-multiple --seed 0",
        note="protocol violation",
    )
    skipped = ScenarioResult(
        "penalties", first.kind, "penalties", covered=False, note="not run: budget exhausted", not_run=NotRun.BUDGET
    )
    return dataclasses.replace(zoo_cert, scenarios=(*zoo_cert.scenarios, impossible, violation, skipped))


@pytest.fixture(scope="session")
def zoo_plots(zoo_cert):
    pytest.importorskip("matplotlib", reason="the plots need the report extra: pip install -e '.[report]'")
    from specverify.report import certificate_plots

    return certificate_plots(zoo_cert)


@pytest.fixture(scope="session")
def odd_plots(odd_cert):
    pytest.importorskip("matplotlib", reason="the plots need the report extra: pip install -e '.[report]'")
    from specverify.report import certificate_plots

    return certificate_plots(odd_cert)
