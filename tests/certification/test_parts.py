"""Runs in parts (``--block-draws N``): merged in any arrival order they give the unsplit run's verdict and counts;
a retry gives the same counts; the merge refuses a duplicate, a foreign or a missing part; a sequential decision
makes the later blocks unneeded."""

import json
import random

import pytest

import specverify as sv
from specverify.certification.config.run_config import RunConfig
from specverify.certification.execution.parts import PartWorker, documents_of, merge_parts, needed, plan_parts
from specverify.cli import ExitCode, main

REF = "specverify.reference:make_decoder"
SUBSET = ["temperature-1", "eos-in-block", "greedy", "max-tokens-not-multiple"]
OPTIONS = dict(level="quick", seed=3, scenarios=SUBSET, isolation="none")
B = 700  # draws per block


def _key(cert):
    """What must be identical: names, verdicts, N and the observed counts of the worst outcomes, per scenario."""
    return [(s.name, s.passed, s.n, s.planned_n, tuple(w[:2] for w in s.worst)) for s in cert.scenarios]


def _same_statistics(a, b):
    for x, y in zip(a.scenarios, b.scenarios):
        assert (x.statistic is None) == (y.statistic is None), x.name
        if x.statistic is not None:  # the same counts; the battery's floats may differ in the last bits elsewhere
            assert y.statistic == pytest.approx(x.statistic, rel=1e-9), x.name
            assert y.tv_estimate == pytest.approx(x.tv_estimate, rel=1e-9), x.name


@pytest.fixture(scope="module")
def config():
    return RunConfig.create(factory=REF, **OPTIONS)


@pytest.fixture(scope="module")
def whole():
    """The unsplit run."""
    return sv.certify(REF, **OPTIONS)


@pytest.fixture(scope="module")
def documents(config):
    """The documents of the parts a scheduler runs (each while still needed), and two blocks of temperature-1 that
    arrive after its decision; run once for the module."""
    docs = []
    with PartWorker(config, block_draws=B) as worker:
        for part in plan_parts(config, block_draws=B):
            if part.id in {p.id for p in needed(config, docs, block_draws=B)}:
                docs.append(worker.run(part))
        done = max(d["part"]["block"] for d in docs if d["part"]["scenario"] == "temperature-1")
        late = [
            p for p in plan_parts(config, block_draws=B) if p.scenario == "temperature-1" and done < p.block <= done + 2
        ]
        return docs + [worker.run(p) for p in late]


def test_parts_merged_in_any_order_are_the_unsplit_run(config, documents, whole):
    docs = json.loads(json.dumps(documents))  # through JSON, as a cluster hands them over
    random.Random(5).shuffle(docs)
    merged = merge_parts(config, docs, block_draws=B)
    assert merged.verdict == whole.verdict == "exact", merged.reason
    assert _key(merged) == _key(whole)
    _same_statistics(whole, merged)
    assert merged.reproducible is True
    assert merged.command == whole.command.replace(" --seed", " --block-draws 700 --seed")


def test_a_split_spreads_over_blocks_and_a_look_ends_a_block(config):
    parts = plan_parts(config, block_draws=B)
    blocks = [p for p in parts if p.scenario == "temperature-1"]
    assert len(blocks) > 10 and all(p.count <= 700 for p in blocks)
    assert [p.start for p in blocks] == [0] + [p.start + p.count for p in blocks[:-1]]  # contiguous, in order
    assert [p.id for p in parts if p.scenario == "greedy"] == ["greedy#0"]  # not a sampling check: one part
    assert parts[-1].scenario == "(reproducibility)"
    assert len({p.id for p in parts}) == len(parts)


def test_a_retry_gives_identical_counts(config, documents):
    part = plan_parts(config, block_draws=B)[3]
    with PartWorker(config, block_draws=B) as fresh:
        again = fresh.run(part)
    first = next(d for d in documents if d["part"]["id"] == part.id)
    assert again["draws"] == first["draws"] and again["part"] == first["part"]


