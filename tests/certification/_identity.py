"""One engine, many ways to run it (issue 40, item 2): for the whole quick matrix of a decoder, the seeded counts,
p-values and verdict are the same inline, in draw blocks, as shards merged in any order, resumed after a SIGKILL and
as pytest items (Ray: tests/certification/test_ray.py). Unseeded scenarios draw fresh entropy in every part, so
only their kind and coverage are compared (docs/design.md, "Execution"). The test modules
``test_identity_*.py`` run these checks for one decoder each, so that xdist spreads them."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import specverify as sv
from specverify.certification import SCENARIOS
from specverify.certification.config.execution import create_run
from specverify.certification.execution.certify import merge_files
from specverify.certification.execution.plan import plan

OPTIONS = dict(level="quick", seed=3, isolation="none")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK = 3000  # draws per block: not a multiple of the looks, so blocks end inside and at looks


def _random(result) -> bool:
    """Whether the result's counts come from fresh entropy (unseeded requests, the collision check)."""
    member = SCENARIOS.get(result.member) if result.kind == "mixed" else None  # an unseeded member of a mixed call
    return (
        result.kind == "collision"
        or not SCENARIOS[result.scenario].seeded
        or (member is not None and not member.seeded)
    )


def key(cert) -> list:
    """What must be identical: per result, its name, kind and coverage; for a seeded one also its decision, N,
    planned N, the worst outcomes' counts, the statistic and p-value (to 1e-9: the battery's sums may run in
    another order)."""
    out = []
    for r in cert.scenarios:
        row = [r.name, r.kind, r.covered]
        if not _random(r):
            stat = None if r.statistic is None else pytest.approx(r.statistic, rel=1e-9)
            pvalue = None if r.pvalue is None else pytest.approx(r.pvalue, rel=1e-9, abs=1e-300)
            row += [r.passed, r.n, r.planned_n, tuple(tuple(w[:2]) for w in r.worst), stat, pvalue]
        out.append(row)
    return out


def same(cert, whole) -> None:
    assert cert.verdict == whole.verdict, cert.reason
    assert key(cert) == key(whole)
    assert cert.reproducible == whole.reproducible


def inline(factory: str):
    return sv.certify(factory, **OPTIONS)


def in_blocks(factory: str, whole) -> None:
    split = sv.certify(factory, block_draws=BLOCK, **OPTIONS)
    same(split, whole)
    assert split.command == whole.command.replace(" --seed", f" --block-draws {BLOCK} --seed")


def as_shards(factory: str, whole) -> None:
    """Three shards of the run in parts, through JSON, merged in a shuffled order."""
    bundles = [sv.certify(factory, block_draws=BLOCK, shard=(i, 3), **OPTIONS).shard_info for i in (1, 2, 3)]
    bundles = json.loads(json.dumps(bundles))
    random.Random(7).shuffle(bundles)
    for bundle in bundles:
        random.Random(8).shuffle(bundle["parts"])
    merged = merge_files(bundles).certificate
    same(merged, whole)


def resumed_after_sigkill(factory: str, whole, tmp_path) -> None:
    """The CLI run with --resume, SIGKILLed once a third of its parts are finished, then the same run resumed."""
    path = tmp_path / "run.json"
    parts = len(plan(*create_run(factory=factory, **OPTIONS)).parts)
    words = [sys.executable, "-m", "specverify", "certify", factory, "--level", "quick", "--seed", "3"]
    words += ["--isolation", "none", "--resume", str(path)]
    proc = subprocess.Popen(words, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finished = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and finished < parts // 3:
            time.sleep(0.02)
            try:
                finished = len(json.loads(path.read_text())["finished"])
            except (OSError, ValueError, KeyError):  # not written yet (the file is replaced whole)
                continue
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kept = json.loads(path.read_text())["finished"]
    assert kept and len(kept) < parts, len(kept)
    (tmp_path / ".run.json.x1.tmp").write_text("{half a wri")  # as a kill in the middle of a write leaves it
    lines = []
    resumed = sv.certify(factory, resume=str(path), progress=lines.append, **OPTIONS)
    assert lines[0].startswith(f"specverify: resuming {path}: {len(kept)} parts finished"), lines[0]
    ran = [line for line in lines if line.startswith("specverify: [")]
    assert len(ran) == parts - len(kept), "a finished part ran again, or one was left out"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # the resume removed it, and left none
    same(resumed, whole)


def tests_for(factory: str) -> dict:
    """The module-scoped run of ``factory`` and one test per way to execute it, for a test module's globals."""

    @pytest.fixture(scope="module")
    def whole():
        cert = inline(factory)
        assert cert.verdict == "exact", cert.reason
        return cert

    def test_in_draw_blocks(whole):
        in_blocks(factory, whole)

    def test_as_shards_merged_in_any_order(whole):
        as_shards(factory, whole)

    def test_resumed_after_a_sigkill(whole, tmp_path):
        resumed_after_sigkill(factory, whole, tmp_path)

    def test_as_pytest_items(whole, pytester):
        as_plugin_items(factory, whole, pytester)

    return {
        f.__name__: f
        for f in (
            test_in_draw_blocks,
            test_as_shards_merged_in_any_order,
            test_resumed_after_a_sigkill,
            test_as_pytest_items,
        )
    } | {"whole": whole}


PLUGIN_TEST = """
import pytest

@pytest.mark.specverify(factory={factory!r})
def test_engine(specverify_result):
    pass
"""


def as_plugin_items(factory: str, whole, pytester) -> None:
    """The matrix as pytest items (one per scenario); the session's certificate merges their parts."""
    pytester.makepyfile(test_identity_items=PLUGIN_TEST.format(factory=factory))
    path = pytester.path / "certificate.json"
    args = ["-p", "no:randomly", "--specverify-isolation", "none", "--specverify-seed", "3"]
    result = pytester.runpytest(*args, "--specverify-level", "quick", "--specverify-json", str(path))
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    from specverify.report import load_certificate

    same(load_certificate(str(path)), whole)
