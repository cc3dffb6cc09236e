"""Adapters between the chain-sampler signature used here and the two public kernel signatures.

vLLM style (the real signature of ``vllm.v1.sample.rejection_sampler.rejection_sample``, vLLM 0.32)::

    fn(draft_token_ids [N], num_draft_tokens list[int], max_spec_len int, cu_num_draft_tokens [B] (inclusive
       cumsum), draft_probs [N, V], target_logits [N, V], bonus_token_ids [B, 1], sampling_metadata)
       -> output_token_ids [B, max_spec_len + 1]

    Drafts are flattened request after request; the target *logits* (processed: the function applies softmax) are
    those of the draft positions only; the bonus token is sampled outside and passed in; -1 pads the output.
    ``from_vllm_style`` / ``as_vllm_style`` live in ``vllm_sampler`` with the adapters of vLLM's real entry points
    (``from_vllm_rejection_sample``, ``from_vllm_rejection_sampler``); the helpers they share are here.

FlashInfer style (``flashinfer.sampling.chain_speculative_sampling``, generator/seed left to a closure)::

    fn(draft_probs [B, n, V], draft_token_ids [B, n], target_probs [B, n+1, V]) -> output_token_ids [B, n+1]

    One draft length n for the whole batch; randomness drawn inside the kernel; -1 pads the output (a tuple return
    is accepted, its first element being the tokens).

``from_vllm_style`` / ``from_flashinfer_style`` wrap an engine's kernel into a sampler with the signature of
``chain_rejection_sample``, flagged ``consumes_uniforms = False``: such kernels draw their own randomness, so they are
checked with the statistical per-round law test (``check_kernel_law`` dispatches; the grid and conformance checks
refuse them). ``as_vllm_style`` /
``as_flashinfer_style`` go the other way: any sampler here becomes a kernel of that signature drawing its uniforms
from a ``torch.Generator`` (u_accept [B, G] first, then u_recover [B, G+1], both ``torch.rand``), which makes the
reference (and the mutants) available in the engines' shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specverify.errors import check
from specverify.kernel_checks.law import RoundCase
from specverify.kernel_checks.lawcheck import GridLawResult, RoundLawTestResult, Sampler, check_grid_law, round_law_test
from specverify.kernels.layout import PAD_TOKEN_ID, ChainResult, check_chain_args, compute_dtype
from specverify.kernels.ops import categorical_sample

__all__ = ["from_flashinfer_style", "as_flashinfer_style", "check_kernel_law"]


def _from_padded_output(output, num_draft_tokens, gamma) -> ChainResult:  # engine output [B, <=G+1] -> ChainResult
    output = output[0] if isinstance(output, (tuple, list)) else output
    batch = num_draft_tokens.shape[0]
    tokens = torch.full((batch, gamma + 1), PAD_TOKEN_ID, dtype=torch.int64, device=output.device)
    tokens[:, : output.shape[1]] = output.long()
    tokens = torch.where(tokens < 0, PAD_TOKEN_ID, tokens)
    emitted = (tokens != PAD_TOKEN_ID).long().cumprod(-1).sum(-1)  # leading non-pad tokens
    accepted = (emitted - 1).clamp_min(0)
    return ChainResult(tokens, accepted.to(torch.int32), torch.zeros(batch, dtype=torch.int32, device=tokens.device))


def _bonus_tokens(n, target_probs, u_recover):  # [B] -> [B, 1] int64: the bonus draw at row n_r with u_recover[r, n_r]
    rows = torch.arange(n.shape[0], device=n.device)
    result = categorical_sample(target_probs[rows, n].contiguous(), u_recover[rows, n].contiguous())
    return result.tokens[:, None]


def _check_callable(name: str, value, signature: str) -> None:
    check(
        callable(value),
        f"{name}={value!r} is not callable; pass a function with the {signature} signature (module docstring).",
    )


def _check_generator(generator) -> None:
    check(
        isinstance(generator, torch.Generator),
        f"generator={generator!r} must be a torch.Generator; pass torch.Generator().manual_seed(seed).",
    )


def from_flashinfer_style(fn: Callable) -> Sampler:
    """A sampler around a FlashInfer-style kernel ``fn``; ragged batches run one call per draft length.

    Requests with no drafts are a plain target draw (``categorical_sample`` with ``u_recover[r, 0]``), as an engine
    would run them outside the speculative kernel. ``status`` is always 0 (no error flags in the signature).
    """
    _check_callable("fn", fn, "FlashInfer-style chain_speculative_sampling")

    def sampler(
        draft_token_ids: torch.Tensor,
        num_draft_tokens: torch.Tensor,
        draft_probs: torch.Tensor,
        target_probs: torch.Tensor,
        u_accept: torch.Tensor,
        u_recover: torch.Tensor,
    ) -> ChainResult:
        batch, gamma, _ = check_chain_args(
            draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
        )
        n = num_draft_tokens.long()
        tokens = torch.full((batch, gamma + 1), PAD_TOKEN_ID, dtype=torch.int64, device=n.device)
        for length in torch.unique(n).tolist():
            rows = torch.nonzero(n == length).flatten()
            if length == 0:
                tokens[rows, 0] = _bonus_tokens(n[rows], target_probs[rows], u_recover[rows])[:, 0]
                continue
            output = fn(
                draft_probs[rows, :length].contiguous(),
                draft_token_ids[rows, :length].contiguous(),
                target_probs[rows, : length + 1].contiguous(),
            )
            output = output[0] if isinstance(output, (tuple, list)) else output
            tokens[rows, : length + 1] = output.long()
        return _from_padded_output(tokens, n, gamma)

    sampler.consumes_uniforms = False
    return sampler


def _draw_uniforms(batch, gamma, dtype, device, generator):
    acc = compute_dtype(dtype)
    u_accept = torch.rand((batch, gamma), generator=generator, dtype=acc, device=device)
    return u_accept, torch.rand((batch, gamma + 1), generator=generator, dtype=acc, device=device)


def as_flashinfer_style(sampler: Sampler, *, generator: torch.Generator) -> Callable:
    """``sampler`` as a FlashInfer-style kernel drawing its uniforms from ``generator`` (module docstring).

    Examples
    --------
    >>> from specverify.kernels import chain_rejection_sample_torch
    >>> kernel = as_flashinfer_style(chain_rejection_sample_torch, generator=torch.Generator().manual_seed(0))
    >>> draft_probs = torch.tensor([[[1.0, 0.0]]]); target_probs = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> kernel(draft_probs, torch.tensor([[0]]), target_probs).tolist()  # draft 0 accepted, then the bonus 1
    [[0, 1]]
    """
    _check_callable("sampler", sampler, "chain_rejection_sample")
    _check_generator(generator)

    def fn(draft_probs: torch.Tensor, draft_token_ids: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
        batch, length = draft_token_ids.shape
        n = torch.full((batch,), length, dtype=torch.long, device=draft_token_ids.device)
        uniforms = _draw_uniforms(batch, length, draft_probs.dtype, n.device, generator)
        return sampler(draft_token_ids, n, draft_probs, target_probs, *uniforms).tokens.to(torch.int32)

    return fn


def check_kernel_law(
    sampler: Sampler, case: RoundCase, *, grid_size: int = 64, num_samples: int = 20_000, seed: int = 0, **kwargs
) -> GridLawResult | RoundLawTestResult:
    """The per-round law check that fits ``sampler``: the deterministic grid (``check_grid_law``) when it consumes
    the explicit uniforms, else the statistical test (``round_law_test``), as flagged by its ``consumes_uniforms``
    attribute (default True). ``kwargs`` (``pad_to``, ``device``, ``chunk``) go to the check."""
    if getattr(sampler, "consumes_uniforms", True):
        return check_grid_law(sampler, case, grid_size=grid_size, **kwargs)
    return round_law_test(sampler, case, num_samples=num_samples, seed=seed, **kwargs)
