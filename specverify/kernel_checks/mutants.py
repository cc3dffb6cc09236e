"""Deliberately broken twins: each reproduces one verification-kernel bug mechanism from docs/bugs.md.

They share the correct twin's signature, so any check that takes a sampler can be shown to catch them (test the
tester). ``MUTANTS`` maps a name to the broken sampler; ``MUTANT_BUGS`` to the mechanism it reproduces.

Examples
--------
>>> sorted(MUTANTS)[:3], MUTANT_BUGS["inclusive_accept"]
(['inclusive_accept', 'nan_rows_unflagged', 'row_offset'], 'SGLang #35771')
"""

from __future__ import annotations

import torch

from specverify.kernels.layout import (
    STATUS_BAD_DRAFT_TOKEN,
    STATUS_BAD_LENGTH,
    STATUS_INVALID_PROBS,
    ChainResult,
    check_chain_args,
    compute_dtype,
)
from specverify.kernels.twins import _assemble, _first_rejection, _invalid_owned_rows, _lengths
from specverify.sampling import residual_probs, sample_from_uniforms

__all__ = ["MUTANTS", "MUTANT_BUGS"]


def _gathered(final, n, draft_probs, target_probs):  # -> target row, draft row [B, V] at position final
    acc = compute_dtype(target_probs.dtype)
    rows = torch.arange(final.shape[0], device=final.device)
    draft_row = draft_probs[rows, final.clamp_max(draft_probs.shape[1] - 1)].to(acc)
    return target_probs[rows, final].to(acc), draft_row


def _round(
    inputs, *, inclusive=False, final_probs=None, final_uniform=None, sampler=sample_from_uniforms, flag_invalid=True
) -> ChainResult:
    """The correct twin with one stage swapped out (each keyword replaces one stage)."""
    draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover = inputs
    gamma = check_chain_args(*inputs)[1]
    n, bad_length = _lengths(num_draft_tokens, gamma)
    invalid = _invalid_owned_rows(draft_probs, target_probs, n, bad_length)
    if not flag_invalid:
        invalid = torch.zeros_like(invalid)
    final, bad_token = _first_rejection(
        draft_token_ids, n, draft_probs, target_probs, u_accept, target_probs.shape[2], inclusive=inclusive
    )
    target_row, draft_row = _gathered(final, n, draft_probs, target_probs)
    rejected = (final < n)[:, None]
    probs = torch.where(rejected, residual_probs(target_row, draft_row), target_row)
    if final_probs is not None:
        probs = final_probs(final, n, draft_probs, target_probs)
    acc = compute_dtype(target_probs.dtype)
    uniform = u_recover.to(acc).gather(-1, final[:, None]).squeeze(-1)
    if final_uniform is not None:
        uniform = final_uniform(final, n, u_accept.to(acc), uniform)
    token = sampler(probs, uniform)
    bits = (
        torch.where(invalid, STATUS_INVALID_PROBS, 0)
        | torch.where(bad_token, STATUS_BAD_DRAFT_TOKEN, 0)
        | torch.where(bad_length, STATUS_BAD_LENGTH, 0)
    )
    return _assemble(draft_token_ids, final, token, bits)


def row_offset(*inputs: torch.Tensor) -> ChainResult:
    """FlashInfer #425: the residual and the bonus read the position-0 rows (missing ``+pos`` offset)."""

    def first_rows(final, n, draft_probs, target_probs):
        target_row, draft_row = _gathered(torch.zeros_like(final), n, draft_probs, target_probs)
        return torch.where((final < n)[:, None], residual_probs(target_row, draft_row), target_row)

    return _round(inputs, final_probs=first_rows)


def shared_uniform(*inputs: torch.Tensor) -> ChainResult:
    """FlashInfer #424: after a rejection at k the residual draw reuses ``u_accept[r, k]``."""

    def reuse(final, n, u_accept, uniform):
        reused = u_accept.gather(-1, final.clamp_max(u_accept.shape[1] - 1)[:, None]).squeeze(-1)
        return torch.where(final < n, reused, uniform)

    return _round(inputs, final_uniform=reuse)


def inclusive_accept(*inputs: torch.Tensor) -> ChainResult:
    """SGLang #35771: ``u <= target_prob / draft_prob`` accepts a draft of target probability 0 when u == 0."""
    return _round(inputs, inclusive=True)


def _last_index_fallback(probs, uniform):  # [B, V], [B] -> [B]
    # assumes normalised rows and falls back to the last index when rounding leaves u past the CDF
    cdf = torch.cumsum(probs / probs.sum(-1, keepdim=True), -1)
    index = (cdf <= uniform[:, None]).sum(-1)
    return torch.where(probs.sum(-1) > 0, index.clamp_max(probs.shape[-1] - 1), torch.full_like(index, -1))


def zero_prob_fallback(*inputs: torch.Tensor) -> ChainResult:
    """SGLang #22643: a coin near 1 falls past the CDF and the fallback emits the last index, of probability 0."""
    return _round(inputs, sampler=_last_index_fallback)


def nan_rows_unflagged(*inputs: torch.Tensor) -> ChainResult:
    """vLLM #21876: NaN target rows are not detected, and the round emits tokens anyway."""
    return _round(inputs, flag_invalid=False)


def target_not_residual(*inputs: torch.Tensor) -> ChainResult:
    """Seed failure mode: after a rejection the token is resampled from the target row, not the residual."""

    def target_rows(final, n, draft_probs, target_probs):
        return _gathered(final, n, draft_probs, target_probs)[0]

    return _round(inputs, final_probs=target_rows)


MUTANTS = {
    f.__name__: f
    for f in (row_offset, shared_uniform, inclusive_accept, zero_prob_fallback, nan_rows_unflagged, target_not_residual)
}
MUTANT_BUGS = {name: f.__doc__.split(":")[0] for name, f in MUTANTS.items()}
