"""Verification kernels (triton, with pure-torch twins) and the helpers that check any kernel against exact semantics.

Kernels: ``chain_rejection_sample`` (one chain verification round, ragged batch, explicit uniforms) and
``categorical_sample`` (batched inverse-CDF draws); input layout, rule and uniform consumption are documented in
``specverify.kernels.layout``. Conformance: ``check_chain_conformance`` (kernel == twin token for token),
``grid_round_law`` / ``check_grid_law`` (exact per-round law on a deterministic uniform grid),
``round_law_test`` (statistical per-round law for kernels that draw their own randomness), adapters for vLLM- and
FlashInfer-style signatures, and ``MUTANTS`` (deliberately broken twins the checks must catch). Hypothesis
strategies for kernel inputs live in ``specverify.kernels.strategies`` (imports hypothesis).

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
    "ChainInputs": "specverify.kernels.layout",
    # kernels and twins
    "chain_rejection_sample": "specverify.kernels.ops",
    "categorical_sample": "specverify.kernels.ops",
    "keyed_chain_uniforms": "specverify.kernels.ops",
    "chain_rejection_sample_torch": "specverify.kernels.twins",
    "categorical_sample_torch": "specverify.kernels.twins",
    # token-for-token conformance
    "ConformanceReport": "specverify.kernels.conformance",
    "chain_rule_reference": "specverify.kernels.conformance",
    "check_chain_conformance": "specverify.kernels.conformance",
    "assert_chain_conformance": "specverify.kernels.conformance",
    "check_categorical_conformance": "specverify.kernels.conformance",
    "assert_categorical_conformance": "specverify.kernels.conformance",
    "chain_near_boundary": "specverify.kernels.conformance",
    "categorical_near_boundary": "specverify.kernels.conformance",
    # per-round law
    "RoundCase": "specverify.kernels.law",
    "RoundLaw": "specverify.kernels.law",
    "exact_round_law": "specverify.kernels.law",
    "GridLawResult": "specverify.kernels.lawcheck",
    "RoundLawTestResult": "specverify.kernels.lawcheck",
    "grid_round_law": "specverify.kernels.lawcheck",
    "check_grid_law": "specverify.kernels.lawcheck",
    "sampled_round_law": "specverify.kernels.lawcheck",
    "round_law_test": "specverify.kernels.lawcheck",
    # engine signatures
    "from_vllm_style": "specverify.kernels.adapters",
    "from_flashinfer_style": "specverify.kernels.adapters",
    "as_vllm_style": "specverify.kernels.adapters",
    "as_flashinfer_style": "specverify.kernels.adapters",
    "check_kernel_law": "specverify.kernels.adapters",
    # deliberately broken twins
    "MUTANTS": "specverify.kernels.mutants",
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
