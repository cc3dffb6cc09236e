"""Pure-torch twins of the kernels, built from ``specverify.sampling`` with the kernels' uniform consumption.

Each twin takes the same arguments and returns the same result type as its kernel (layout: ``kernels.layout``).
They run anywhere torch runs, accept non-contiguous inputs, and are what the kernels are checked against.
"""

from __future__ import annotations

import torch

from specverify.kernels.layout import (
    PAD_TOKEN_ID,
    STATUS_BAD_DRAFT_TOKEN,
    STATUS_BAD_LENGTH,
    STATUS_INVALID_PROBS,
    STATUS_NO_TOKEN,
    CategoricalResult,
    ChainResult,
    check_categorical_args,
    check_chain_args,
    compute_dtype,
)
from specverify.sampling import residual_probs, sample_from_uniforms

__all__ = ["chain_rejection_sample_torch", "categorical_sample_torch", "invalid_rows"]


def invalid_rows(probs: torch.Tensor) -> torch.Tensor:  # [..., V] -> bool [...]
    """Rows holding NaN, ±inf or a negative entry (aminmax propagates NaN, and needs no [..., V] temporaries)."""
    low, high = torch.aminmax(probs, dim=-1)
    return ~((low >= 0) & (high < float("inf")))


def _owned_invalid(probs, owned):  # [B, K, V], bool [B, K] -> bool [B]
    # one position at a time keeps the temporaries at [B, V] for large vocabularies
    bad = torch.zeros(probs.shape[0], dtype=torch.bool, device=probs.device)
    for k in range(probs.shape[1]):
        bad |= owned[:, k] & invalid_rows(probs[:, k])
    return bad


def _invalid_owned_rows(draft_probs, target_probs, n, bad_length):  # -> bool [B]
    # a request owns target rows 0..n and draft rows 0..n-1; one with a bad length owns nothing
    positions = torch.arange(target_probs.shape[1], device=n.device)[None]
    reads = ~bad_length[:, None]
    return _owned_invalid(target_probs, reads & (positions <= n[:, None])) | _owned_invalid(
        draft_probs, reads[:, :1] & (positions[:, :-1] < n[:, None])
    )


def _lengths(num_draft_tokens, gamma):  # [B] -> [B] int64 (0 where bad), bool [B]
    n = num_draft_tokens.long()
    bad = (n < 0) | (n > gamma)
    return torch.where(bad, torch.zeros_like(n), n), bad


def _first_rejection(draft_token_ids, n, draft_probs, target_probs, u_accept, vocab, *, inclusive=False):
    # -> final [B] (first rejected position, else n), bad_token [B]; inclusive=True is a bug kept for the mutants
    gamma = draft_token_ids.shape[1]
    acc = compute_dtype(target_probs.dtype)
    owned = torch.arange(gamma, device=n.device)[None] < n[:, None]  # [B, G]
    ids = draft_token_ids.long()
    bad_id = owned & ((ids < 0) | (ids >= vocab))
    safe = torch.where(owned & ~bad_id, ids, torch.zeros_like(ids))[..., None]  # [B, G, 1]
    target_prob = target_probs[:, :gamma].gather(-1, safe).squeeze(-1).to(acc)  # [B, G]: the draft tokens'
    draft_prob = draft_probs.gather(-1, safe).squeeze(-1).to(acc)  # [B, G]
    scaled = u_accept.to(acc) * draft_prob
    accept = (draft_prob > 0) & ((scaled <= target_prob) if inclusive else (scaled < target_prob))
    rejected = owned & ~accept
    final = torch.where(rejected.any(-1), rejected.to(torch.int8).argmax(-1), n)  # first rejection, else n
    return final, bad_id.any(-1)


def _final_draw(final, n, draft_probs, target_probs, u_recover):  # -> token [B] int64 (-1: no positive mass)
    acc = compute_dtype(target_probs.dtype)
    rows = torch.arange(final.shape[0], device=final.device)
    target_row = target_probs[rows, final].to(acc)  # [B, V]
    draft_row = draft_probs[rows, final.clamp_max(draft_probs.shape[1] - 1)].to(acc)  # [B, V]
    rejected = final < n
    probs = target_row  # [B, V]; the residual only where a draft was rejected (rows are independent)
    probs[rejected] = residual_probs(target_row[rejected], draft_row[rejected])
    uniform = u_recover.to(acc).gather(-1, final[:, None]).squeeze(-1)  # [B]
    return sample_from_uniforms(probs, uniform)


