"""Input layout, output types, status bits and argument checks shared by the kernels and their torch twins.

Chain rejection sampling (one verification round for B requests, ragged draft lengths):

=====================  ===================  ==================================================================
argument               shape, dtype         meaning
=====================  ===================  ==================================================================
``draft_token_ids``    [B, G] int32/int64   request r's drafts in ``[r, :n_r]``; ``[r, n_r:]`` is never read
``num_draft_tokens``   [B] int32/int64      n_r with 0 <= n_r <= G (G = γ_max); others set STATUS_BAD_LENGTH
``draft_probs``        [B, G, V] float      row ``[r, k]``: the law draft k was sampled from
``target_probs``       [B, G+1, V] float    row ``[r, k]``: target law at position k; ``[r, n_r]`` is the bonus row
``u_accept``           [B, G] float         ``[r, k]`` decides the acceptance of draft k, and nothing else
``u_recover``          [B, G+1] float       ``[r, f]`` draws the recovered (f < n_r) or bonus (f = n_r) token
=====================  ===================  ==================================================================

Probabilities may be float16, bfloat16, float32 or float64 (target and draft alike); arithmetic runs in float64 for
float64 inputs and float32 otherwise, and the uniforms are rounded to that dtype first. Rows need not sum to 1 (the
inverse CDF scales by the row's mass); they must be finite and non-negative.

Uniform consumption, per request r with n = n_r (each position and purpose has its own uniform):
draft k < n is accepted iff ``draft_probs[r,k,x] > 0 and u_accept[r,k] * draft_probs[r,k,x] < target_probs[r,k,x]``
(x = its token; strict, so u = 0 never accepts a token of target probability 0; a token of draft probability 0 could
not have been proposed and is rejected, which makes its position a plain target draw, docs/design.md). At the first
rejection f the recovered token is drawn from ``sampling.residual_probs(target[r,f], draft[r,f])`` (the target row
when the residual has no positive mass) with ``u_recover[r,f]``; if all n drafts are accepted (f = n) the bonus token
is drawn from ``target_probs[r,n]`` with ``u_recover[r,n]``. Draws use ``sampling.sample_from_uniforms``: the
smallest index i with ``u * mass < cdf[i]``, clamped to the last index of positive probability. ``u_accept[r, k]``
for k > f, ``u_recover[r, k]`` for k != f and every row past n_r are never read.

Outputs: ``tokens`` [B, G+1] int64 holds the f accepted drafts, then the recovered/bonus token, then PAD_TOKEN_ID;
``num_accepted`` [B] int32 is f; ``status`` [B] int32 is a bit set of the STATUS_* flags below. A request with an
error flag (ERROR_MASK) emits no token at all: its row is all PAD_TOKEN_ID and ``num_accepted`` is 0.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from specverify.errors import InvalidArgument, check

__all__ = [
    "PAD_TOKEN_ID",
    "STATUS_OK",
    "STATUS_INVALID_PROBS",
    "STATUS_NO_TOKEN",
    "STATUS_BAD_DRAFT_TOKEN",
    "STATUS_BAD_LENGTH",
    "ERROR_MASK",
    "ChainInputs",
    "ChainResult",
    "CategoricalResult",
    "describe_status",
]

PAD_TOKEN_ID = -1
"""Fills ``tokens`` after the recovered/bonus token, and every slot of a request with an error flag."""

STATUS_OK = 0
STATUS_INVALID_PROBS = 1
"""A row the request owns (target rows 0..n_r, draft rows 0..n_r-1) holds NaN, ±inf or a negative entry. Error."""
STATUS_NO_TOKEN = 2
"""The recovered/bonus row has no positive mass: the accepted drafts stand, no token follows (``no_token``)."""
STATUS_BAD_DRAFT_TOKEN = 4
"""A draft token id of the request lies outside [0, V). Error."""
STATUS_BAD_LENGTH = 8
"""``num_draft_tokens[r]`` lies outside [0, G]; nothing of the request is read. Error."""
ERROR_MASK = STATUS_INVALID_PROBS | STATUS_BAD_DRAFT_TOKEN | STATUS_BAD_LENGTH

_STATUS_NAMES = {
    STATUS_INVALID_PROBS: "invalid_probs",
    STATUS_NO_TOKEN: "no_token",
    STATUS_BAD_DRAFT_TOKEN: "bad_draft_token",
    STATUS_BAD_LENGTH: "bad_length",
}
PROB_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INDEX_DTYPES = (torch.int32, torch.int64)


class ChainInputs(NamedTuple):
    """The six inputs of a chain verification round, in call order: ``kernel(*inputs)``."""

    draft_token_ids: torch.Tensor  # [B, G] int
    num_draft_tokens: torch.Tensor  # [B] int
    draft_probs: torch.Tensor  # [B, G, V]
    target_probs: torch.Tensor  # [B, G+1, V]
    u_accept: torch.Tensor  # [B, G]
    u_recover: torch.Tensor  # [B, G+1]

    def to(self, device: str | torch.device) -> "ChainInputs":
        """All six tensors moved to ``device``."""
        return ChainInputs(*(t.to(device) for t in self))

    def select(self, rows: torch.Tensor | slice) -> "ChainInputs":
        """The sub-batch ``rows`` (an index tensor or slice), contiguous."""
        return ChainInputs(*(t[rows].contiguous() for t in self))


class ChainResult(NamedTuple):
    """Output of one chain verification round (see the module docstring for the layout)."""

    tokens: torch.Tensor  # [B, G+1] int64, PAD_TOKEN_ID after the last committed token
    num_accepted: torch.Tensor  # [B] int32
    status: torch.Tensor  # [B] int32 bit set of STATUS_*


class CategoricalResult(NamedTuple):
    """Output of batched inverse-CDF sampling: ``tokens`` [B] int64 (PAD_TOKEN_ID where no token) and ``status``."""

    tokens: torch.Tensor
    status: torch.Tensor  # [B] int32: STATUS_INVALID_PROBS, STATUS_NO_TOKEN


def describe_status(status: int) -> str:
    """``'ok'`` or the set flags joined by ``'|'``.

    Examples
    --------
    >>> describe_status(STATUS_INVALID_PROBS | STATUS_BAD_DRAFT_TOKEN), describe_status(STATUS_OK)
    ('invalid_probs|bad_draft_token', 'ok')
    """
    names = [name for bit, name in _STATUS_NAMES.items() if int(status) & bit]
    return "|".join(names) if names else "ok"


def compute_dtype(probs_dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 probabilities, float32 for every narrower float dtype."""
    return torch.float64 if probs_dtype == torch.float64 else torch.float32


