"""``--executor ray`` (docs/ray.md) on a local cluster on the loopback: the same verdict and identical seeded
counts as the unsharded run, again after a worker is SIGKILLed mid-part; the merge refuses a duplicate part; a
missing extra is a usage error naming it. Every test that imports Ray is marked ``ray`` and ``slow``: the README
command leaves them out (ray installed or not), ``.ci/ray`` runs them (``-m ray``), and without the extra they skip."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import specverify as sv
from specverify.certification.config.execution import create_run
from specverify.certification.execution.certify import execute
from specverify.cli import ExitCode, main

FACTORY = "specverify.reference:make_decoder"
SUBSET = ["temperature-1", "eos-in-block", "greedy"]  # two sampling scenarios on two actors, and a greedy one
MARKING = "tests.certification.ray_decoders:marking_reference"


def _ray():
    return pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]' (.ci/ray)")


@pytest.fixture(scope="module")
def cluster():
    """One local cluster of 2 CPUs for the module (``run_on_ray`` uses a Ray already initialised); Ray binds this
    machine's own address (it maps 127.0.0.1 there), so nothing outside the machine is involved."""
    ray = _ray()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never a `ray start` one
    yield ray
    ray.shutdown()


def _counts(cert):
    """What a seeded scenario must reproduce: its draws, the observed counts of its worst outcomes, its decision,
    and its statistic (approx: the same counts give it to the last bits, other counts miss by far more)."""
    rows = cert["scenarios"] if isinstance(cert, dict) else [s.to_dict() for s in cert.scenarios]
    return [
        (s["name"], s["n"], s["passed"], s["df"], s["not_run"], [_observed(w) for w in s["worst"]],
         pytest.approx(s["statistic"], rel=1e-12) if s["statistic"] is not None else None)
        for s in json.loads(json.dumps(rows))
    ]  # fmt: skip


def _observed(worst):
    """A worst outcome's observed count (a dict in the certificate's JSON, a tuple in its dataclass)."""
    return worst["observed"] if isinstance(worst, dict) else worst[1]


def _local(factory=FACTORY, **options):
    return sv.certify(factory, level="quick", seed=5, scenarios=SUBSET, isolation="none", **options)


def _on_ray(factory=FACTORY, *, workers=2, progress=None, **options):
    """The certificate of a run on Ray (blocks of 4096 draws unless told), in this process."""
    values = dict(level="quick", seed=5, executor="ray", ray_workers=workers, block_draws=4096)
    values.update(options)
    config, execution = create_run(factory=factory, **values)
    return execute(config, execution, progress).certificate


def _distribution_name():
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    return re.search(r'^name = "([^"]+)"', text, re.M).group(1)