def test_blocks_after_a_sequential_decision_are_unneeded(config, documents, whole):
    blocks = sorted(
        (d for d in documents if d["part"]["scenario"] == "temperature-1"), key=lambda d: d["part"]["block"]
    )
    stop = next(i for i, d in enumerate(blocks) if d["part"]["start"] + d["part"]["count"] == whole.scenarios[0].n)
    assert "early pass" in whole.scenarios[0].note and stop + 1 < len(blocks)
    before = {p.id for p in needed(config, blocks[:stop], block_draws=B)}
    assert blocks[stop]["part"]["id"] in before and blocks[stop + 1]["part"]["id"] in before
    after = {p.id for p in needed(config, blocks[: stop + 1], block_draws=B)}
    assert not any(d["part"]["id"] in after for d in blocks)  # decided: cancel the rest of the scenario
    assert "greedy#0" in after
    late = merge_parts(config, documents, block_draws=B)  # blocks that arrived after the decision are not evidence
    assert late.scenarios[0].n == whole.scenarios[0].n


def test_the_merge_refuses_duplicate_foreign_or_missing_parts(config, documents):
    docs = list(documents)
    with pytest.raises(sv.InvalidArgument, match=r"part 'temperature-1#0' given twice"):
        merge_parts(config, docs + [docs[0]], block_draws=B)
    foreign = dict(docs[1], run=dict(docs[1]["run"], seed=4))
    with pytest.raises(sv.InvalidArgument, match=r"temperature-1#1' is of another run: seed=4 \(this run: 3\)"):
        merge_parts(config, [docs[0], foreign] + docs[2:], block_draws=B)
    with pytest.raises(sv.InvalidArgument, match=r"parts \['greedy#0'\] are still needed"):
        merge_parts(config, [d for d in docs if d["part"]["id"] != "greedy#0"], block_draws=B)
    with pytest.raises(sv.InvalidArgument, match="block_draws=700 \\(this run: 900\\)"):
        merge_parts(config, docs, block_draws=900)
    with pytest.raises(sv.InvalidArgument, match="block_draws=5 cannot be used with budget_s"):
        sv.certify(REF, block_draws=5, budget_s=10)
    with pytest.raises(sv.InvalidArgument, match="block_draws=0 must be an int >= 1"):
        plan_parts(config, block_draws=0)


@pytest.mark.parametrize("factory", ["slow_path", "no_offset"])
def test_slow_path_and_no_offset_blocks_give_the_unsplit_counts(factory):
    """Slow-path seeds are seed + draw index; a ``sample`` without the offset draws fixed chunks of 4096 from each
    stretch's start, which blocks of a multiple of 4096 repeat."""
    spec = f"tests.certification.resume_decoders:{factory}"
    opts = dict(level="quick", seed=3, scenarios=["eos-in-block"], isolation="none")
    opts.update(sequential=factory == "slow_path")  # the fixed plan: one stretch, four blocks of 4096
    whole = sv.certify(spec, **opts)
    split = sv.certify(spec, block_draws=4096 if factory == "no_offset" else 1000, **opts)
    assert _key(split) == _key(whole) and split.scenarios[0].n > 1000
    _same_statistics(whole, split)


def test_cli_shards_of_a_run_in_parts_merge(tmp_path, capsys, whole):
    """``--shard I/N`` with ``--block-draws``: the shards split the parts; ``specverify merge`` reads their bundles."""
    base = ["certify", REF, "--level", "quick", "--isolation", "none", "--seed", "3", "--block-draws", "1500"]
    base += ["--scenario", "temperature-1", "--scenario", "greedy"]
    for i in (1, 2):
        assert main([*base, "--shard", f"{i}/2", "--counts-out", str(tmp_path / f"p{i}.json")]) == ExitCode.FALLS_SHORT
    bundle = json.loads((tmp_path / "p1.json").read_text())
    assert bundle["kind"] == "specverify-parts" and bundle["shard"] == [1, 2] and len(bundle["parts"]) > 1
    flat = documents_of([tmp_path / "p1.json", bundle["parts"][0]])  # files (bundles) and documents, flattened
    assert len(flat) == len(bundle["parts"]) + 1 and all(d["kind"] == "specverify-part" for d in flat)
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "p2.json"), str(tmp_path / "p1.json")]) == ExitCode.FALLS_SHORT
    out = capsys.readouterr().out
    assert "VERDICT: INCONCLUSIVE" in out  # core scenarios left out, as unsplit (its seeds and N do not depend on them)
    assert f"pass {whole.scenarios[0].n:12d}" in out
    assert main(["merge", str(tmp_path / "p1.json")]) == ExitCode.USAGE
    assert "shard 2/2 is missing" in capsys.readouterr().err


