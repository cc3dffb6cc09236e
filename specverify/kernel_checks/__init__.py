"""The checks a team runs against its own verification kernel: is it exact?

Any kernel with the signature of ``specverify.kernels.chain_rejection_sample`` (or wrapped into it by an adapter) can
be checked here. Token for token: ``check_chain_conformance`` / ``assert_chain_conformance`` (kernel == torch twin
given the same uniforms, draws within a rounding band of a CDF boundary exempt), ``chain_rule_reference`` (the rule
one request at a time) and the categorical counterparts. Per-round law: ``exact_round_law`` of a ``RoundCase`` by
enumeration, ``grid_round_law`` / ``check_grid_law`` (deterministic uniform grid, cannot flake) and
``round_law_test`` (statistical, for kernels that draw their own randomness; ``drawing_own_uniforms`` makes its
calibration control). The grid and conformance checks refuse a sampler that draws its own randomness or ignores the
uniforms (``InvalidArgument`` naming ``round_law_test``). Engine signatures: ``from_vllm_style`` /
``from_flashinfer_style`` and back (``as_vllm_style`` / ``as_flashinfer_style``), with ``check_kernel_law`` picking
the fitting law check; vLLM 0.32's real sampler through ``from_vllm_rejection_sample`` (``rejection_sample``) and
``from_vllm_rejection_sampler`` (``RejectionSampler.forward``, with ``truncated_case`` for top-k/top-p), and its
acceptance kernel on explicit uniforms (grid-checkable) through ``from_vllm_acceptance``.
``MUTANTS``: deliberately broken twins every check must catch. Hypothesis strategies for kernel inputs live in
``specverify.kernel_checks.strategies`` (imports hypothesis; not re-exported here).

Everything is re-exported lazily: importing this package imports neither torch nor triton.
"""

from __future__ import annotations

from specverify._lazy import lazy_exports

_LAZY = {
    # token-for-token conformance
    "ConformanceReport": "specverify.kernel_checks.conformance",
    "chain_rule_reference": "specverify.kernel_checks.conformance",
    "check_chain_conformance": "specverify.kernel_checks.conformance",
    "assert_chain_conformance": "specverify.kernel_checks.conformance",
    "check_categorical_conformance": "specverify.kernel_checks.conformance",
    "assert_categorical_conformance": "specverify.kernel_checks.conformance",
    "chain_near_boundary": "specverify.kernel_checks.conformance",
    "categorical_near_boundary": "specverify.kernel_checks.conformance",
    # per-round law
    "RoundCase": "specverify.kernel_checks.law",
    "RoundLaw": "specverify.kernel_checks.law",
    "exact_round_law": "specverify.kernel_checks.law",
    "GridLawResult": "specverify.kernel_checks.lawcheck",
    "RoundLawTestResult": "specverify.kernel_checks.lawcheck",
    "grid_round_law": "specverify.kernel_checks.lawcheck",
    "check_grid_law": "specverify.kernel_checks.lawcheck",
    "sampled_round_law": "specverify.kernel_checks.lawcheck",
    "round_law_test": "specverify.kernel_checks.lawcheck",
    # engine signatures
    "from_vllm_style": "specverify.kernel_checks.vllm_sampler",
    "from_flashinfer_style": "specverify.kernel_checks.adapters",
    "as_vllm_style": "specverify.kernel_checks.vllm_sampler",
    "as_flashinfer_style": "specverify.kernel_checks.adapters",
    "check_kernel_law": "specverify.kernel_checks.adapters",
    "from_vllm_acceptance": "specverify.kernel_checks.vllm_acceptance",
    "from_vllm_rejection_sample": "specverify.kernel_checks.vllm_sampler",
    "from_vllm_rejection_sampler": "specverify.kernel_checks.vllm_sampler",
    "truncated_case": "specverify.kernel_checks.vllm_sampler",
    # samplers that draw their own randomness
    "drawing_own_uniforms": "specverify.kernel_checks.randomness",
    # deliberately broken twins
    "MUTANTS": "specverify.kernel_checks.mutants",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
