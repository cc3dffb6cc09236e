"""``--resume PATH``: after a real SIGKILL of the decoder's worker process the same command with the same PATH gives
the verdict and the seeded counts of an uninterrupted run (a SIGKILL of the CLI process itself: the identity tests,
``test_identity_*.py``); a file of another command, or one that cannot be read, is refused naming it."""

import json
import os

import pytest

import specverify as sv
from specverify.cli import ExitCode, main

SCENARIOS = ["greedy", "temperature-1"]
OPTIONS = dict(level="quick", seed=3, scenarios=SCENARIOS)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOUBLES = "tests.certification.resume_decoders"


def _key(cert):
    """Names, verdicts, N and the worst outcomes' observed counts; the statistic to 1e-9 (the same counts)."""
    stat = [None if s.statistic is None else pytest.approx(s.statistic, rel=1e-9) for s in cert.scenarios]
    return [(s.name, s.passed, s.n, s.planned_n, tuple(w[:2] for w in s.worst)) for s in cert.scenarios], stat


@pytest.fixture(scope="module")
def uninterrupted():
    """The reference decoder's run (the doubles are the reference decoder until their fault)."""
    return sv.certify("specverify.reference:make_decoder", isolation="none", **OPTIONS)


def _state(path):
    with open(path) as fh:
        data = json.load(fh)
    in_flight = {name: sum(e["done"] for e in sides["0"]) for name, sides in data["draws"].items()}
    return data, {name: done for name, done in in_flight.items() if done and name not in data["finished"]}


def test_a_sigkilled_worker_is_invalid_and_the_resumed_run_is_uninterrupted(tmp_path, monkeypatch, uninterrupted):
    path, mark = tmp_path / "run.json", tmp_path / "killed"
    monkeypatch.setenv("SPECVERIFY_TEST_KILL_MARK", str(mark))
    monkeypatch.setenv("SPECVERIFY_TEST_KILL_AT", "4")  # temperature-1's second look: the first is recorded
    factory = f"{DOUBLES}:killed_once"
    first = sv.certify(factory, isolation="process", resume=str(path), **OPTIONS)
    assert first.verdict == "invalid" and "worker process died" in first.reason and "exit code -9" in first.reason
    data, flight = _state(path)
    assert list(data["finished"]) == ["greedy#0"] and flight.get("temperature-1#0", 0) > 0, (data["finished"], flight)
    assert "exit code -9" in data["interruptions"][0]  # recorded, but not as evidence
    resumed = sv.certify(factory, isolation="none", resume=str(path), **OPTIONS)  # how it runs: not the identity
    assert resumed.verdict == uninterrupted.verdict and _key(resumed) == _key(uninterrupted)


def test_a_file_of_another_command_or_unreadable_is_refused(tmp_path, capsys):
    path = tmp_path / "run.json"
    greedy = dict(OPTIONS, scenarios=["greedy"], isolation="none")
    sv.certify("specverify.reference:make_decoder", resume=str(path), **greedy)
    with pytest.raises(sv.InvalidArgument, match=r"another command \(seed: 3 in the file, 4 here\)"):
        sv.certify("specverify.reference:make_decoder", resume=str(path), **dict(greedy, seed=4))
    with pytest.raises(sv.InvalidArgument, match=r"scenarios: \['greedy'\] in the file, \['greedy', 'eos-in-block'\]"):
        sv.certify(
            "specverify.reference:make_decoder", resume=str(path), **dict(greedy, scenarios=["greedy", "eos-in-block"])
        )
    again = sv.certify("specverify.reference:make_decoder", resume=str(path), **dict(greedy, timeout_s=5))
    assert again.scenarios[0].passed is True  # how the decoder runs is not the run's identity
    path.write_text("{not json")
    base = ["certify", "specverify.reference:make_decoder", "--level", "quick", "--scenario", "greedy"]
    assert main([*base, "--resume", str(path)]) == ExitCode.USAGE
    assert f"--resume {path} cannot be read as a resume file" in capsys.readouterr().err
    assert main([*base, "--resume", str(tmp_path)]) == ExitCode.USAGE
    assert f"--resume {tmp_path}: is a directory" in capsys.readouterr().err


def test_a_long_scenario_says_how_far_its_draws_are(monkeypatch, uninterrupted):
    from specverify.certification.execution import local

    monkeypatch.setattr(local, "DRAW_PROGRESS_S", 0.0)  # a line after every call (default: every 10 s)
    lines = []
    cert = sv.certify("specverify.reference:make_decoder", isolation="none", progress=lines.append, **OPTIONS)
    inside = [line for line in lines if line.startswith("specverify: [2/3] temperature-1: ")]
    n = f"{cert.scenarios[1].n:,}".replace(",", " ")
    assert len(inside) > 2 and inside[-1] == f"specverify: [2/3] temperature-1: {n} of {n} draws", inside


def test_a_resumed_certificate_counts_the_earlier_processes_time(tmp_path):
    """``elapsed_s`` is the run's wall time over every process that worked on it: each writes its own into the file
    (``spent_s``), and the resumed certificate adds the earlier ones (once 2,017 s of a 6,300 s run)."""
    path = tmp_path / "run.json"
    greedy = dict(OPTIONS, scenarios=["greedy"], isolation="none")
    first = sv.certify("specverify.reference:make_decoder", resume=str(path), **greedy)
    data = json.loads(path.read_text())
    assert 0 < data["spent_s"] <= first.elapsed_s + 1.0
    data["spent_s"] = 5000.0  # as if the first process had worked for 5,000 s
    path.write_text(json.dumps(data))
    again = sv.certify("specverify.reference:make_decoder", resume=str(path), **greedy)  # finished: nothing drawn
    assert 5000.0 < again.elapsed_s < 5000.0 + first.elapsed_s + 60.0
    assert json.loads(path.read_text())["spent_s"] >= 5000.0
