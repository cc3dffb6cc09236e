"""Sharded runs: shards merged give the unsharded certificate; the merge refuses incomplete or mixed parts."""

import json

import pytest

import specverify as sv
from specverify.certification.shards import merge_shards, parse_shard
from specverify.cli import ExitCode, main

SUBSET = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy", "penalties", "unseeded-collision"]


def run(**kw):
    return sv.certify(
        "specverify.reference:make_decoder", level="quick", seed=3, scenarios=SUBSET, isolation="none", **kw
    )


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


def test_two_shards_merged_are_the_unsharded_certificate(tmp_path):
    whole = run()
    parts = [run(shard=(i, 2)) for i in (1, 2)]
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


def test_the_merge_refuses_missing_duplicate_or_foreign_shards():
    one, two = (run(shard=(i, 2)).shard_info for i in (1, 2))
    with pytest.raises(sv.InvalidArgument, match="each of 1..2 exactly once"):
        merge_shards([one])
    with pytest.raises(sv.InvalidArgument, match="each of 1..2 exactly once"):
        merge_shards([one, one])
    with pytest.raises(sv.InvalidArgument, match="differ"):
        merge_shards([one, dict(two, seed=4)])
    with pytest.raises(sv.InvalidArgument, match="not a specverify shard"):
        merge_shards([{"kind": "something else"}])
    for bad in ("0/2", "3/2", "a/b", "2"):
        with pytest.raises(sv.InvalidArgument, match="--shard"):
            parse_shard(bad)


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
