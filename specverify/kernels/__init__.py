"""Verification kernels (triton, with pure-torch twins) and the helpers that check any kernel against exact semantics.

Kernels: ``chain_rejection_sample`` (one chain verification round, ragged batch, explicit uniforms) and
``categorical_sample`` (batched inverse-CDF draws); input layout, rule and uniform consumption are documented in
``specverify.kernels.layout``. Conformance: ``check_chain_conformance`` (kernel == twin token for token),
``grid_round_law`` / ``check_grid_law`` (exact per-round law on a deterministic uniform grid),
``round_law_test`` (statistical per-round law for kernels that draw their own randomness), adapters for vLLM- and
FlashInfer-style signatures, and ``mutants`` (deliberately broken twins the checks must catch).

Everything is re-exported lazily: importing this package imports neither torch nor triton; triton is imported on the
first triton launch only.
"""

from __future__ import annotations

import importlib

_LAZY = {
    # layout
    "PAD_TOKEN_ID": "specverify.kernels.layout",
    "STATUS_OK": "specverify.kernels.layout",
    "STATUS_INVALID_PROBS": "specverify.kernels.layout",
    "STATUS_NO_TOKEN": "specverify.kernels.layout",
    "STATUS_BAD_DRAFT_TOKEN": "specverify.kernels.layout",
    "STATUS_BAD_LENGTH": "specverify.kernels.layout",
    "ERROR_MASK": "specverify.kernels.layout",
    "ChainResult": "specverify.kernels.layout",
    "CategoricalResult": "specverify.kernels.layout",
    "describe_status": "specverify.kernels.layout",
    # kernels and twins
    "chain_rejection_sample": "specverify.kernels.ops",
    "categorical_sample": "specverify.kernels.ops",
    "chain_rejection_sample_torch": "specverify.kernels.twins",
    "categorical_sample_torch": "specverify.kernels.twins",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'specverify.kernels' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