def _assemble(draft_token_ids, final, token, status_bits):  # -> ChainResult
    batch, gamma = draft_token_ids.shape
    error = (status_bits & (STATUS_INVALID_PROBS | STATUS_BAD_DRAFT_TOKEN | STATUS_BAD_LENGTH)) != 0
    no_token = ~error & (token < 0)
    status = status_bits | torch.where(no_token, STATUS_NO_TOKEN, 0)
    pad = torch.full((batch, 1), PAD_TOKEN_ID, dtype=torch.long, device=final.device)
    ids = torch.cat([draft_token_ids.long(), pad], dim=1)  # [B, G+1]
    pos = torch.arange(gamma + 1, device=final.device)[None]
    last = torch.where(token < 0, PAD_TOKEN_ID, token)[:, None]
    tokens = torch.where(pos < final[:, None], ids, torch.where(pos == final[:, None], last, pad))
    tokens = torch.where(error[:, None], pad, tokens)
    num_accepted = torch.where(error, torch.zeros_like(final), final)
    return ChainResult(tokens, num_accepted.to(torch.int32), status.to(torch.int32))


def chain_rejection_sample_torch(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_recover: torch.Tensor,
) -> ChainResult:
    """One chain verification round for a ragged batch; the torch twin of the triton kernel.

    Parameters and the rule are documented in ``specverify.kernels.layout``: strict acceptance
    ``u_accept * draft_prob < target_prob`` with ``draft_prob > 0`` (the draft token's probabilities), the recovered
    token from ``sampling.residual_probs`` with ``u_recover`` at the first rejection, the bonus token from the target
    row at n_r, both by ``sampling.sample_from_uniforms``.

    Returns
    -------
    ChainResult
        ``tokens`` [B, G+1] int64 (PAD_TOKEN_ID-padded), ``num_accepted`` [B] int32, ``status`` [B] int32.

    Examples
    --------
    >>> import torch
    >>> target_probs = torch.tensor([[[0.5, 0.5], [0.0, 1.0]]]); draft_probs = torch.tensor([[[1.0, 0.0]]])
    >>> out = chain_rejection_sample_torch(torch.tensor([[0]]), torch.tensor([1]), draft_probs, target_probs,
    ...                                    torch.tensor([[0.25]]), torch.tensor([[0.0, 0.0]]))
    >>> out.tokens.tolist(), out.num_accepted.tolist(), out.status.tolist()
    ([[0, 1]], [1], [0])
    """
    batch, gamma, vocab = check_chain_args(
        draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
    )
    n, bad_length = _lengths(num_draft_tokens, gamma)
    invalid = _invalid_owned_rows(draft_probs, target_probs, n, bad_length)
    final, bad_token = _first_rejection(draft_token_ids, n, draft_probs, target_probs, u_accept, vocab)
    token = _final_draw(final, n, draft_probs, target_probs, u_recover)
    bits = (
        torch.where(invalid, STATUS_INVALID_PROBS, 0)
        | torch.where(bad_token, STATUS_BAD_DRAFT_TOKEN, 0)
        | torch.where(bad_length, STATUS_BAD_LENGTH, 0)
    )
    return _assemble(draft_token_ids, final, token, bits)


def categorical_sample_torch(probs: torch.Tensor, uniforms: torch.Tensor) -> CategoricalResult:
    """Batched inverse-CDF draw, one uniform per row; the torch twin of the triton categorical kernel.

    ``probs`` [B, V] (float16/bfloat16/float32/float64, rows need not sum to 1), ``uniforms`` [B]. Row r returns
    ``sampling.sample_from_uniforms(probs[r], uniforms[r])``; rows without positive mass return PAD_TOKEN_ID with
    STATUS_NO_TOKEN, rows with NaN, ±inf or negative entries return PAD_TOKEN_ID with STATUS_INVALID_PROBS.

    Examples
    --------
    >>> import torch
    >>> categorical_sample_torch(torch.tensor([[0.0, 0.3, 0.7], [0.0, 0.0, 0.0]]), torch.tensor([0.5, 0.5])).tokens
    tensor([ 2, -1])
    """
    check_categorical_args(probs, uniforms)
    acc = compute_dtype(probs.dtype)
    invalid = invalid_rows(probs)
    token = sample_from_uniforms(probs.to(acc), uniforms.to(acc))
    no_token = ~invalid & (token < 0)
    token = torch.where(invalid | no_token, PAD_TOKEN_ID, token)
    status = torch.where(invalid, STATUS_INVALID_PROBS, 0) | torch.where(no_token, STATUS_NO_TOKEN, 0)
    return CategoricalResult(token, status.to(torch.int32))