def _tensor(name: str, value, ndim: int, dtypes, layout: str) -> torch.Tensor:
    check(isinstance(value, torch.Tensor), f"{name}={type(value).__name__} must be a torch.Tensor {layout}.")
    check(value.ndim == ndim, f"{name}.shape={tuple(value.shape)!r} must have rank {ndim}: {layout}.")
    check(
        value.dtype in dtypes,
        f"{name}.dtype={value.dtype} must be one of {[str(d) for d in dtypes]}; convert it with .to(...).",
    )
    return value


def check_chain_args(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_recover: torch.Tensor,
) -> tuple[int, int, int]:
    """Validate shapes, dtypes and devices (never values: those become status flags). Returns (B, G, V)."""
    _tensor("draft_token_ids", draft_token_ids, 2, INDEX_DTYPES, "[B, G]")
    _tensor("num_draft_tokens", num_draft_tokens, 1, INDEX_DTYPES, "[B]")
    _tensor("draft_probs", draft_probs, 3, PROB_DTYPES, "[B, G, V]")
    _tensor("target_probs", target_probs, 3, PROB_DTYPES, "[B, G+1, V]")
    _tensor("u_accept", u_accept, 2, PROB_DTYPES, "[B, G]")
    _tensor("u_recover", u_recover, 2, PROB_DTYPES, "[B, G+1]")
    batch, gamma = draft_token_ids.shape
    vocab = target_probs.shape[2]
    check(
        gamma >= 1 and vocab >= 1,
        f"draft_token_ids.shape={tuple(draft_token_ids.shape)!r}, vocab size {vocab}: "
        "need G >= 1 draft slots and V >= 1 (pass num_draft_tokens=0 for no drafts).",
    )
    expected = {
        "num_draft_tokens": (batch,),
        "draft_probs": (batch, gamma, vocab),
        "target_probs": (batch, gamma + 1, vocab),
        "u_accept": (batch, gamma),
        "u_recover": (batch, gamma + 1),
    }
    given = {
        "num_draft_tokens": num_draft_tokens,
        "draft_probs": draft_probs,
        "target_probs": target_probs,
        "u_accept": u_accept,
        "u_recover": u_recover,
    }
    for name, shape in expected.items():
        check(
            tuple(given[name].shape) == shape,
            f"{name}.shape={tuple(given[name].shape)!r}, expected {shape!r} for B={batch}, G={gamma}, V={vocab} "
            "(target_probs has one more row per request than draft_probs: the bonus row).",
        )
    check(
        draft_probs.dtype == target_probs.dtype,
        f"draft_probs.dtype={draft_probs.dtype} != target_probs.dtype={target_probs.dtype}: cast both to one dtype.",
    )
    _same_device(draft_token_ids=draft_token_ids, **given)
    return batch, gamma, vocab


def check_categorical_args(probs: torch.Tensor, uniforms: torch.Tensor) -> tuple[int, int]:
    """Validate ``probs`` [B, V] and ``uniforms`` [B]. Returns (B, V)."""
    _tensor("probs", probs, 2, PROB_DTYPES, "[B, V]")
    _tensor("uniforms", uniforms, 1, PROB_DTYPES, "[B]")
    batch, vocab = probs.shape
    check(vocab >= 1, f"probs.shape={tuple(probs.shape)!r} must have V >= 1 columns.")
    check(
        tuple(uniforms.shape) == (batch,),
        f"uniforms.shape={tuple(uniforms.shape)!r}, expected ({batch},): one uniform per row of probs.",
    )
    _same_device(probs=probs, uniforms=uniforms)
    return batch, vocab


def check_contiguous(**tensors: torch.Tensor) -> None:
    """The triton kernels index raw pointers, so they need row-major contiguous inputs."""
    for name, value in tensors.items():
        check(
            value.is_contiguous(),
            f"{name} (shape {tuple(value.shape)!r}, stride {value.stride()!r}) must be "
            f"contiguous for the triton kernel: pass {name}.contiguous().",
        )


def _same_device(**tensors) -> None:
    devices = {name: value.device for name, value in tensors.items()}
    if len(set(devices.values())) > 1:
        raise InvalidArgument(f"tensors on different devices: {devices!r}; move them to one device with .to(device).")
