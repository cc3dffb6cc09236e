"""Sharded runs: shards merged give the unsharded certificate; the merge refuses incomplete or mixed parts."""

import copy
import json

import pytest

import specverify as sv
from specverify.certification.execution.shards import merge_shards
from specverify.cli import ExitCode, main

SUBSET = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy", "penalties", "unseeded-collision"]


def run(**kw):
    return sv.certify(
        "specverify.reference:make_decoder", level="quick", seed=3, scenarios=SUBSET, isolation="none", **kw
    )


@pytest.fixture(scope="module")
def shards():
    """Shards 1/2 and 2/2 of ``run()``, certified once for the module's tests (each reads a deep copy)."""
    return tuple(run(shard=(i, 2)) for i in (1, 2))


@pytest.fixture
def shard_infos(shards):
    return [copy.deepcopy(part.shard_info) for part in shards]


def _key(cert):
    return [
        (
            s.name,
            s.kind,
            s.passed,
            s.n,
            s.pvalue if s.kind != "collision" else None,
            s.statistic if s.kind != "collision" else None,
        )
        for s in cert.scenarios
    ]


def test_two_shards_merged_are_the_unsharded_certificate(tmp_path, shards):
    whole = run()
    parts = list(shards)
    assert all(p.verdict == "inconclusive" and "merge" in p.reason for p in parts)
    assert sorted(s.name for p in parts for s in p.scenarios) == sorted(s.name for s in whole.scenarios)
    assert parts[0].reproducible is True and parts[1].reproducible is None  # shard 1 runs the reproducibility check
    files = []
    for i, part in enumerate(parts):  # through JSON, as a cluster job array would hand them over
        path = tmp_path / f"part{i}.json"
        path.write_text(json.dumps(part.shard_info))
        files.append(path)
    merged = merge_shards(files[::-1])
    assert merged.verdict == whole.verdict == "exact", merged.reason
    assert _key(merged) == _key(whole)
    assert merged.command == whole.command and merged.reproducible is True


def test_the_merge_refuses_missing_duplicate_or_foreign_shards(shard_infos):
    one, two = shard_infos
    with pytest.raises(sv.InvalidArgument, match="each of 1..2 exactly once"):
        merge_shards([one])
    with pytest.raises(sv.InvalidArgument, match="each of 1..2 exactly once"):
        merge_shards([one, one])
    with pytest.raises(sv.InvalidArgument, match=r"\['seed'\] differ"):
        merge_shards([one, dict(two, run=dict(two["run"], seed=4))])
    with pytest.raises(sv.InvalidArgument, match="not a specverify shard"):
        merge_shards([{"kind": "something else"}])
    for bad in ("0/2", "3/2", "a/b", "2"):
        with pytest.raises(sv.InvalidArgument, match=f"shard='{bad}' (must read I/N|needs 1 <= I <= N)"):
            run(shard=bad)


def test_a_version_1_counts_file_merges_like_its_version_2_twin(shard_infos):
    """Counts files written before schema version 2 are migrated: the same certificate as from the new ones."""
    from specverify.certification.results.migrate import migrate_document

    new = shard_infos
    old = [_as_version_1(doc) for doc in new]
    assert [migrate_document(doc)["run"] for doc in old] == [doc["run"] for doc in new]
    assert _key(merge_shards(old)) == _key(merge_shards(new))


def _as_version_1(doc):
    """A shard counts file as version 1 wrote it (its identity as top-level keys, scenarios named only by name)."""
    run = doc["run"]
    keep = ("factory", "level", "seed", "alpha", "power", "models")
    old = {k: v for k, v in doc.items() if k != "run"}
    old.update({k: run[k] for k in keep}, schema_version=1, num_shards=run["shard"][1])
    old.update(scenarios_requested=run["scenarios"] or None)
    drop = ("scenario", "member", "not_run")
    old["scenarios"] = [{k: v for k, v in s.items() if k not in drop} for s in doc["scenarios"]]
    return old


def test_cli_shard_counts_out_and_merge(tmp_path, capsys):
    base = [
        "certify",
        "specverify.reference:make_decoder",
        "--level",
        "quick",
        "--isolation",
        "none",
        "--seed",
        "3",
        *[a for name in SUBSET[:4] for a in ("--scenario", name)],
    ]
    for i in (1, 2):
        code = main([*base, "--shard", f"{i}/2", "--counts-out", str(tmp_path / f"p{i}.json")])
        assert code == ExitCode.FALLS_SHORT  # a shard alone is inconclusive
    assert main(["merge", str(tmp_path / "p1.json"), str(tmp_path / "p2.json")]) == ExitCode.MEETS
    assert "VERDICT: EXACT" in capsys.readouterr().out
    assert main(["merge", str(tmp_path / "p1.json")]) == ExitCode.USAGE
    assert main([*base, "--counts-out", str(tmp_path / "x.json")]) == ExitCode.USAGE  # needs --shard
    assert main([*base, "--shard", "1/2"]) == ExitCode.USAGE  # a shard's evidence is its counts file
    (tmp_path / "list.json").write_text("[]")
    assert main(["merge", str(tmp_path / "list.json")]) == ExitCode.USAGE
    assert "list.json: holds a JSON list" in capsys.readouterr().err


def test_shards_by_scenario_and_shards_of_a_run_in_parts_do_not_merge(shard_infos):
    """``--shard`` with ``--block-draws`` writes bundles of part documents (test_parts.py); a set mixing them with
    shards split by scenario is refused before anything is read."""
    bundle = {"kind": "specverify-parts", "schema_version": 2, "shard": [2, 2], "run": shard_infos[1]["run"]}
    with pytest.raises(sv.InvalidArgument, match="a run split by scenario cannot be merged together"):
        merge_shards([shard_infos[0], bundle])
    with pytest.raises(sv.InvalidArgument, match="a shard given twice"):
        merge_shards([bundle, bundle])
