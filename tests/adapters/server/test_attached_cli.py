"""``specverify certify specverify.adapters.server:attached --server-url URL --server-declaration FILE``: the run
keeps the scenarios of the declared pair, lists the others as not covered (stderr and the certificate's engine
record), and a declaration whose weights do not match refuses at set-up. The deployment is the stand-in server on
the checkpoint ``main`` pair (the reference decoder behind the OpenAI dialect)."""

import io
import json

import pytest

from specverify.adapters.server.declaration import read_declaration, weights_sha256
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
from specverify.certification.matrix.scenarios import scenarios_served
from specverify.cli import main
from specverify.errors import InvalidArgument
from tests.adapters.server.standin import StandIn


@pytest.fixture(scope="module")
def main_pair():
    return CHECKPOINT_PAIRS["main"].build()


def _declaration(tmp_path, pair, **changes):
    data = {"pair": "main", "gamma": 3, "dialect": "openai", "target_sha256": weights_sha256(pair.target),
            "draft_sha256": weights_sha256(pair.draft), **changes}  # fmt: skip
    path = tmp_path / "deploy.json"
    path.write_text(json.dumps(data))
    return path


def test_scenarios_served_by_one_pair():
    kept, other = scenarios_served("main")
    assert "greedy" in kept and "temperature-1" in kept
    assert "first-token-rejection" in other and "far-eos" in other["first-token-rejection"]
    assert not set(kept) & set(other)
    with pytest.raises(InvalidArgument, match="not a checkpoint pair"):
        scenarios_served("nope")


@pytest.mark.slow  # ~30 s on 2 shared cores: the honour probes and the greedy scenario through HTTP
def test_attached_run_keeps_the_served_pair_and_lists_the_rest(tmp_path, main_pair):
    server = StandIn(main_pair.target, main_pair.draft)
    try:
        declaration = _declaration(tmp_path, main_pair)
        out, err = io.StringIO(), io.StringIO()
        argv = ["certify", "specverify.adapters.server:attached", "--models", "checkpoint", "--level", "quick",
                "--isolation", "none", "--server-url", server.url, "--server-declaration", str(declaration),
                "--scenario", "greedy", "--scenario", "first-token-rejection",
                "--json", str(tmp_path / "c.json")]  # fmt: skip
        code = main(argv, out=out, err=err)
        assert (
            "not covered by the attached deployment: first-token-rejection (runs on the pair far-eos" in err.getvalue()
        )
        cert = json.loads((tmp_path / "c.json").read_text())
        assert [(r["name"], r["passed"]) for r in cert["scenarios"]] == [("greedy", True)]
        declared = cert["engine"]["requested"]["declared"]
        assert declared["pair"] == "main" and "first-token-rejection" in declared["not_served"]
        assert cert["engine"]["requested"]["host"] == server.url.removeprefix("http://")
        assert code != 0 and cert["verdict"] == "inconclusive"  # core scenarios on other pairs: never exact
    finally:
        server.close()


def test_a_declaration_of_other_weights_refuses_and_flags_go_together(tmp_path):
    from types import SimpleNamespace

    from specverify.adapters.server import attached
    from specverify.adapters.server.declaration import WEIGHTS

    models = []
    for name in ("target", "draft"):  # checkpoint-shaped models: a folder with weights (no checkpoint built: ~4 s)
        (tmp_path / name).mkdir()
        (tmp_path / name / WEIGHTS).write_bytes(name.encode())
        models.append(SimpleNamespace(path=str(tmp_path / name)))
    pair = SimpleNamespace(target=models[0], draft=models[1])
    assert weights_sha256(pair.target) != weights_sha256(pair.draft)
    for changed in ({"target_sha256": "0" * 64}, {"draft_sha256": "0" * 64}):
        declared = _declaration(tmp_path, pair, **changed)
        with pytest.raises(InvalidArgument, match="serves pair 'main'"):
            attached(pair.target, pair.draft, url="http://127.0.0.1:1", declaration=str(declared))
    assert read_declaration(declared).gamma == 3
    err = io.StringIO()
    code = main(["certify", "specverify.reference:make_decoder", "--server-url", "http://h:1"], out=io.StringIO(),
                err=err)  # fmt: skip
    assert code == 2 and "go together" in err.getvalue()
