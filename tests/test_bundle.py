"""``specverify models export``: the checkpoint pairs as servers load them, with a manifest (specverify.bundle)."""

import hashlib
import io
import json
from pathlib import Path

import pytest

from specverify.bundle import EXACT_DTYPE, MANIFEST, export_bundle
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, MIMO_PAIRS
from specverify.cli import main
from specverify.errors import InvalidArgument


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_export_writes_each_pair_with_digests_vocabulary_and_serving_lines(tmp_path):
    manifest = export_bundle(tmp_path, {"main": CHECKPOINT_PAIRS["main"]}, gguf=False, gamma=2)
    assert json.loads((tmp_path / MANIFEST).read_text()) == manifest
    entry = manifest["pairs"]["main"]
    pair = CHECKPOINT_PAIRS["main"].build()
    assert (
        entry["vocabulary"] == list(pair.target.vocab.strings)
        and entry["eos_token_id"] == pair.target.vocab.eos_token_id
    )
    assert entry["max_positions"] == 128 and entry["dtype"] == EXACT_DTYPE == manifest["dtype"] == "float32"
    for name, digest in entry["files"].items():  # every file listed, with its real digest
        assert _sha(tmp_path / name) == digest
    weights = tmp_path / "pairs" / "main" / "target" / "model.safetensors"
    assert entry["target_sha256"] == _sha(weights) == _sha(Path(pair.target.path) / "model.safetensors")
    assert (tmp_path / "pairs" / "main" / "draft" / "tokenizer.json").is_file()
    assert 'num_speculative_tokens": 2' in entry["serving"]["vllm"] and "llama.cpp" not in entry["serving"]
    assert str(tmp_path / "pairs" / "main" / "target") in entry["serving"]["vllm"]
    assert entry["gguf"].startswith("not requested")


def test_export_gguf_of_a_llama_pair(tmp_path):
    pytest.importorskip("gguf", reason="the GGUF export needs the gguf package (pip install gguf)")
    entry = export_bundle(tmp_path, {"main": CHECKPOINT_PAIRS["main"]})["pairs"]["main"]
    assert entry["gguf"] == "written (F32)"
    assert _sha(tmp_path / "pairs/main/target.gguf") == entry["files"]["pairs/main/target.gguf"]
    assert "--spec-draft-n-max 3" in entry["serving"]["llama.cpp"]


def test_cli_exports_the_matrix_pairs_and_mimo(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert main(["models", "export", str(tmp_path / "bundle"), "--no-gguf"], out=out, err=err) == 0, err.getvalue()
    manifest = json.loads((tmp_path / "bundle" / MANIFEST).read_text())
    assert set(manifest["pairs"]) == set(CHECKPOINT_PAIRS) | set(MIMO_PAIRS)
    mimo = manifest["pairs"]["mimo"]
    assert mimo["draft_sha256"] is None and "mtp" in mimo["serving"]["vllm"]
    assert "manifest:" in out.getvalue()
    (tmp_path / "file").write_text("x")
    assert main(["models", "export", str(tmp_path / "file")], out=out, err=err) == 2
    assert "not a directory" in err.getvalue()


def test_export_arguments_checked(tmp_path):
    with pytest.raises(InvalidArgument, match="gamma"):
        export_bundle(tmp_path, {"main": CHECKPOINT_PAIRS["main"]}, gamma=0)
    with pytest.raises(InvalidArgument, match="pairs"):
        export_bundle(tmp_path, {})
