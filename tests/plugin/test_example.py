"""examples/engine_ci: the test command a team copies runs green (on the core scenarios, to keep this quick)."""

import os
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "engine_ci"
CORE = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy"]


def test_the_example_test_file_is_short_and_its_command_passes_against_its_baseline(tmp_path):
    assert len((EXAMPLE / "tests" / "test_speculative_decoding.py").read_text().splitlines()) <= 30
    workflow = (EXAMPLE / ".github" / "workflows" / "specverify.yml").read_text()
    assert "python -m pytest -n auto" in workflow
    flags = [f"--specverify-scenario={name}" for name in CORE] + ["--specverify-isolation=none"]
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *flags]
    command += ["--specverify-json", str(tmp_path / "certificate.json"), "--junitxml", str(tmp_path / "junit.xml")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(command, cwd=EXAMPLE, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "  VERDICT: EXACT — exact on 4 of" in run.stdout
    stored = "specverify_baselines/my_engine.adapter--speculative.json"
    assert f"baseline {stored}: exact (merged from 2 tests), not worse than exact" in run.stdout
    assert list(tmp_path.glob("certificate-*.json")) and (tmp_path / "junit.xml").exists()