def test_a_violation_in_a_part_makes_the_run_invalid_and_cancels_the_rest():
    """A part that breaks the protocol is recorded with how to reproduce it, not raised; nothing else is needed."""
    config = RunConfig.create(
        factory="tests.certification.bad_decoders:out_of_vocab", **dict(OPTIONS, scenarios=["greedy", "eos-in-block"])
    )
    parts = plan_parts(config, block_draws=B)
    with PartWorker(config, block_draws=B) as worker:
        doc = worker.run(next(p for p in parts if p.scenario == "eos-in-block"))
    assert "token" in doc["violation"] and "Reproduce: specverify certify" in doc["violation"]
    assert needed(config, [doc], block_draws=B) == []
    cert = merge_parts(config, [doc], block_draws=B)
    assert cert.verdict == "invalid" and "eos-in-block" in cert.reason
    assert [s.not_run for s in cert.scenarios if s.scenario == "greedy"] == ["broke"]


def test_a_run_in_parts_resumes_from_its_finished_parts_and_its_block_in_flight(tmp_path, monkeypatch, whole):
    """``--resume`` with ``--block-draws``: finished parts are taken from the file, the block that failed is run
    again from its last recorded call; the counts are the unsplit run's."""
    path, mark = tmp_path / "run.json", tmp_path / "failed"
    monkeypatch.setenv("SPECVERIFY_TEST_FAIL_MARK", str(mark))
    monkeypatch.setenv("SPECVERIFY_TEST_FAIL_AT", "5")
    opts = dict(OPTIONS, scenarios=["greedy", "temperature-1"])
    factory = "tests.certification.resume_decoders:fails_once"
    first = sv.certify(factory, block_draws=B, resume=str(path), **opts)
    assert first.verdict == "invalid" and "engine lost its KV cache" in first.reason
    kept = [k for k in json.loads(path.read_text())["finished"] if k.startswith("part ")]
    assert len(kept) >= 3 and "part greedy#0" in kept
    lines = []
    resumed = sv.certify(factory, block_draws=B, resume=str(path), progress=lines.append, **opts)
    assert lines[0] == f"specverify: resuming {path}: {len(kept)} parts finished"
    assert not any(f"temperature-1 block {k} " in line for line in lines for k in range(len(kept) - 1))
    assert resumed.scenarios[1].n == whole.scenarios[0].n and resumed.scenarios[1].worst == whole.scenarios[0].worst
    with pytest.raises(sv.InvalidArgument, match=r"block_draws: 700 in the file, None here"):
        sv.certify(factory, resume=str(path), **opts)


class _Closing:
    """The reference decoder, recording when the certifier closes it."""

    log: list = []
    made = 0

    def __init__(self, target, draft):
        from specverify.reference import make_decoder

        type(self).made += 1
        self.serial = type(self).made  # not id(self): a closed decoder's id may be reused by the next one
        self.inner = make_decoder(target, draft)
        self.capabilities, self.sample = self.inner.capabilities, self.inner.sample

    def __call__(self, requests):
        return self.inner(requests)

    def close(self):
        _Closing.log.append(self.serial)


def test_a_worker_closes_a_pair_s_decoder_when_it_moves_on_keeping_the_first_pair():
    _Closing.log.clear()
    names = ["temperature-1", "near-deterministic", "penalties"]  # three model pairs, in plan order
    config = RunConfig.create(factory=_Closing, **dict(OPTIONS, scenarios=names))
    with PartWorker(config, block_draws=B) as worker:
        docs = []
        for part in plan_parts(config, block_draws=B):
            if part.id in {p.id for p in needed(config, docs, block_draws=B)}:
                docs.append(worker.run(part))
        assert len(_Closing.log) == 1  # near-deterministic's, when penalties started; the first pair's is kept
    assert len(_Closing.log) == 3 and len(set(_Closing.log)) == 3  # the rest at the end, each once
