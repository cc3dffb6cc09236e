"""The parts of a run (``--block-draws N``): a plan cut into blocks with a look at the end of each stretch; a retry of a
part gives the same counts; the merge refuses a duplicate, a foreign or a missing part; a sequential decision makes
the later blocks unneeded; a violation ends the decoder's run; a worker closes the decoders it no longer needs.
(That a run in parts gives the whole run's certificate is ``test_identity_*.py``.)"""

import json
import random

import pytest

import specverify as sv
from specverify.certification.config.execution import create_run
from specverify.certification.execution.merge import merge, needed
from specverify.certification.execution.plan import REPRODUCIBILITY, plan
from specverify.certification.execution.worker import PartWorker

REF = "specverify.reference:make_decoder"
SUBSET = ["temperature-1", "eos-in-block", "greedy", "max-tokens-not-multiple"]
OPTIONS = dict(level="quick", seed=3, scenarios=SUBSET, isolation="none")
B = 700  # draws per block


@pytest.fixture(scope="module")
def the_plan():
    return plan(*create_run(factory=REF, block_draws=B, **OPTIONS))


@pytest.fixture(scope="module")
def whole():
    """The run of whole scenarios."""
    return sv.certify(REF, **OPTIONS)


@pytest.fixture(scope="module")
def documents(the_plan):
    """The documents of the parts a scheduler runs (each while still needed), and two blocks of temperature-1 that
    arrive after its decision; run once for the module."""
    docs = []
    with PartWorker(the_plan) as worker:
        for part in the_plan.parts:
            if part.id in {p.id for p in needed(the_plan, docs)}:
                docs.append(worker.run(part))
        done = max(d["part"]["block"] for d in docs if d["part"]["scenario"] == "temperature-1")
        late = [p for p in the_plan.parts if p.scenario == "temperature-1" and done < p.block <= done + 2]
        return docs + [worker.run(p) for p in late]


def test_a_split_spreads_over_blocks_and_a_look_ends_a_block(the_plan):
    blocks = [p for p in the_plan.parts if p.scenario == "temperature-1"]
    assert len(blocks) > 10 and all(p.count <= B for p in blocks)
    assert [p.start for p in blocks] == [0] + [p.start + p.count for p in blocks[:-1]]  # contiguous, in order
    design = the_plan.runs[0].designs["temperature-1"]
    assert [p.start + p.count for p in blocks if p.look is not None] == list(design.schedule)
    assert [p.id for p in the_plan.parts if p.scenario == "greedy"] == ["greedy#0"]  # not a sampling check: whole
    assert the_plan.parts[-1].scenario == REPRODUCIBILITY
    assert len({p.id for p in the_plan.parts}) == len(the_plan.parts)


def test_without_blocks_every_part_is_a_whole_scenario():
    whole_plan = plan(*create_run(factory=REF, **OPTIONS))
    assert [p.id for p in whole_plan.parts][-1] == f"{REPRODUCIBILITY}#0"
    assert {p.scenario for p in whole_plan.parts} == set(SUBSET) | {REPRODUCIBILITY}
    assert all(p.count is None for p in whole_plan.parts)


def test_the_merge_in_any_order_is_the_run_of_whole_scenarios(the_plan, documents, whole):
    docs = json.loads(json.dumps(documents))  # through JSON, as a cluster hands them over
    random.Random(5).shuffle(docs)
    [(_, merged)] = merge(the_plan, docs)
    assert merged.verdict == whole.verdict == "exact", merged.reason  # the core scenarios, and a subset named
    assert [(s.name, s.passed, s.n, s.worst[:3]) for s in merged.scenarios] == [
        (s.name, s.passed, s.n, s.worst[:3]) for s in whole.scenarios
    ]


def test_a_retry_gives_identical_counts(the_plan, documents):
    part = the_plan.parts[3]
    with PartWorker(the_plan) as fresh:
        again = fresh.run(part)
    first = next(d for d in documents if d["part"]["id"] == part.id)
    assert again["draws"] == first["draws"] and again["part"] == first["part"]


def test_blocks_after_a_sequential_decision_are_unneeded(the_plan, documents, whole):
    blocks = sorted(
        (d for d in documents if d["part"]["scenario"] == "temperature-1"), key=lambda d: d["part"]["block"]
    )
    stop = next(i for i, d in enumerate(blocks) if d["part"]["start"] + d["part"]["count"] == whole.scenarios[0].n)
    assert "early pass" in whole.scenarios[0].note and stop + 1 < len(blocks)
    before = {p.id for p in needed(the_plan, blocks[:stop])}
    assert blocks[stop]["part"]["id"] in before and blocks[stop + 1]["part"]["id"] in before
    after = {p.id for p in needed(the_plan, blocks[: stop + 1])}
    assert not any(d["part"]["id"] in after for d in blocks)  # decided: cancel the rest of the scenario
    assert "greedy#0" in after
    [(_, late)] = merge(the_plan, documents)  # blocks that arrived after the decision are not evidence
    assert late.scenarios[0].n == whole.scenarios[0].n


