"""Checkpoint models as OpenVINO IR folders, cached beside the checkpoint and keyed by its hash.

``model_dir(model)`` converts (once) a ``CheckpointModel`` into
``<cache>/openvino/<checkpoint dir name>.ov<version>.v<N>/`` with optimum-intel's exporter (``optimum-cli export
openvino --model CHECKPOINT --task text-generation-with-past --weight-format fp32 OUT``: float32 weights, ~40 s per
model on 2 shared cores), where ``<cache>`` is the checkpoint directory's parent and the checkpoint directory's name
ends in its spec's hash. optimum-intel pins its own transformers and torch, so it lives in a venv of its own:
``$SPECVERIFY_OPTIMUM_CLI`` names its ``optimum-cli`` (else the one beside the running interpreter, else on
``PATH``). The folder is written under a temporary name and renamed into place.

The converted tokenizer (``openvino_tokenizer.xml``) does not round-trip the checkpoint's vocabulary (encoding a toy
string gives ``[-1]``, decoding inserts spaces), so the adapter gives the engine token ids and reads token ids.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from specverify.adapters.boundary.checkpoints import checkpoint_source

__all__ = ["EXPORT_VERSION", "CLI_ENV", "model_dir", "optimum_cli", "openvino_genai_version"]

EXPORT_VERSION = 1  # bump when the export changes: it is part of every folder name
CLI_ENV = "SPECVERIFY_OPTIMUM_CLI"


def openvino_genai_version() -> str:
    """The installed ``openvino-genai`` version (part of every folder name)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openvino-genai")
    except PackageNotFoundError as exc:
        raise RuntimeError(
            "openvino-genai is not installed: pip install openvino-genai in a venv of its own (.ci/openvino does)."
        ) from exc


def optimum_cli() -> str:
    """The ``optimum-cli`` that converts (module docstring), or a ``RuntimeError`` saying how to get one."""
    named = os.environ.get(CLI_ENV)
    candidates = [named] if named else [str(Path(sys.executable).with_name("optimum-cli")), shutil.which("optimum-cli")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError(
        f"no optimum-cli found ({CLI_ENV}={named!r}): make a venv with optimum-intel (pip install -c <(echo "
        "torch==2.13.0) 'optimum-intel[openvino]'; pip uninstall torchvision) and set "
        f"{CLI_ENV}=<venv>/bin/optimum-cli, as .ci/openvino does."
    )


def model_dir(model: object) -> Path:
    """The OpenVINO IR folder of a ``CheckpointModel``, converted if missing (module docstring)."""
    source = checkpoint_source(model, "the OpenVINO adapter")
    final = source.parent / "openvino" / f"{source.name}.ov{openvino_genai_version()}.v{EXPORT_VERSION}"
    if (final / "openvino_model.xml").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    command = [optimum_cli(), "export", "openvino", "--model", str(source), "--task", "text-generation-with-past"]
    command += ["--weight-format", "fp32", str(tmp)]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not (tmp / "openvino_model.xml").is_file():
            raise RuntimeError(
                f"optimum-cli could not convert {str(source)!r} (exit {done.returncode}): {done.stderr[-2000:]}\n"
                f"Reproduce: {' '.join(command)}"
            )
        try:
            os.replace(tmp, final)
        except OSError:  # another process published it first
            if not (final / "openvino_model.xml").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
