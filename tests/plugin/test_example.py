"""examples/engine_ci: the test command a team copies runs green (on the core scenarios, to keep this quick).

The fast suite runs the example's tests in-process on a copy of it (its own pyproject, adapter and baseline); the
same command in a fresh interpreter, as its CI workflow runs it, is ``-m slow`` (~10 s on 2 cores: the interpreter
imports torch).
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "engine_ci"
CORE = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy"]
FLAGS = [f"--specverify-scenario={name}" for name in CORE] + ["--specverify-isolation=none", "-p", "no:randomly"]
STORED = "specverify_baselines/my_engine.adapter--speculative.json"


def check_passed(stdout: str, out: pathlib.Path) -> None:
    """What a green run of the example prints and writes."""
    assert "  VERDICT: EXACT — exact on 4 of" in stdout
    assert f"baseline {STORED}: exact (merged from 2 tests), not worse than exact" in stdout
    assert list(out.glob("certificate-*.json")) and (out / "junit.xml").exists()


def test_the_example_test_file_is_short_and_its_workflow_runs_it_with_xdist():
    assert len((EXAMPLE / "tests" / "test_speculative_decoding.py").read_text().splitlines()) <= 30
    workflow = (EXAMPLE / ".github" / "workflows" / "specverify.yml").read_text()
    assert "python -m pytest -n auto" in workflow


def test_the_examples_tests_pass_against_its_baseline(pytester, tmp_path):
    for part in ("my_engine", "tests", "specverify_baselines"):
        shutil.copytree(EXAMPLE / part, pytester.path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXAMPLE / "pyproject.toml", pytester.path)
    out = tmp_path / "out"
    out.mkdir()
    run = pytester.runpytest(
        *FLAGS, "--specverify-json", str(out / "certificate.json"), "--junitxml", str(out / "junit.xml")
    )
    assert run.ret == 0, run.stdout.str()[-4000:]
    run.assert_outcomes(passed=5)
    check_passed(run.stdout.str(), out)


@pytest.mark.slow
def test_the_example_command_passes_against_its_baseline_in_a_fresh_interpreter(tmp_path):
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *FLAGS]
    command += ["--specverify-json", str(tmp_path / "certificate.json"), "--junitxml", str(tmp_path / "junit.xml")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(command, cwd=EXAMPLE, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    check_passed(run.stdout, tmp_path)
