"""``--shard auto``: Buildkite, Kubernetes indexed jobs and Slurm arrays give the 1-based shard; disagreeing or
missing variables are errors that say what to set; the certificate's command spells the resolved ``--shard I/N``."""

import json

import pytest

from specverify.certification.config.job_array import JobArrayError, shard_from_environment
from specverify.certification.config.options import parse_option
from specverify.cli import ExitCode
from specverify.errors import InvalidArgument
from tests.helpers import cli

REF = "specverify.reference:make_decoder"
ARRAY_VARIABLES = (
    "BUILDKITE_PARALLEL_JOB",
    "BUILDKITE_PARALLEL_JOB_COUNT",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_ARRAY_TASK_COUNT",
    "SPECVERIFY_SHARD_COUNT",
)


@pytest.fixture(autouse=True)
def no_job_array(monkeypatch):
    """The tests' own job array only: a CI runner's variables must not leak in."""
    for name in ARRAY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "spec, env, shard",
    [
        ("auto", {"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}, (1, 3)),
        ("auto", {"BUILDKITE_PARALLEL_JOB": "2", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}, (3, 3)),
        ("auto/4", {"JOB_COMPLETION_INDEX": "0"}, (1, 4)),
        ("auto", {"JOB_COMPLETION_INDEX": "3", "SPECVERIFY_SHARD_COUNT": "4"}, (4, 4)),
        ("auto", {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "2"}, (1, 2)),
        ("auto", {"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "2"}, (2, 2)),
        (
            "auto",
            {"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_STEP": "4",
             "SLURM_ARRAY_TASK_COUNT": "3"},
            (3, 3),
        ),
        # two systems that name the same shard agree
        ("auto/2", {"JOB_COMPLETION_INDEX": "1", "BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"},
         (2, 2)),
    ],
)  # fmt: skip
def test_each_job_array_gives_its_1_based_shard(spec, env, shard):
    assert shard_from_environment(spec, env) == shard


@pytest.mark.parametrize(
    "spec, env, words",
    [
        ("auto", {}, ["none of", "BUILDKITE_PARALLEL_JOB", "JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "I/N"]),
        ("auto", {"JOB_COMPLETION_INDEX": "1"}, ["no count", "auto/N", "SPECVERIFY_SHARD_COUNT"]),
        ("auto/2", {"JOB_COMPLETION_INDEX": "2"}, ["= 2 (0-based)", "2 shards"]),
        ("auto", {"BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}, ["outside", "3 shards"]),
        ("auto/3", {"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "4"}, ["disagree", "auto/N = 3"]),
        (
            "auto",
            {"JOB_COMPLETION_INDEX": "0", "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0",
             "SLURM_ARRAY_TASK_COUNT": "3", "SPECVERIFY_SHARD_COUNT": "3"},
            ["several systems", "Kubernetes", "Slurm", "shard 1", "shard 3"],
        ),
        ("auto", {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_STEP": "2",
                  "SLURM_ARRAY_TASK_COUNT": "3"}, ["not on the array's grid", "1, 3"]),
        ("auto", {"BUILDKITE_PARALLEL_JOB": "one", "BUILDKITE_PARALLEL_JOB_COUNT": "2"}, ["not an integer"]),
        ("auto/x", {"JOB_COMPLETION_INDEX": "0"}, ["auto/N"]),
    ],
)  # fmt: skip
def test_a_job_array_that_names_no_single_shard_is_an_error_that_says_what_to_set(spec, env, words):
    with pytest.raises(JobArrayError) as info:
        shard_from_environment(spec, env)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_the_option_parser_resolves_auto_from_the_environment(monkeypatch):
    monkeypatch.setenv("BUILDKITE_PARALLEL_JOB", "1")
    monkeypatch.setenv("BUILDKITE_PARALLEL_JOB_COUNT", "2")
    assert parse_option("shard", "auto", text=True) == (2, 2)
    monkeypatch.delenv("BUILDKITE_PARALLEL_JOB")
    with pytest.raises(InvalidArgument, match=r"shard='auto' needs a job array"):
        parse_option("shard", "auto", text=True)


def test_the_certificate_spells_the_resolved_shard(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "8")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "7")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    counts = tmp_path / "part.json"
    args = ["--scenario", "greedy", "--scenario", "eos-in-block", "--shard", "auto", "--counts-out", str(counts)]
    code, out, err = cli("certify", REF, "--level", "quick", "--isolation", "none", *args, "--json", "-")
    assert code == ExitCode.FALLS_SHORT, err  # a shard alone is inconclusive
    command = json.loads(out)["command"]
    assert "--shard 2/2" in command and "auto" not in command, command
    assert json.loads(counts.read_text())["shard"] == [2, 2]


def test_auto_outside_a_job_array_is_a_usage_error_naming_the_variables():
    code, _, err = cli("certify", REF, "--level", "quick", "--isolation", "none", "--scenario", "greedy",
                       "--shard", "auto", "--counts-out", "part.json")  # fmt: skip
    assert code == ExitCode.USAGE
    assert "--shard='auto' needs a job array" in err and "JOB_COMPLETION_INDEX" in err, err
