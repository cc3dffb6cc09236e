"""Shards: each runs its parts of the run's plan (part k on shard k mod N + 1) and writes them (``--counts-out``);
merged they give the run's certificate. The merge refuses incomplete, duplicate or foreign shards, and reads the
counts files older versions wrote (kind ``specverify-shard``, schema 1 and 2) through the migration."""

import copy
import json
import pathlib

import pytest

import specverify as sv
from specverify.certification.execution.certify import merge_files
from specverify.cli import ExitCode, main

SUBSET = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy", "penalties", "unseeded-collision"]
DATA = pathlib.Path(__file__).parents[1] / "data"


def run(**kw):
    return sv.certify(
        "specverify.reference:make_decoder", level="quick", seed=3, scenarios=SUBSET, isolation="none", **kw
    )


@pytest.fixture(scope="module")
def shards():
    """Shards 1/2 and 2/2 of ``run()`` (whole scenarios), certified once for the module's tests."""
    return tuple(run(shard=(i, 2)) for i in (1, 2))


@pytest.fixture
def bundles(shards):
    return [copy.deepcopy(part.shard_info) for part in shards]


def _key(cert):
    return [
        (s.name, s.kind, s.passed, s.n, *((None, None) if s.kind == "collision" else (s.pvalue, s.statistic)))
        for s in cert.scenarios
    ]


def test_two_shards_merged_are_the_whole_run(tmp_path, shards):
    whole = run()
    assert all(p.verdict == "inconclusive" and "merge" in p.reason for p in shards)
    ids = [[d["part"]["id"] for d in p.shard_info["parts"]] for p in shards]
    assert sorted(ids[0] + ids[1]) == sorted(f"{n}#0" for n in [*SUBSET, "(reproducibility)"])  # each part once
    files = []
    for i, part in enumerate(shards):  # through JSON, as a cluster job array would hand them over
        path = tmp_path / f"part{i}.json"
        path.write_text(json.dumps(part.shard_info))
        files.append(path)
    merged = merge_files(files[::-1]).certificate
    assert merged.verdict == whole.verdict == "exact", merged.reason
    assert _key(merged) == _key(whole)
    assert merged.command == whole.command and merged.reproducible is True


def test_the_merge_refuses_missing_duplicate_or_foreign_shards(bundles):
    one, two = bundles
    with pytest.raises(sv.InvalidArgument, match="each of 1..2 exactly once"):
        merge_files([one])
    with pytest.raises(sv.InvalidArgument, match="each of 1..2 exactly once"):
        merge_files([one, one])
    with pytest.raises(sv.InvalidArgument, match=r"\['seed'\] differ"):
        merge_files([one, dict(two, run=dict(two["run"], seed=4))])
    with pytest.raises(sv.InvalidArgument, match="not a specverify shard counts file"):
        merge_files([{"kind": "something else"}])
    for bad in ("0/2", "3/2", "a/b", "2"):
        with pytest.raises(sv.InvalidArgument, match=f"shard='{bad}' (must read I/N|needs 1 <= I <= N)"):
            run(shard=bad)


def test_the_counts_files_of_older_versions_merge_through_the_migration():
    """Two shard counts files written by the version before every run was a plan of parts (schema 2, whole
    scenarios split by position; tests/data) merge into the certificate this version gives the same run, up to the
    planned N (their α plan divided by the matrix of their day: issue 45's scenarios have since moved every N): the
    same results and decisions, and exactly the draws the files hold; as version 1 files (their identity as
    top-level keys, scenarios only by name) into the same certificate."""
    old = [json.loads((DATA / f"shard_v2_reference_{i}of2.json").read_text()) for i in (1, 2)]
    assert all(doc["kind"] == "specverify-shard" and doc["schema_version"] == 2 for doc in old)
    now = sv.certify("specverify.reference:make_decoder", level="quick", seed=3, isolation="none",
                     scenarios=old[0]["run"]["scenarios"])  # fmt: skip
    merged = merge_files(old).certificate
    decisions = [(s.name, s.kind, s.covered, s.passed) for s in now.scenarios]
    assert (
        merged.verdict == now.verdict and [(s.name, s.kind, s.covered, s.passed) for s in merged.scenarios] == decisions
    )
    stored = {}
    for doc in old:
        for s in doc["scenarios"]:
            stored[s["name"]] = stored.get(s["name"], 0) + s["n"]
    assert {s.name: s.n for s in merged.scenarios if s.name in stored} == stored
    assert merged.reproducible is True and merged.command == now.command
    assert _key(merge_files([_as_version_1(doc) for doc in old]).certificate) == _key(merged)


def _as_version_1(doc):
    """A shard counts file as version 1 wrote it (its identity as top-level keys, scenarios named only by name)."""
    run = doc["run"]
    keep = ("factory", "level", "seed", "alpha", "power", "models")
    old = {k: v for k, v in doc.items() if k != "run"}
    old.update({k: run[k] for k in keep}, schema_version=1, num_shards=run["shard"][1])
    old.update(scenarios_requested=run["scenarios"] or None)
    drop = ("scenario", "member", "not_run", "counters")
    old["scenarios"] = [{k: v for k, v in s.items() if k not in drop} for s in doc["scenarios"]]
    return old


def test_cli_shard_counts_out_and_merge(tmp_path, capsys):
    base = ["certify", "specverify.reference:make_decoder", "--level", "quick", "--isolation", "none", "--seed", "3"]
    base += [a for name in SUBSET[:4] for a in ("--scenario", name)]
    for i in (1, 2):
        code = main([*base, "--shard", f"{i}/2", "--counts-out", str(tmp_path / f"p{i}.json")])
        assert code == ExitCode.FALLS_SHORT  # a shard alone is inconclusive
    assert json.loads((tmp_path / "p1.json").read_text())["kind"] == "specverify-parts"
    assert main(["merge", str(tmp_path / "p1.json"), str(tmp_path / "p2.json")]) == ExitCode.MEETS
    assert "VERDICT: EXACT" in capsys.readouterr().out
    assert main(["merge", str(tmp_path / "p1.json")]) == ExitCode.USAGE
    assert main([*base, "--counts-out", str(tmp_path / "x.json")]) == ExitCode.USAGE  # needs --shard
    assert "--counts-out=" in capsys.readouterr().err
    assert main([*base, "--shard", "1/2"]) == ExitCode.USAGE  # a shard's evidence is its counts file
    assert "needs --counts-out PATH" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[]")
    assert main(["merge", str(tmp_path / "list.json")]) == ExitCode.USAGE
    assert "list.json: holds a JSON list" in capsys.readouterr().err


def test_shards_of_engine_configurations_merge_into_the_set(tmp_path, capsys):
    """``--engine-config A --engine-config B --shard I/N``: the shards split the parts of both configurations; the
    merge gives the configuration set."""
    factory = "tests.certification.config_decoders:configured"
    base = ["certify", factory, "--level", "quick", "--isolation", "none", "--scenario", "greedy"]
    base += ["--engine-config", "default", "--engine-config", "warm-cache"]
    for i in (1, 2, 3):
        assert main([*base, "--shard", f"{i}/3", "--counts-out", str(tmp_path / f"p{i}.json")]) == ExitCode.FALLS_SHORT
    capsys.readouterr()
    code = main(["merge", *(str(tmp_path / f"p{i}.json") for i in (3, 1, 2))])
    out = capsys.readouterr().out
    assert "configurations of " in out and "default (default)" in out and "warm-cache" in out, out
    assert code == ExitCode.FALLS_SHORT  # greedy alone is not the core: inconclusive
