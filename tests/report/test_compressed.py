"""``specverify report`` reads a certificate compressed as ``.json.xz`` or ``.json.gz`` (how docs/findings stores
them) as it reads the ``.json``, and every certificate stored under docs/ opens that way."""

import gzip
import io
import lzma
import pathlib

import pytest

from specverify.cli import ExitCode, main
from specverify.errors import InvalidArgument
from specverify.report import load_certificate, render_json

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("suffix, compress", [(".json.xz", lzma.compress), (".json.gz", gzip.compress)])
def test_a_compressed_certificate_reads_as_its_json(zoo_cert, tmp_path, capsys, suffix, compress):
    text = render_json(zoo_cert)
    plain, packed = tmp_path / "cert.json", tmp_path / f"cert{suffix}"
    plain.write_text(text)
    packed.write_bytes(compress(text.encode()))
    assert load_certificate(str(packed)) == load_certificate(str(plain)) == zoo_cert
    assert main(["report", str(plain)]) == ExitCode.MEETS
    expected = capsys.readouterr().out
    assert main(["report", str(packed)]) == ExitCode.MEETS
    assert capsys.readouterr().out == expected and "VERDICT: GREEDY-ONLY" in expected


@pytest.mark.parametrize("suffix, compress", [(".json.xz", lzma.compress), (".json.gz", gzip.compress)])
def test_a_cut_or_mislabelled_compressed_file_is_a_usage_error(zoo_cert, tmp_path, capsys, suffix, compress):
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(compress(render_json(zoo_cert).encode())[:40])
    with pytest.raises(InvalidArgument, match=f"is not a readable {suffix[5:]} file"):
        load_certificate(str(cut))
    mislabelled = tmp_path / f"plain{suffix}"
    mislabelled.write_text(render_json(zoo_cert))
    assert main(["report", str(mislabelled)]) == ExitCode.USAGE
    assert f"is not a readable {suffix[5:]} file" in capsys.readouterr().err
    assert main(["report", str(tmp_path / f"absent{suffix}")]) == ExitCode.USAGE
    assert "cannot be read" in capsys.readouterr().err


def test_every_certificate_stored_under_docs_opens_with_specverify_report():
    stored = sorted(DOCS.rglob("*.json.xz"))
    if not stored:
        pytest.skip("no docs/ here (an installed package)")
    failed = {}
    for path in stored:
        out, err = io.StringIO(), io.StringIO()
        if main(["report", str(path)], out=out, err=err) != ExitCode.MEETS or "VERDICT" not in out.getvalue():
            failed[str(path.relative_to(DOCS))] = err.getvalue()[-300:]
    assert not failed, f"{len(failed)} of {len(stored)} stored certificates do not render: {failed}"
