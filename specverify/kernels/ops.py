"""Public entry points: check the arguments, pick a backend, launch.

``backend="auto"`` runs the triton kernel when the inputs live on a CUDA device or ``TRITON_INTERPRET=1`` is set,
and the torch twin otherwise; ``"triton"`` and ``"torch"`` force one. Triton is imported only on the first triton
launch (``import specverify.kernels`` never imports it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.kernels.layout import CategoricalResult, ChainResult, check_categorical_args, check_chain_args
from specverify.kernels.twins import categorical_sample_torch, chain_rejection_sample_torch
from specverify.sampling import Purpose, keyed_uniforms

__all__ = ["chain_rejection_sample", "categorical_sample", "resolve_backend", "keyed_chain_uniforms"]

_BACKENDS = ("auto", "triton", "torch")


def resolve_backend(backend: str, device: str | torch.device) -> str:
    """``'triton'`` or ``'torch'`` for ``backend`` in ('auto', 'triton', 'torch') and tensors on ``device``."""
    if backend not in _BACKENDS:
        raise InvalidArgument(f"backend={backend!r} must be one of {_BACKENDS!r}; pass 'auto' to pick by device.")
    if backend != "auto":
        return backend
    interpret = os.environ.get("TRITON_INTERPRET", "0") == "1"
    return "triton" if getattr(device, "type", str(device)) == "cuda" or interpret else "torch"


def _triton_module():
    try:
        return importlib.import_module("specverify.kernels._triton")
    except ImportError as error:  # pragma: no cover - triton is a test extra
        raise InvalidArgument(
            f"backend='triton' needs triton ({error}); install specverify-toolkit[test] or use backend='torch'."
        ) from error


def chain_rejection_sample(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_recover: torch.Tensor,
    *,
    backend: str = "auto",
) -> ChainResult:
    """Chain rejection sampling for a ragged batch with explicit uniforms (one verification round).

    Parameters
    ----------
    draft_token_ids : int tensor [B, G]
    num_draft_tokens : int tensor [B]
        Drafts per request, 0 <= n_r <= G.
    draft_probs : float tensor [B, G, V]
    target_probs : float tensor [B, G+1, V]
        Same dtype as ``draft_probs``; row n_r of each request is its bonus row.
    u_accept : float tensor [B, G]
        ``u_accept[r, k]`` decides draft k's acceptance.
    u_recover : float tensor [B, G+1]
        ``u_recover[r, f]`` draws the recovered (f < n_r) or bonus (f = n_r) token.
    backend : {'auto', 'triton', 'torch'}

    Returns
    -------
    ChainResult
        ``tokens`` [B, G+1] int64 padded with ``PAD_TOKEN_ID`` (-1), ``num_accepted`` [B] int32, ``status`` [B]
        int32 (bits ``STATUS_*``; a request with an error bit emits nothing).

    Notes
    -----
    The rule and the uniform layout are spelled out in ``specverify.kernels.layout``. The triton kernel needs
    contiguous ``draft_probs`` and ``target_probs``; the small tensors are converted as needed. Values are never
    checked on the host (that would synchronise the device): NaN, ±inf, negative entries, bad token ids and bad
    lengths come back as status bits. Uniforms are expected in [0, 1).
    """
    check_chain_args(draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover)
    if resolve_backend(backend, target_probs.device) == "torch":
        return chain_rejection_sample_torch(
            draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
        )
    return _triton_module().chain_rejection_sample_triton(
        draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
    )


def categorical_sample(probs: torch.Tensor, uniforms: torch.Tensor, *, backend: str = "auto") -> CategoricalResult:
    """Batched categorical sampling by inverse CDF from explicit uniforms (the GPU form of
    ``sampling.sample_from_uniforms``).

    Parameters
    ----------
    probs : float tensor [B, V]
        Non-negative weights; rows need not sum to 1.
    uniforms : float tensor [B]
        One uniform in [0, 1) per row.
    backend : {'auto', 'triton', 'torch'}

    Returns
    -------
    CategoricalResult
        ``tokens`` [B] int64: the smallest i with ``u * mass < cdf[i]``, clamped to the row's last positive index;
        ``PAD_TOKEN_ID`` with ``STATUS_NO_TOKEN`` for rows without positive mass and with ``STATUS_INVALID_PROBS``
        for rows holding NaN, ±inf or negative entries.
    """
    check_categorical_args(probs, uniforms)
    if resolve_backend(backend, probs.device) == "torch":
        return categorical_sample_torch(probs, uniforms)
    return _triton_module().categorical_sample_triton(probs, uniforms)


def keyed_chain_uniforms(
    seeds: Sequence[int] | np.ndarray,
    positions: Sequence[int] | np.ndarray,
    num_draft_tokens: int,
    *,
    dtype: torch.dtype | None = None,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(u_accept [B, G], u_recover [B, G+1])`` from the keyed RNG of ``sampling.keyed_uniforms`` (docs/design.md,
    RNG), with G = ``num_draft_tokens`` draft slots per request.

    ``u_accept[r, k]`` is keyed by (``seeds[r]``, ``positions[r] + k``, ``Purpose.ACCEPT``) and ``u_recover[r, k]``
    by (``seeds[r]``, ``positions[r] + k``, ``Purpose.TARGET``), where ``positions[r]`` is the number of tokens
    request r has generated before this round: never the batch index, so a request's draws do not depend on its
    neighbours. ``dtype`` (default float32) is the kernel's compute dtype; values are clamped below 1 after rounding.

    Examples
    --------
    >>> u_accept, u_recover = keyed_chain_uniforms([7, 8], [0, 5], 2)
    >>> tuple(u_accept.shape), tuple(u_recover.shape)
    ((2, 2), (2, 3))
    """
    check(
        isinstance(num_draft_tokens, (int, np.integer))
        and not isinstance(num_draft_tokens, bool)
        and num_draft_tokens >= 0,
        f"num_draft_tokens={num_draft_tokens!r} must be an int >= 0: the number of draft slots G per request.",
    )
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1, 1)
    steps = np.asarray(positions, dtype=np.int64).reshape(-1, 1) + np.arange(num_draft_tokens + 1)[None]  # [B, G+1]
    dtype = torch.float32 if dtype is None else dtype
    below_one = torch.nextafter(torch.tensor(1.0, dtype=dtype), torch.tensor(0.0, dtype=dtype))

    def draw(purpose, columns):
        values = torch.as_tensor(keyed_uniforms(seeds, steps[:, :columns], purpose)).to(dtype)
        return torch.minimum(values, below_one).to(device)

    return draw(Purpose.ACCEPT, num_draft_tokens), draw(Purpose.TARGET, num_draft_tokens + 1)
