"""examples/engine_ci: the workflow a team copies runs green, and its baseline holds still.

The fast tests run the example's tests in-process on a copy of it (its own pyproject, adapter and baseline) on the
core scenarios. The workflow itself, as GitHub Actions would run it (a fresh venv, its ``run:`` commands, the full
matrix), is ``-m slow``: ``example_workflow.py`` beside this file, which ``.ci/run`` runs as its example step.
"""

import pathlib
import shutil

import pytest

from tests.plugin import example_workflow

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "engine_ci"
CORE = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy"]
FLAGS = [f"--specverify-scenario={name}" for name in CORE] + ["--specverify-isolation=none", "-p", "no:randomly"]
STORED = example_workflow.STORED
FIXTURE_FILE = "certificate.fixture-test_greedy_output_is_the_targets.json"


def _copy(pytester) -> None:
    for part in ("my_engine", "tests", "specverify_baselines"):
        shutil.copytree(EXAMPLE / part, pytester.path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXAMPLE / "pyproject.toml", pytester.path)


def test_the_workflow_installs_the_extras_its_command_uses():
    assert len((EXAMPLE / "tests" / "test_speculative_decoding.py").read_text().splitlines()) <= 30
    commands = example_workflow.run_commands()
    command = commands[-1]
    assert command.startswith("python -m pytest -n auto") and "--specverify-html" in command
    install = next(c for c in commands if "specverify-toolkit" in c)
    assert "specverify-toolkit[test,report] @ ${SPECVERIFY_URL}" in install  # report: matplotlib, for the HTML page
    assert '"specverify-toolkit[test,report]"' in (EXAMPLE / "pyproject.toml").read_text()


def test_the_examples_tests_pass_against_its_baseline_with_one_certificate_for_the_decoder(pytester, tmp_path):
    import specverify.report

    _copy(pytester)
    out = tmp_path / "out"
    out.mkdir()
    run = pytester.runpytest(
        *FLAGS, "--specverify-json", str(out / "certificate.json"), "--junitxml", str(out / "junit.xml")
    )
    assert run.ret == 0, run.stdout.str()[-4000:]
    run.assert_outcomes(passed=5)
    text = run.stdout.str()
    summary = text.split("specverify certification")[1]
    assert summary.count("VERDICT:") == 1 and summary.count("my_engine.adapter:speculative — ") == 1, summary
    assert "  VERDICT: EXACT — exact on 4 of 45 scenarios" in summary
    assert f"  baseline {STORED}: not worse than its stored exact (merged from 2 tests)" in summary
    assert "  specverify_certify in tests/test_speculative_decoding.py::test_greedy_output_is_the_targets" in summary
    assert sorted(p.name for p in out.iterdir()) == [FIXTURE_FILE, "certificate.json", "junit.xml"]
    assert specverify.report.load_certificate(str(out / "certificate.json")).verdict == "exact"  # the matrix's


def test_two_updates_of_the_example_write_the_same_bytes(pytester):
    _copy(pytester)
    names = ["temperature-1", "unseeded-law", "unseeded-collision"]  # seeded rows, and rows drawn without a seed
    flags = [f"--specverify-scenario={name}" for name in names] + FLAGS[len(CORE) :]
    stored = pytester.path / STORED
    texts = []
    for _ in range(2):
        run = pytester.runpytest(*flags, "--specverify-update-baseline")  # a subset: inconclusive, exit status 1
        run.stdout.fnmatch_lines([f"  baseline written (merged from 2 tests): {STORED}"])
        texts.append(stored.read_bytes())
    assert texts[0] == texts[1]  # unseeded-law's N and counts differ between the runs; the stored file does not
    assert b'"elapsed_s": 0.0' in texts[0] and b"unseeded: stored by its verdict and planned power" in texts[0]


@pytest.mark.slow  # a fresh venv (torch, specverify, the example), then the full matrix: ~4 minutes on 2 cores
def test_the_example_workflow_runs_green_in_a_fresh_venv_outside_the_checkout(tmp_path):
    run = example_workflow.run_workflow(tmp_path)
    assert example_workflow.problems(run) == [], run["output"][-4000:]
    junit = run["dir"] / "junit.xml"
    assert example_workflow.verdict_of(junit).startswith("exact (meets")
    assert (run["dir"] / "certificate.html").stat().st_size > 10_000  # the page with its plots
