"""--target DIR --draft DIR: two-sample certification on checkpoints the certifier cannot enumerate."""

import pytest

pytest.importorskip("transformers", reason="user checkpoints need the hf extra (tokenizers)")

from specverify.certification import certify  # noqa: E402
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS  # noqa: E402
from specverify.cli import main  # noqa: E402
from specverify.errors import InvalidArgument  # noqa: E402

HERE = "tests.certification.user_factories"


@pytest.fixture(scope="module")
def dirs():
    pair = CHECKPOINT_PAIRS["main"].build()  # built by the other checkpoint tests too (cached)
    return str(pair.target.path), str(pair.draft.path)


def run(factory, dirs, **kw):
    target, draft = dirs
    return certify(
        f"{HERE}:{factory}", target_dir=target, draft_dir=draft, against="plain", level="quick", isolation="none",
        max_samples=16000, **kw,
    )  # fmt: skip


def test_an_exact_decoder_agrees_with_its_plain_path_but_is_never_called_exact(dirs):
    cert = run("speculative", dirs)
    assert cert.verdict == "inconclusive" and "never exact" in cert.reason, cert.reason
    got = {s.name: s for s in cert.scenarios}
    assert all(s.covered and s.passed for s in got.values()), [(s.name, s.pvalue, s.note) for s in got.values()]
    top_k = got["user-top-k"]
    assert 1000 <= top_k.n < top_k.planned_n and "pilot" in top_k.note  # --max-samples shares 16000 out
    small = sum(s.n for s in got.values() if s.kind == "sampling" and s.planned_n <= 200)  # drawn whole
    assert sum(s.n for s in got.values() if s.kind == "sampling") <= 16000 + small
    assert cert.speculation_observed is True  # the speculative side's accepted counts are kept


def test_a_wrong_law_is_rejected_against_the_plain_path(dirs):
    cert = run("hotter", dirs)
    assert cert.verdict == "greedy-only", cert.reason
    sampling = {"user-top-k", "user-min-p", "user-top-k-t0.7", "user-min-p-t0.7"}
    assert not {s.name for s in cert.scenarios if s.passed is False} - sampling


def test_bad_directories_and_flags_are_refused(dirs, tmp_path, capsys):
    with pytest.raises(InvalidArgument, match="--target="):
        run("speculative", (str(tmp_path), dirs[1]))
    assert main(["certify", f"{HERE}:speculative", "--target", dirs[0], "--draft", dirs[1]]) == 2
    assert "--against" in capsys.readouterr().err
    flags = ["--target", dirs[0], "--draft", dirs[1], "--against", "plain", "--budget", "30"]
    assert main(["certify", f"{HERE}:speculative", *flags]) == 2
    assert "--budget cannot be used with --target" in capsys.readouterr().err