def test_without_the_extra_the_ray_executor_is_a_usage_error_naming_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, installed or not
    code = main(["certify", FACTORY, "--level", "quick", "--scenario", "greedy", "--executor", "ray"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert f'pip install "{_distribution_name()}[ray]"' in err


def test_ray_flags_need_the_ray_executor(capsys):
    code = main(["certify", FACTORY, "--level", "quick", "--ray-workers", "2", "--ray-address", "auto"])
    assert code == ExitCode.USAGE
    assert "--ray-address='auto' needs --executor ray" in capsys.readouterr().err


@pytest.mark.ray
@pytest.mark.slow
def test_the_ray_executor_refuses_a_bad_worker_count_and_a_shard(capsys):
    _ray()
    for extra, message in [
        (["--ray-workers", "0"], "--ray-workers='0' must be an int >= 1"),
        (["--shard", "1/2", "--counts-out", "x.json"], "--shard=(1, 2) with --executor ray"),
    ]:
        code = main(["certify", FACTORY, "--level", "quick", "--executor", "ray", *extra])
        assert code == ExitCode.USAGE and message in capsys.readouterr().err, extra


def test_ray_resources_are_validated_with_their_name_and_value():
    from specverify.certification.execution.ray import ray_resources_of
    from tests.certification import ray_decoders

    assert ray_resources_of(ray_decoders.cpu_reference) == {"num_cpus": 1}
    assert ray_resources_of(lambda t, d: None) == {"num_cpus": 1}  # undeclared: one CPU per engine actor

    def gpus(target, draft):
        return None

    gpus.ray_resources = {"num_gpus": 1, "resources": {"accelerator": 0.5}}
    assert ray_resources_of(gpus) == {"num_gpus": 1, "resources": {"accelerator": 0.5}, "num_cpus": 1}
    for bad, match in [
        ({"num_gpus": -1}, r"ray_resources\['num_gpus'\]=-1 must be a finite number >= 0"),
        ({"gpus": 1}, r"has the keys \['gpus'\]; use only"),
        ([1], r"ray_resources=\[1\] must be a dict"),
        ({"resources": {"x": "many"}}, r"ray_resources\['resources.x'\]='many' must be a finite number"),
    ]:
        gpus.ray_resources = bad
        with pytest.raises(sv.InvalidArgument, match=match):
            ray_resources_of(gpus)


@pytest.mark.ray
@pytest.mark.slow
def test_a_malformed_ray_resources_declaration_is_a_set_up_error():
    _ray()
    cert = _on_ray("tests.certification.ray_decoders:negative_gpus_reference")  # before any cluster is started
    assert cert.verdict == "error" and "ray_resources['num_gpus']=-1" in cert.reason


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("factory", [FACTORY, "tests.certification.resume_decoders:slow_path"])
def test_the_whole_quick_matrix_on_ray_is_the_run_here(cluster, factory):
    """Issue 40's identity on Ray: the quick matrix in blocks on two engine actors, merged as the parts arrive, gives
    the seeded counts, p-values and verdict of the run here (tests/certification/_identity.py)."""
    from tests.certification import _identity as identity

    whole = identity.inline(factory)
    on_ray = _on_ray(factory, block_draws=identity.BLOCK, **identity.OPTIONS)
    identity.same(on_ray, whole)
    assert on_ray.versions["executor"].startswith("ray ")


@pytest.mark.ray
@pytest.mark.slow
def test_ray_keeps_its_parts_in_a_resume_file_and_a_local_run_resumes_it(cluster, tmp_path):
    path = tmp_path / "run.json"
    first = _on_ray(scenarios=SUBSET, isolation="none", resume=str(path))
    kept = json.loads(path.read_text())["finished"]
    assert "greedy#0" in kept and "(reproducibility)#0" in kept
    lines = []
    again = sv.certify(FACTORY, level="quick", seed=5, scenarios=SUBSET, isolation="none", block_draws=4096,
                       resume=str(path), progress=lines.append)  # fmt: skip
    assert not [line for line in lines if line.startswith("specverify: [")]  # nothing left to run
    assert _counts(again) == _counts(first) == _counts(_local())


@pytest.mark.ray
@pytest.mark.slow
def test_ray_with_a_budget_and_with_several_configurations(cluster):
    budgeted = _on_ray(scenarios=SUBSET, isolation="none", block_draws=None, max_samples=3000)
    assert budgeted.verdict == "inconclusive" and any(s.n < s.planned_n for s in budgeted.scenarios if s.covered)
    from specverify.certification.execution.certify import certify_configurations

    cs = certify_configurations("tests.certification.config_decoders:configured", ["default", "warm-cache"],
                                level="quick", seed=5, isolation="none", executor="ray", ray_workers=2)  # fmt: skip
    assert [r.name for r in cs.results] == ["default", "warm-cache"] and cs.verdict == "exact", cs
    assert all(c.versions["executor"].startswith("ray ") for c in cs.certificates)


@pytest.mark.parametrize("isolation", ["none", "process"])
@pytest.mark.ray
@pytest.mark.slow
def test_ray_gives_the_verdict_and_seeded_counts_of_the_run_here(cluster, tmp_path, capsys, isolation):
    out = tmp_path / "cert.json"
    args = ["certify", FACTORY, "--level", "quick", "--seed", "5", "--isolation", isolation, "--json", str(out)]
    args += [f"--scenario={name}" for name in SUBSET] + ["--executor", "ray", "--ray-workers", "2"]
    args += ["--block-draws", "4096"]
    code = main(args)
    err = capsys.readouterr().err
    whole = _local()
    assert code == ExitCode.FALLS_SHORT, err  # inconclusive: a subset of the core scenarios
    doc = json.loads(out.read_text())  # the certificate, as written
    assert doc["verdict"] == whole.verdict == "inconclusive" and doc["reason"] == whole.reason
    assert _counts(doc) == _counts(whole)
    assert doc["reproducible"] is whole.reproducible is True
    planned = int(re.search(r"ray \S+: (\d+) parts on 2 engine actors", err).group(1))
    merged = re.findall(r"specverify: ray: \[(\d+)/(\d+)\] (.+?)(?: block \d+ .*)? stored,", err)  # per part
    assert merged and all(int(total) == planned for _, total, _ in merged), err
    assert [int(i) for i, _, _ in merged] == list(range(1, len(merged) + 1))
    assert {name for _, _, name in merged} == {*SUBSET, "the reproducibility check"}
    cancelled = int(re.search(r"(\d+) cancelled", doc["versions"]["executor"]).group(1))
    assert len(merged) + cancelled == planned  # every part merged or cancelled: none lost, none twice
    from specverify.certification.config.run_config import RunConfig

    same = RunConfig.create(factory=FACTORY, level="quick", seed=5, scenarios=SUBSET, isolation=isolation)
    # it reruns without Ray: in parts in this process (--block-draws), and without it the run of whole scenarios
    assert doc["command"] == same.reproduce().replace(" --seed ", " --block-draws 4096 --seed ")
    assert "ray" not in doc["command"]


def _kill_when_marked(mark: Path, which: int, killed: list, done: threading.Event):
    """Wait for the double's mark, then SIGKILL the Ray worker (field ``which`` of the mark: 0 the decoder's own
    process, 1 its parent); give up when ``done`` is set (the run ended without a mark)."""
    while not done.is_set():
        if mark.exists() and mark.read_text().endswith("\n"):
            pid = int(mark.read_text().split()[which])
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.05)


@pytest.mark.parametrize("isolation", ["none", "process"])
@pytest.mark.ray
@pytest.mark.slow
def test_a_worker_killed_mid_part_is_retried_with_identical_counts(cluster, tmp_path, isolation):
    mark = tmp_path / "mark"
    options = {"mark": str(mark)}
    killed, lines, done = [], [], threading.Event()
    # under --isolation none the decoder runs in the actor itself; under process, in the actor's worker child
    which = 0 if isolation == "none" else 1
    watcher = threading.Thread(target=_kill_when_marked, args=(mark, which, killed, done))
    watcher.start()
    try:
        cert = _on_ray(MARKING, progress=lines.append, scenarios=SUBSET, isolation=isolation, engine_options=options)
    finally:
        done.set()
        watcher.join()
    assert killed, "the double never marked a part: nothing was killed"
    assert any("its worker was lost" in line and "running it again" in line for line in lines), lines
    whole = _local(MARKING, engine_options=options)  # the mark exists now: the double no longer pauses
    assert cert.verdict == whole.verdict and _counts(cert) == _counts(whole)
    assert "1 retried" in cert.versions["executor"]


@pytest.mark.parametrize(("isolation", "who", "verdict"), [("none", "self", "invalid"), ("process", "parent", "error")])
@pytest.mark.ray
@pytest.mark.slow
def test_a_part_that_loses_its_worker_twice_ends_the_run_by_design_rule_1(cluster, isolation, who, verdict):
    """Under --isolation none the decoder ran inside the Ray worker it killed: invalid, with a reproduce line.
    Under process its calls ran in a child of that worker, which dies with it: nothing is said of the decoder."""
    lines = []
    cert = _on_ray("tests.certification.ray_decoders:killing_reference", workers=1, progress=lines.append,
                   isolation=isolation, scenarios=["temperature-1", "greedy"], engine_options={"who": who})  # fmt: skip
    assert cert.verdict == verdict, cert.reason
    assert sum("its worker was lost" in line for line in lines) == 1, lines  # one retry, then the run ends
    assert "temperature-1 block 0" in cert.reason and "lost its Ray worker on both attempts" in cert.reason
    assert "specverify certify tests.certification.ray_decoders:killing_reference" in cert.reason


@pytest.fixture
def head_node(tmp_path):
    """A one-node cluster started as a user starts one (``ray start --head``, 2 CPUs), stopped by its own pid."""
    _ray()
    probe = socket.socket()
    probe.bind(("", 0))
    port = probe.getsockname()[1]
    probe.close()
    log = tmp_path / "head.log"
    command = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}"]
    command += ["--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
    with open(log, "w") as out:
        head = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text() and head.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "Ray runtime started" in log.read_text(), log.read_text()
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)


