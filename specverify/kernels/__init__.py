"""Verification kernels: triton kernels, their pure-torch twins, and the input layout they share.

Kernels: ``chain_rejection_sample`` (one chain verification round, ragged batch, explicit uniforms) and
``categorical_sample`` (batched inverse-CDF draws), each with a torch twin (``chain_rejection_sample_torch``,
``categorical_sample_torch``) and ``keyed_chain_uniforms`` (their uniforms from the keyed RNG). Input layout, rule,
uniform consumption, output types and status bits are documented in ``specverify.kernels.layout``.

The checks a team runs against its own kernel (token-for-token conformance, the exact per-round law, adapters for
engine signatures, deliberately broken twins) live in ``specverify.kernel_checks``; this package never imports it.

Everything is re-exported lazily: importing this package imports neither torch nor triton; triton is imported on the
first triton launch only.
"""

from __future__ import annotations

from specverify._lazy import lazy_exports

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
    "ChainInputs": "specverify.kernels.layout",
    # kernels and twins
    "chain_rejection_sample": "specverify.kernels.ops",
    "categorical_sample": "specverify.kernels.ops",
    "keyed_chain_uniforms": "specverify.kernels.ops",
    "chain_rejection_sample_torch": "specverify.kernels.twins",
    "categorical_sample_torch": "specverify.kernels.twins",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
