"""vLLM's acceptance step on explicit uniforms: the one piece of its rejection sampler the grid law can drive.

``rejection_sample`` draws its uniforms itself, but the step that decides acceptance and assembles the output is a
kernel taking them as an argument (vLLM 0.32, v1/sample/rejection_sampler.py)::

    _rejection_random_sample(output_token_ids [B, G+1] int32, cu_num_draft_tokens [B] int32, draft_token_ids [N],
                             draft_probs [N, V] float32, target_probs [N, V] float32, bonus_token_ids [B, 1],
                             recovered_token_ids [N] int32, uniform_probs [N] float64, is_greedy [B] bool,
                             max_spec_len, synthetic_conditional_rates None)      # :934, kernel :829, CPU: C++

:func:`from_vllm_acceptance` wraps it into a sampler that consumes the uniforms of ``specverify.kernels.layout``:
``u_accept`` are its ``uniform_probs``; the recovered token of every draft position k is drawn here from the
residual of row k with ``u_recover[r, k]`` and the bonus from row n_r with ``u_recover[r, n_r]`` (vLLM's own
recovered draw, ``sample_recovered_tokens`` :678, races exponentials and is not what is checked here). So
``check_grid_law`` checks vLLM's acceptance decision, position by position, on every grid point, u = 0 included.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specverify.kernel_checks.adapters import _check_callable, _from_padded_output
from specverify.kernels.layout import ChainResult, check_chain_args
from specverify.sampling import residual_probs, sample_from_uniforms

__all__ = ["from_vllm_acceptance"]


def _default_kernel():
    from vllm.v1.sample.rejection_sampler import _rejection_random_sample

    from specverify.kernel_checks.vllm_types import _ensure_kernels

    _ensure_kernels()
    return _rejection_random_sample


def _draws(n, draft_probs, target_probs, u_recover):  # -> recovered [B, G], bonus [B] int64, from the layout's rule
    batch, gamma = draft_probs.shape[:2]
    residual = residual_probs(target_probs[:, :gamma].double(), draft_probs.double())  # [B, G, V]
    u = u_recover.double()
    recovered = sample_from_uniforms(residual.flatten(0, 1), u[:, :gamma].flatten()).view(batch, gamma)
    rows = torch.arange(batch, device=n.device)
    bonus = sample_from_uniforms(target_probs[rows, n].double(), u[rows, n])
    return recovered, bonus


def from_vllm_acceptance(kernel: Callable | None = None) -> Callable[..., ChainResult]:
    """A uniform-consuming sampler around vLLM's ``_rejection_random_sample`` (``kernel=None``: the installed one,
    kernels loaded) or a function of its signature (module docstring). ``status`` is always 0: check valid cases.

    Examples
    --------
    >>> def reject_first(output, cu, ids, draft, target, bonus, recovered, uniform, is_greedy, max_spec_len, rates):
    ...     output[:, 0] = recovered[cu.long() - 1]  # a stand-in that rejects every single draft
    >>> sampler = from_vllm_acceptance(reject_first)
    >>> one = torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[0.0, 1.0], [0.5, 0.5]]])
    >>> sampler(torch.tensor([[0]]), torch.tensor([1]), *one, torch.tensor([[0.5]]), torch.zeros(1, 2)).tokens.tolist()
    [[1, -1]]
    """
    if kernel is not None:
        _check_callable("kernel", kernel, "vLLM _rejection_random_sample")

    def sampler(draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover) -> ChainResult:
        batch, gamma, _ = check_chain_args(
            draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
        )
        n = num_draft_tokens.long()
        owned = torch.arange(gamma, device=n.device)[None] < n[:, None]  # [B, G]
        recovered, bonus = _draws(n, draft_probs, target_probs, u_recover)
        output = torch.full((batch, gamma + 1), -1, dtype=torch.int32, device=n.device)
        (_default_kernel() if kernel is None else kernel)(
            output,
            n.cumsum(0).to(torch.int32),
            draft_token_ids[owned].to(torch.int32).contiguous(),
            draft_probs[owned].float().contiguous(),
            target_probs[:, :gamma][owned].float().contiguous(),
            bonus[:, None].contiguous(),
            recovered[owned].to(torch.int32).contiguous(),
            u_accept[owned].double().contiguous(),
            torch.zeros(batch, dtype=torch.bool, device=n.device),
            gamma,
            None,
        )
        return _from_padded_output(output, n, gamma)

    sampler.__qualname__ = (
        "from_vllm_acceptance(" + ("vllm" if kernel is None else getattr(kernel, "__qualname__", "kernel")) + ")"
    )
    return sampler