@pytest.mark.ray
@pytest.mark.slow
def test_ray_address_connects_to_a_running_cluster(head_node, tmp_path):
    """The CLI in a process of its own (no Ray initialised there) connects with --ray-address, with the token
    authentication a `ray start` cluster asks for; without RAY_AUTH_MODE=token the refusal says what to set."""
    out = tmp_path / "cert.json"
    args = [sys.executable, "-m", "specverify.cli", "certify", FACTORY, "--level", "quick", "--seed", "5"]
    args += ["--scenario=eos-in-block", "--scenario=greedy", "--executor", "ray", "--ray-address", head_node]
    args += ["--block-draws", "4096"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    refused = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == ExitCode.USAGE and "RAY_AUTH_MODE=token" in refused.stderr, refused.stderr
    done = subprocess.run(
        [*args, "--json", str(out)], capture_output=True, text=True, env=dict(env, RAY_AUTH_MODE="token"), timeout=300
    )
    assert done.returncode == ExitCode.FALLS_SHORT, done.stderr  # inconclusive: two of the core scenarios
    doc = json.loads(out.read_text())
    whole = sv.certify(FACTORY, level="quick", seed=5, scenarios=["eos-in-block", "greedy"], isolation="none")
    assert doc["verdict"] == whole.verdict and _counts(doc) == _counts(whole)
    assert "engine actors" in done.stderr and doc["versions"]["executor"].startswith("ray ")
