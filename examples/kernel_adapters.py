"""Check verification kernels of the two public signatures against the exact per-round law.

Run: ``python examples/kernel_adapters.py`` (CPU is fine; with ``TRITON_INTERPRET=1`` the triton kernel runs in the
interpreter, with CUDA it runs compiled).

An engine wraps its kernel in a function of vLLM 0.32's ``rejection_sample`` signature (target logits and a
``SamplingMetadata``; the bonus token drawn outside) or of the FlashInfer signature (closing over its generator), hands
it to ``from_vllm_style`` / ``from_flashinfer_style``, and runs ``check_kernel_law`` on a few ``RoundCase``s (all from
``specverify.kernel_checks``). vLLM itself is checked through ``from_vllm_rejection_sample`` and
``from_vllm_rejection_sampler`` (``RejectionSampler.forward``). Kernels that draw their own randomness get the
statistical per-round law test (``round_law_test``); kernels that take explicit uniforms get the deterministic grid and,
better still, token-for-token conformance with the twin.
Here the "engine kernels" are the reference and deliberately broken twins dressed in those signatures.
"""

from __future__ import annotations

import os

import torch

from specverify.kernel_checks import (
    MUTANTS,
    RoundCase,
    as_flashinfer_style,
    as_vllm_style,
    check_kernel_law,
    from_flashinfer_style,
    from_vllm_style,
)
from specverify.kernels import chain_rejection_sample, chain_rejection_sample_torch

# residuals with several tokens (so a reused uniform shows), rows that differ by position (so a row offset shows)
CASES = [
    RoundCase([[0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]], [[0.1, 0.1, 0.4, 0.4]], name="gamma1"),
    RoundCase(
        [[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]],
        [[0.1, 0.1, 0.4, 0.4], [0.4, 0.4, 0.1, 0.1]],
        name="gamma2",
    ),
    RoundCase([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[0.3, 0.3, 0.4]], name="zero_target_draft"),
]


def report(title: str, sampler, **kwargs) -> None:
    print(f"== {title}")
    for case in CASES:
        result = check_kernel_law(sampler, case, **kwargs)
        passed = result.pvalue > 1e-6 if hasattr(result, "pvalue") else result.passed
        verdict = "PASS" if passed else "FAIL"
        print(f"  [{verdict}] case {case.name}: " + result.summary().replace("\n", "\n      "))


def flashinfer_kernel(sampler, seed: int):
    """What a team passes in: its kernel in the FlashInfer signature (here: a sampler drawing from a generator)."""
    return as_flashinfer_style(sampler, generator=torch.Generator().manual_seed(seed))


def vllm_kernel(sampler, seed: int):
    return as_vllm_style(sampler, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    print("Self-randomising kernels -> statistical per-round law test (N = 20000 rounds per case)\n")
    report("FlashInfer-style reference", from_flashinfer_style(flashinfer_kernel(chain_rejection_sample_torch, 0)))
    report(
        "FlashInfer-style with FlashInfer #424 (accept uniform reused for the residual draw)",
        from_flashinfer_style(flashinfer_kernel(MUTANTS["shared_uniform"], 0)),
    )
    report("vLLM-style reference", from_vllm_style(vllm_kernel(chain_rejection_sample_torch, 1)))
    report(
        "vLLM-style that resamples the target instead of the residual",
        from_vllm_style(vllm_kernel(MUTANTS["target_not_residual"], 1)),
    )

    print("\nExplicit-uniform kernels -> deterministic grid (cannot flake; probability-0 outcomes fail outright)\n")
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if torch.cuda.is_available() or interpret:
        device = "cuda" if torch.cuda.is_available() and not interpret else "cpu"

        def kernel(*inputs):
            return chain_rejection_sample(*(t.to(device) for t in inputs), backend="triton")

        report(f"triton kernel ({'interpreter' if device == 'cpu' else 'CUDA'})", kernel, grid_size=16)
    else:
        print("(no CUDA and TRITON_INTERPRET unset: showing the torch twin instead of the triton kernel)")
        report("torch twin", chain_rejection_sample_torch, grid_size=32)
    report(
        "SGLang #35771 (inclusive u <= p/q accepts a zero-probability draft at u = 0)",
        MUTANTS["inclusive_accept"],
        grid_size=32,
    )
    print("\nThe last one is invisible to sampling (u = 0 has probability 0): only the grid sees it.")


if __name__ == "__main__":
    main()