def test_the_merge_refuses_duplicate_foreign_or_missing_parts(the_plan, documents):
    docs = list(documents)
    with pytest.raises(sv.InvalidArgument, match=r"part 'temperature-1#0' given twice"):
        merge(the_plan, docs + [docs[0]])
    foreign = dict(docs[1], run=dict(docs[1]["run"], seed=4))
    with pytest.raises(sv.InvalidArgument, match=r"temperature-1#1' is of another run: seed=4 \(this run: 3\)"):
        merge(the_plan, [docs[0], foreign] + docs[2:])
    with pytest.raises(sv.InvalidArgument, match=r"parts \['greedy#0'\] are still needed"):
        merge(the_plan, [d for d in docs if d["part"]["id"] != "greedy#0"])
    other = plan(*create_run(factory=REF, block_draws=900, **OPTIONS))
    with pytest.raises(sv.InvalidArgument, match=r"is of another run: block_draws=700 \(this run: 900\)"):
        merge(other, docs)
    with pytest.raises(sv.InvalidArgument, match="is not a specverify part document"):
        merge(the_plan, [{"kind": "specverify-shard"}])
    with pytest.raises(sv.InvalidArgument, match="block_draws=0 must be an int >= 1"):
        create_run(factory=REF, block_draws=0)


@pytest.mark.parametrize("factory", ["slow_path", "no_offset"])
def test_slow_path_and_no_offset_blocks_give_the_counts_of_whole_scenarios(factory):
    """Slow-path seeds are seed + draw index; a ``sample`` without the offset draws fixed chunks of 4096 from each
    stretch's start, which blocks of a multiple of 4096 repeat."""
    spec = f"tests.certification.resume_decoders:{factory}"
    opts = dict(level="quick", seed=3, scenarios=["eos-in-block"], isolation="none")
    opts.update(sequential=factory == "slow_path")  # the fixed plan: one stretch, four blocks of 4096
    whole = sv.certify(spec, **opts)
    split = sv.certify(spec, block_draws=4096 if factory == "no_offset" else 1000, **opts)
    assert [(s.n, s.worst) for s in split.scenarios] == [(s.n, s.worst) for s in whole.scenarios]
    assert split.scenarios[0].n > 1000 and split.scenarios[0].statistic == pytest.approx(whole.scenarios[0].statistic)


def test_a_violation_in_a_part_makes_the_run_invalid_and_cancels_the_rest():
    """A part that breaks the protocol is recorded with how to reproduce it, not raised; nothing else is needed."""
    config, execution = create_run(
        factory="tests.certification.bad_decoders:out_of_vocab", block_draws=B, **dict(OPTIONS, scenarios=["greedy",
        "eos-in-block"])
    )  # fmt: skip
    the_plan = plan(config, execution)
    with PartWorker(the_plan) as worker:
        doc = worker.run(next(p for p in the_plan.parts if p.scenario == "eos-in-block"))
    assert "token" in doc["violation"] and "Reproduce: specverify certify" in doc["violation"]
    assert needed(the_plan, [doc]) == []
    [(_, cert)] = merge(the_plan, [doc])
    assert cert.verdict == "invalid" and "eos-in-block" in cert.reason
    assert [s.not_run for s in cert.scenarios if s.scenario == "greedy"] == ["broke"]


def test_a_factory_that_cannot_be_set_up_is_a_part_s_error_and_the_run_s():
    config, execution = create_run(factory="tests.certification.bad_decoders:factory_raises", **OPTIONS)
    the_plan = plan(config, execution)
    with PartWorker(the_plan) as worker:
        doc = worker.run(the_plan.parts[0])
    assert "RuntimeError: no GPU here" in doc["error"] and needed(the_plan, [doc]) == []
    [(_, cert)] = merge(the_plan, [doc])
    assert cert.verdict == "error" and "RuntimeError" in cert.reason


def test_a_run_in_parts_resumes_from_its_finished_parts_and_its_block_in_flight(tmp_path, monkeypatch, whole):
    """``--resume`` with ``--block-draws``: finished parts are taken from the file, the block that failed is run
    again from its last recorded call; the counts are the run's of whole scenarios."""
    path, mark = tmp_path / "run.json", tmp_path / "failed"
    monkeypatch.setenv("SPECVERIFY_TEST_FAIL_MARK", str(mark))
    monkeypatch.setenv("SPECVERIFY_TEST_FAIL_AT", "5")
    opts = dict(OPTIONS, scenarios=["greedy", "temperature-1"])
    factory = "tests.certification.resume_decoders:fails_once"
    first = sv.certify(factory, block_draws=B, resume=str(path), **opts)
    assert first.verdict == "invalid" and "engine lost its KV cache" in first.reason
    kept = list(json.loads(path.read_text())["finished"])
    assert len(kept) >= 3 and "greedy#0" in kept
    lines = []
    resumed = sv.certify(factory, block_draws=B, resume=str(path), progress=lines.append, **opts)
    assert lines[0].startswith(f"specverify: resuming {path}: {len(kept)} parts finished")
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


@pytest.mark.parametrize("upcoming", [False, True], ids=["one-by-one", "with-upcoming"])
def test_a_worker_closes_a_pair_s_decoder_when_it_moves_on_keeping_the_first_pair(upcoming):
    _Closing.log.clear()
    names = ["temperature-1", "near-deterministic", "penalties"]  # three model pairs, in plan order
    the_plan = plan(*create_run(factory=_Closing, block_draws=B, **dict(OPTIONS, scenarios=names)))
    with PartWorker(the_plan) as worker:
        docs = []
        for i, part in enumerate(the_plan.parts):
            if part.id in {p.id for p in needed(the_plan, docs)}:
                docs.append(worker.run(part, upcoming=the_plan.parts[i + 1 :] if upcoming else None))
        assert len(_Closing.log) == 1  # near-deterministic's, when penalties started; the first pair's is kept
    assert len(_Closing.log) == 3 and len(set(_Closing.log)) == 3  # the rest at the end, each once
