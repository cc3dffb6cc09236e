"""The checkpoint directory behind a model an adapter converts (GGUF, OpenVINO IR, ONNX Runtime GenAI folders are
all cached beside it), checked once for every converting adapter."""

from __future__ import annotations

from pathlib import Path

from specverify.errors import InvalidArgument, check

__all__ = ["checkpoint_source"]


def checkpoint_source(model: object, adapter: str) -> Path:
    """The checkpoint directory of ``model`` (anything with ``.path`` to a directory holding ``config.json``);
    ``InvalidArgument`` naming ``adapter`` for a model without one (a toy model: the adapter needs the checkpoint
    family).

    >>> checkpoint_source(object(), "the X adapter")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    specverify.errors.InvalidArgument: model=<object object at ...> has no .path: the X adapter converts ...
    """
    path = getattr(model, "path", None)
    if path is None:
        raise InvalidArgument(
            f"model={model!r} has no .path: {adapter} converts checkpoints, so it needs CheckpointModel s "
            "(CheckpointPairSpec(...).build(), or certify(..., models='checkpoint'))."
        )
    source = Path(path)
    check((source / "config.json").is_file(), f"path={str(source)!r} must be a checkpoint directory.")
    return source
