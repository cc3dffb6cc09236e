"""The model bundle: every checkpoint pair the matrix uses, as servers load them (``specverify models export DIR``).

``export_bundle(out)`` writes, under ``out``:

- ``pairs/<pair>/target/`` and ``pairs/<pair>/draft/``: the checkpoint directories as built (``model.safetensors``,
  ``config.json``, ``tokenizer.json``, ...), for vLLM, SGLang, TGI, TensorRT-LLM and transformers; the MiMo pair
  (``mimo``) has a target only (its drafts are the MTP layers inside it);
- ``pairs/<pair>/target.gguf`` / ``draft.gguf``: the same float32 weights as GGUF for llama.cpp (Llama pairs only;
  needs the ``gguf`` package, else recorded as skipped with the reason);
- ``manifest.json``: per pair its files with sha256, the vocabulary (token strings by id), the EOS id, the maximum
  positions, the dtype the exact law assumes (float32: the oracle's float64 law is met by a float32 forward within the
  scenarios' margins, a bf16 one is not), and a serving line per engine (``SERVING``).

An attached deployment's declaration (``specverify.adapters.server.declaration``) copies a pair's name and the
``model.safetensors`` digests from the manifest. Nothing here imports an engine; ``gguf`` is imported only to write
GGUF files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from specverify.errors import InvalidArgument, check

__all__ = ["export_bundle", "SERVING", "MANIFEST", "EXACT_DTYPE"]

MANIFEST = "manifest.json"
EXACT_DTYPE = "float32"
#: One serving line per engine; ``{dir}`` is a pair's directory in the bundle, ``{gamma}`` the drafts per round.
SERVING = {
    "vllm": "vllm serve {dir}/target --dtype float32 --max-model-len 128 --speculative-config "
    '\'{{"method": "draft_model", "model": "{dir}/draft", "num_speculative_tokens": {gamma}}}\'',
    "sglang": "python -m sglang.launch_server --model-path {dir}/target --dtype float32 --speculative-algorithm "
    "STANDALONE --speculative-draft-model-path {dir}/draft --speculative-num-steps {gamma} "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens {gamma_plus_1}",
    "tgi": "text-generation-launcher --model-id {dir}/target --dtype float32 --speculate {gamma}",
    "llama.cpp": "llama-server -m {dir}/target.gguf --spec-type draft-simple --spec-draft-model {dir}/draft.gguf "
    "--spec-draft-n-max {gamma} --spec-draft-n-min 0 --spec-draft-p-min 0 -ctk f32 -ctv f32 -ctkd f32 -ctvd f32",
    "trtllm": "trtllm-serve {dir}/target --backend pytorch  # speculative_config in --extra_llm_api_options (YAML): "
    "decoding_type DraftTarget, speculative_model_dir {dir}/draft, max_draft_len {gamma}",
}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(root: Path, out: Path) -> dict:
    """``{path relative to the bundle: sha256}`` of every file under ``root``."""
    return {str(p.relative_to(out)): _sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def _copy_checkpoint(model, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(Path(model.path), dest)


def _gguf(model, dest: Path) -> str:
    """Write ``dest`` (GGUF of ``model``); '' when written, else why not."""
    try:
        import gguf  # noqa: F401 - the optional dependency of the export
    except ImportError:
        return "skipped: the gguf package is not installed (pip install gguf), so no GGUF files were written"
    from specverify.adapters.boundary.gguf_export import export_gguf

    export_gguf(Path(model.path), dest, pieces="toy")
    return ""


def _pair_entry(name: str, pair, out: Path, gguf: bool, gamma: int) -> dict:
    where = out / "pairs" / name
    where.mkdir(parents=True, exist_ok=True)
    _copy_checkpoint(pair.target, where / "target")
    has_draft = getattr(pair.draft, "path", None) is not None and Path(pair.draft.path) != Path(pair.target.path)
    if has_draft:
        _copy_checkpoint(pair.draft, where / "draft")
    config = json.loads((where / "target" / "config.json").read_text())
    vocab = pair.target.vocab
    entry = {
        "architecture": (config.get("architectures") or ["?"])[0],
        "vocabulary": list(vocab.strings),
        "eos_token_id": int(vocab.eos_token_id),
        "max_positions": int(config.get("max_position_embeddings", 0)),
        "dtype": EXACT_DTYPE,
        "draft": "draft" if has_draft else "inside the target (MTP layers)",
        "target_sha256": _sha256(where / "target" / "model.safetensors"),
        "draft_sha256": _sha256(where / "draft" / "model.safetensors") if has_draft else None,
    }
    llama = entry["architecture"] == "LlamaForCausalLM"
    if gguf and llama:
        why = _gguf(pair.target, where / "target.gguf") or (has_draft and _gguf(pair.draft, where / "draft.gguf"))
        entry["gguf"] = why or "written (F32)"
    else:
        entry["gguf"] = "not requested (--no-gguf)" if not gguf else "skipped: the GGUF export writes Llama checkpoints"
    entry["files"] = _files(where, out)
    lines = {k: v for k, v in SERVING.items() if (k != "llama.cpp" or "gguf" in " ".join(entry["files"]))}
    if not has_draft:
        lines = {"vllm": "vllm serve {dir}/target --dtype float32 --max-model-len 128 --speculative-config "
                 "'{{\"method\": \"mtp\", \"num_speculative_tokens\": {gamma}}}'"}  # fmt: skip
    entry["serving"] = {k: v.format(dir=where, gamma=gamma, gamma_plus_1=gamma + 1) for k, v in lines.items()}
    return entry


def export_bundle(out, pairs: dict, *, gguf: bool = True, gamma: int = 3) -> dict:
    """Write the bundle of ``pairs`` (``{name: PairSpec}``, each with ``build()``) under ``out`` and return its
    manifest (also written to ``out/manifest.json``). ``gguf``: write GGUF files of the Llama pairs; ``gamma``: the
    γ of the serving lines."""
    check(isinstance(pairs, dict) and bool(pairs), f"pairs={pairs!r} must be a non-empty {{name: PairSpec}} dict.")
    check(isinstance(gamma, int) and not isinstance(gamma, bool) and gamma >= 1, f"gamma={gamma!r} must be >= 1.")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"DIR={str(out)!r} exists and is not a directory; name a directory to export into.")
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": 1,
        "dtype": EXACT_DTYPE,
        "dtype_note": "the exact-law verdict needs the weights served in float32; a bf16 deployment is compared "
        "two-sample with its own plain path, never called exact (docs/servers.md)",
        "pairs": {name: _pair_entry(name, spec.build(), out, gguf, gamma) for name, spec in pairs.items()},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
