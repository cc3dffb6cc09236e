"""Two-sample mode: a decoder against the same engine's plain path instead of the exact law."""

import pytest

import specverify as sv
from specverify.certification.checks.twosample import against_spec


def run(factory, scenarios, against):
    return sv.certify(factory, level="quick", scenarios=scenarios, isolation="none", against=against)


def test_the_reference_against_its_plain_path_passes_and_says_how_it_was_tested():
    cert = run("specverify.reference:make_decoder", ["temperature-1", "penalties"], "plain")
    assert all(s.passed for s in cert.scenarios), cert.reason
    s = cert.scenarios[0]
    assert "two-sample against specverify.reference:plain" in s.note and s.n == s.planned_n > 20_000
    assert "--against plain" in cert.command


def test_a_wrong_law_is_rejected_against_the_plain_path():
    cert = run("specverify.zoo:temperature_not_in_rejection", ["temperature-0.5"], "specverify.reference:plain")
    # no greedy scenario ran: greedy-only would claim more than was tested (defect 10)
    assert cert.scenarios[0].passed is False and cert.verdict == "inconclusive", cert.reason
    assert cert.reason.startswith("not exact (greedy not checked): temperature-0.5")


def test_against_names_resolve_beside_the_factory_or_fail_clearly():
    assert against_spec("pkg.mod:make", "plain") == "pkg.mod:plain"
    assert against_spec("pkg.mod:make", "other.mod:ctrl") == "other.mod:ctrl"
    with pytest.raises(sv.InvalidArgument, match="has no attribute 'plain'"):
        run("specverify.zoo:reference", ["temperature-1"], "plain")


def test_cli_against_flag(capsys):
    from specverify.cli import ExitCode, main

    code = main(
        [
            "certify",
            "specverify.reference:make_decoder",
            "--level",
            "quick",
            "--isolation",
            "none",
            "--scenario",
            "temperature-1",
            "--against",
            "plain",
        ]
    )
    assert code == ExitCode.FALLS_SHORT  # one scenario: inconclusive (the core is not covered)
    assert "two-sample against specverify.reference:plain" in capsys.readouterr().out
