"""The vLLM types the kernel-check adapters build (vLLM 0.32.0; imported lazily), stand-ins with the same fields for
running fakes without vLLM, and the kernel loading an engine start performs.

``types=None`` everywhere means vLLM's own ``SamplingMetadata`` / ``SpecDecodeMetadata`` / ``LogitsProcessors`` when
vLLM is installed, else ``STAND_IN_TYPES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from specverify.errors import check

__all__ = [
    "VllmTypes",
    "vllm_types",
    "STAND_IN_TYPES",
    "load_vllm_kernels",
    "vllm_sampling_metadata",
    "vllm_spec_decode_metadata",
]


class VllmTypes(NamedTuple):
    """The vLLM constructors the adapters call (``vllm_types()``), or stand-ins with the same keyword signatures."""

    sampling_metadata: Callable
    spec_decode_metadata: Callable
    logits_processors: Callable


def vllm_types() -> VllmTypes:
    """vLLM's own ``SamplingMetadata``, ``SpecDecodeMetadata`` and ``LogitsProcessors`` (imports vLLM)."""
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    return VllmTypes(SamplingMetadata, SpecDecodeMetadata, LogitsProcessors)


@dataclass
class _SamplingMetadataStandIn:
    """The fields of vLLM 0.32's ``SamplingMetadata`` (v1/sample/metadata.py:15), for running fakes without vLLM."""

    temperature: torch.Tensor | None
    all_greedy: bool
    all_random: bool
    top_p: torch.Tensor | None
    top_k: torch.Tensor | None
    generators: dict
    max_num_logprobs: int | None
    no_penalties: bool
    prompt_token_ids: torch.Tensor | None
    frequency_penalties: torch.Tensor
    presence_penalties: torch.Tensor
    repetition_penalties: torch.Tensor
    output_token_ids: list
    allowed_token_ids_mask: torch.Tensor | None
    bad_words_token_ids: dict
    logitsprocs: object
    logprob_token_ids: dict | None = None
    spec_token_ids: list | None = None
    thinking_budget_state_holder: object = None


@dataclass
class _SpecDecodeMetadataStandIn:
    """The fields of vLLM 0.32's ``SpecDecodeMetadata`` (v1/spec_decode/metadata.py:10), ``max_spec_len`` derived."""

    draft_token_ids: torch.Tensor
    num_draft_tokens: list
    cu_num_draft_tokens: torch.Tensor
    cu_num_sampled_tokens: torch.Tensor
    target_logits_indices: torch.Tensor
    bonus_logits_indices: torch.Tensor
    logits_indices: torch.Tensor
    max_spec_len: int = field(init=False)

    def __post_init__(self):
        self.max_spec_len = max(self.num_draft_tokens)


@dataclass
class _LogitsProcessorsStandIn:
    """No logits processors (``LogitsProcessors()``)."""

    argmax_invariant: list = field(default_factory=list)
    non_argmax_invariant: list = field(default_factory=list)


STAND_IN_TYPES = VllmTypes(_SamplingMetadataStandIn, _SpecDecodeMetadataStandIn, _LogitsProcessorsStandIn)
"""Stand-ins with the fields of vLLM 0.32's types: what ``types=None`` resolves to when vLLM is not installed."""


def _resolve(types: VllmTypes | None) -> VllmTypes:
    if types is not None:
        check(isinstance(types, VllmTypes), f"types={types!r} must be a VllmTypes (or None for vLLM's own).")
        return types
    try:
        return vllm_types()
    except ImportError:
        return STAND_IN_TYPES


_LOADED: list = []  # set once load_vllm_kernels ran in this process


def load_vllm_kernels() -> None:
    """What a vLLM engine does at start-up before sampling: load the platform's kernels and, where Triton cannot
    run (CPU without Triton-CPU), bind its C++ overrides (platforms/cpu.py:670). Binding reads the module attributes
    of ``vllm.utils.cpu_triton_utils`` then, so call it again after monkeypatching one of them. The adapters'
    default (``None``) entry points call it once per process."""
    import sys

    from vllm.platforms import current_platform

    # vLLM's registration scans every loaded module and breaks on llvmlite's ffi ``lib`` once numba is imported (the
    # n-gram proposer imports it): docs/findings/vllm.md, finding 4. Hide that one module while binding, as the
    # adapter does at each engine start.
    hidden = sys.modules.pop("llvmlite.binding.ffi", None)
    try:
        current_platform.import_kernels()
        current_platform.register_triton_kernel_overrides()
    finally:
        if hidden is not None:
            sys.modules["llvmlite.binding.ffi"] = hidden
    _LOADED.append(True)


def _ensure_kernels() -> None:
    if not _LOADED:
        load_vllm_kernels()


def vllm_sampling_metadata(
    batch: int, *, temperature: float = 1.0, top_k=None, top_p=None, types=None, device="cpu"
) -> object:
    """A ``SamplingMetadata`` for ``batch`` random-sampling requests (no penalties, logits processors, seeds or
    logprobs), in vLLM's dtypes: temperature and top-p float32 [B], top-k int32 [B] (gpu_input_batch.py:195-214)."""
    types = _resolve(types)
    full = lambda value, dtype: torch.full((batch,), value, dtype=dtype, device=device)  # noqa: E731
    return types.sampling_metadata(
        temperature=full(temperature, torch.float32),
        all_greedy=False,
        all_random=True,
        top_p=None if top_p is None else full(top_p, torch.float32),
        top_k=None if top_k is None else full(top_k, torch.int32),
        generators={},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=full(0.0, torch.float32),
        presence_penalties=full(0.0, torch.float32),
        repetition_penalties=full(1.0, torch.float32),
        output_token_ids=[],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=types.logits_processors(),
    )


def vllm_spec_decode_metadata(draft_token_ids: torch.Tensor, num_draft_tokens: torch.Tensor, *, types=None) -> object:
    """A ``SpecDecodeMetadata`` for flattened drafts [N] and lengths n [B], the logits laid out request after
    request: its n_r draft positions, then its bonus position (``logits`` [N + B, V]).

    Examples
    --------
    >>> meta = vllm_spec_decode_metadata(torch.tensor([7, 8, 9]), torch.tensor([2, 1]), types=STAND_IN_TYPES)
    >>> meta.target_logits_indices.tolist(), meta.bonus_logits_indices.tolist(), meta.max_spec_len
    ([0, 1, 3], [2, 4], 2)
    """
    types = _resolve(types)
    n = num_draft_tokens.long()
    device = n.device
    sampled = n + 1
    slot = torch.arange(int(sampled.max()), device=device)[None].expand(n.shape[0], -1)
    owned = slot < sampled[:, None]
    slot, lengths = slot[owned], n.repeat_interleave(sampled)  # per logits row: its slot and its request's n_r
    rows = torch.arange(slot.shape[0], device=device, dtype=torch.int32)
    return types.spec_decode_metadata(
        draft_token_ids=draft_token_ids.to(torch.int32).contiguous(),
        num_draft_tokens=n.tolist(),
        cu_num_draft_tokens=n.cumsum(0).to(torch.int32),
        cu_num_sampled_tokens=sampled.cumsum(0).to(torch.int32),
        target_logits_indices=rows[slot < lengths],
        bonus_logits_indices=rows[slot == lengths],
        logits_indices=rows,
    )
