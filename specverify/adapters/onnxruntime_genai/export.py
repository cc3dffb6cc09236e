"""Checkpoint models as ONNX Runtime GenAI model folders, cached beside the checkpoint and keyed by its hash.

``model_dir(model)`` builds (once) ``<cache>/onnxruntime-genai/<checkpoint dir name>.ort<version>.v<N>/`` with the
engine's own model builder (``python -m onnxruntime_genai.models.builder -i CHECKPOINT -o OUT -p fp32 -e cpu``: float32
weights, the CPU provider; ~5 s per model here), where ``<cache>`` is the checkpoint directory's parent and the
checkpoint directory's name ends in the hash of its spec, so a changed spec is a new folder. ``speculative_dir(target,
draft)`` composes the folder the speculative model type loads: the two builds copied into ``target/`` and ``draft/``
subfolders and one ``genai_config.json`` whose ``model.decoder`` is the target's, ``model.draft`` the draft's decoder
block (the engine refuses ``..`` in a model path, so the two cannot stay where they were built) and ``speculative``
``{"max_draft_tokens": 4}``, the engine's default; the adapter sets the per-request options through
``GeneratorParams.set_speculative_options``. Each folder is written under a temporary name and renamed into place.

:func:`compose_config` (the JSON) runs without the engine; :func:`model_dir` needs ``onnxruntime_genai`` with its
builder's dependencies (``onnx``, ``onnx_ir``, ``torch``, ``transformers``) in the running interpreter.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from specverify.adapters.boundary.checkpoints import checkpoint_source
from specverify.errors import check

__all__ = ["EXPORT_VERSION", "model_dir", "speculative_dir", "compose_config", "genai_version"]

EXPORT_VERSION = 1  # bump when the export changes: it is part of every folder name


def genai_version() -> str:
    """The installed ``onnxruntime-genai`` version (part of every folder name: another builder, another folder)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnxruntime-genai")
    except PackageNotFoundError as exc:
        raise RuntimeError(
            "onnxruntime-genai is not installed: pip install onnxruntime-genai onnx onnx-ir torch==2.13.0 "
            "transformers in a venv of its own (.ci/onnxruntime_genai does)."
        ) from exc


def _checkpoint(model: object) -> Path:
    return checkpoint_source(model, "the ONNX Runtime GenAI adapter")


def _publish(final: Path, write) -> Path:
    """``write(tmp)`` into a fresh temporary folder beside ``final``, then rename it into place (once)."""
    if (final / "genai_config.json").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        write(tmp)
        try:
            os.replace(tmp, final)
        except OSError:  # another process published it first
            if not (final / "genai_config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def model_dir(model: object) -> Path:
    """The ONNX Runtime GenAI folder of a ``CheckpointModel``, built if missing (module docstring)."""
    source = _checkpoint(model)
    final = source.parent / "onnxruntime-genai" / f"{source.name}.ort{genai_version()}.v{EXPORT_VERSION}"

    def write(tmp: Path) -> None:
        command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(source), "-o", str(tmp)]
        command += ["-p", "fp32", "-e", "cpu", "-c", str(tmp / ".builder-cache")]
        done = subprocess.run(command, capture_output=True, text=True)
        shutil.rmtree(tmp / ".builder-cache", ignore_errors=True)
        if done.returncode != 0 or not (tmp / "genai_config.json").is_file():
            raise RuntimeError(
                f"onnxruntime_genai's model builder failed on {str(source)!r} (exit {done.returncode}): "
                f"{done.stderr[-2000:]}\nReproduce: {' '.join(command)}"
            )

    return _publish(final, write)


def compose_config(target_config: dict, draft_config: dict) -> dict:
    """The speculative ``genai_config.json`` of a target and a draft built apart, placed in ``target/`` and
    ``draft/`` subfolders (module docstring).

    >>> t = {"model": {"decoder": {"filename": "model.onnx"}, "vocab_size": 6}, "search": {}}
    >>> d = {"model": {"decoder": {"filename": "model.onnx"}, "vocab_size": 6}, "search": {}}
    >>> c = compose_config(t, d)
    >>> c["model"]["decoder"]["filename"], c["model"]["draft"]["filename"], c["speculative"]
    ('target/model.onnx', 'draft/model.onnx', {'max_draft_tokens': 4})
    """
    t_vocab, d_vocab = target_config["model"].get("vocab_size"), draft_config["model"].get("vocab_size")
    check(t_vocab == d_vocab, f"draft vocab_size={d_vocab!r} must equal the target's {t_vocab!r}.")
    config = copy.deepcopy(target_config)
    config["model"]["decoder"]["filename"] = "target/" + target_config["model"]["decoder"]["filename"]
    draft = copy.deepcopy(draft_config["model"]["decoder"])
    draft["filename"] = "draft/" + draft["filename"]
    config["model"]["draft"] = draft
    config["speculative"] = {"max_draft_tokens": 4}
    return config


def speculative_dir(target: object, draft: object) -> Path:
    """The speculative folder of a target and a draft ``CheckpointModel`` (module docstring)."""
    t_dir, d_dir = model_dir(target), model_dir(draft)
    name = f"spec-{_checkpoint(target).name}-{_checkpoint(draft).name}.ort{genai_version()}.v{EXPORT_VERSION}"
    final = t_dir.parent / name

    def write(tmp: Path) -> None:
        shutil.copytree(t_dir, tmp / "target")
        shutil.copytree(d_dir, tmp / "draft")
        shutil.copy(t_dir / "tokenizer.json", tmp / "tokenizer.json")
        shutil.copy(t_dir / "tokenizer_config.json", tmp / "tokenizer_config.json")
        config = compose_config(*(json.loads((d / "genai_config.json").read_text()) for d in (t_dir, d_dir)))
        (tmp / "genai_config.json").write_text(json.dumps(config, indent=2))

    return _publish(final, write)
