"""Adapters around vLLM's real rejection sampler (checked against vLLM 0.32.0; vLLM imported lazily).

vLLM 0.32 (``vllm/v1/sample/rejection_sampler.py``) has two entry points, wrapped here into samplers with the
signature of ``chain_rejection_sample``::

    rejection_sample(draft_token_ids [N] int32, num_draft_tokens list[int], max_spec_len int,
                     cu_num_draft_tokens [B] int32 (inclusive cumsum), draft_probs [N, V] float32 | None,
                     target_logits [N, V] float32, bonus_token_ids [B, 1], sampling_metadata, ...) -> [B, G+1] int32
    RejectionSampler(sampler).forward(metadata: SpecDecodeMetadata, draft_probs [N, V], logits [N + B, V],
                                      sampling_metadata) -> SamplerOutput (.sampled_token_ids [B, G+1] int32)

``rejection_sample`` takes *logits* of the draft positions, already processed (it applies softmax itself, :487) and
the bonus token from outside; ``forward`` takes the raw logits of every position (each request's n_r draft
positions, then its bonus position), samples the bonus token with vLLM's ``Sampler``, and processes the draft
positions' logits with ``apply_sampling_constraints`` (:522: temperature, top-k, top-p, each expanded to one value
per draft row by ``expand_batch_to_tokens``, :581). Both draw their own randomness (``generate_uniform_probs`` :622
and ``sample_recovered_tokens`` :678 call torch's generator; ``SamplingMetadata.generators`` is left empty, so it
is torch's global one, forked and seeded per call here), hence ``consumes_uniforms = False`` and the statistical
``round_law_test``.

The case's target rows become logits ``temperature * log(p)``, so the law after vLLM's temperature is the case's;
with ``top_k`` / ``top_p`` the expected law is that of :func:`truncated_case`. Rows must therefore be laws (a row
that does not sum to 1 has no logits with that law). ``-1`` pads vLLM's output; ``status`` is always 0 (vLLM has
no error flags), so check valid cases only. Every vLLM type is reached through :class:`VllmTypes` (``types=None``:
vLLM's own when it is installed, else ``STAND_IN_TYPES`` with the same fields), so a fake with the same signatures
runs without vLLM (the main-venv tests pass one).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from specverify.errors import check
from specverify.kernel_checks.adapters import _bonus_tokens, _check_callable, _from_padded_output
from specverify.kernel_checks.law import RoundCase
from specverify.kernels.layout import ChainResult, check_chain_args

__all__ = [
    "VllmTypes",
    "vllm_types",
    "STAND_IN_TYPES",
    "load_vllm_kernels",
    "vllm_sampling_metadata",
    "vllm_spec_decode_metadata",
    "from_vllm_rejection_sample",
    "from_vllm_rejection_sampler",
    "truncated_case",
]

ROW_SUM_ATOL = 1e-5  # float32 rows of a law sum to 1 within a few eps times sqrt(V)
_TIE_ATOL = 1e-6


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
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    current_platform.register_triton_kernel_overrides()
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
    request: its n_r draft positions, then its bonus position (``logits`` [N + B, V])."""
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


def _check_laws(target_probs: torch.Tensor, n: torch.Tensor) -> None:  # the rows 0..n_r of each request
    owned = torch.arange(target_probs.shape[1], device=n.device)[None] <= n[:, None]
    rows = target_probs[owned].double()
    sums = rows.sum(-1)
    valid = bool(torch.isfinite(rows).all() and (rows >= 0).all() and ((sums - 1).abs() <= ROW_SUM_ATOL).all())
    check(
        valid,
        f"target rows sum to [{float(sums.min()):.6g}, {float(sums.max()):.6g}] (or hold NaN, inf or negative "
        f"entries): vLLM's rejection sampler takes logits, and only a law (finite, non-negative, summing to 1 within "
        f"{ROW_SUM_ATOL}) has logits with that law. Check valid cases with normalised target rows.",
    )


def _logits(target_probs: torch.Tensor, temperature: float) -> torch.Tensor:  # [B, G+1, V] -> float32 logits
    return target_probs.float().log() * temperature  # log 0 = -inf: a token of probability 0 stays impossible


@contextmanager
def _seeded(seed: int, call: int, device: torch.device):
    devices = [] if device.type == "cpu" else [device]
    with torch.random.fork_rng(devices=devices, device_type=device.type):
        torch.manual_seed(int(np.random.SeedSequence([seed, call]).generate_state(1)[0]))
        yield


def _check_seed(seed) -> None:
    check(
        isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0,
        f"seed={seed!r} must be an int >= 0: each call runs under torch's generator seeded from (seed, call index).",
    )


def _default_rejection_sample():
    from vllm.v1.sample.rejection_sampler import rejection_sample

    _ensure_kernels()
    return rejection_sample


def from_vllm_rejection_sample(
    fn: Callable | None = None, *, seed: int = 0, types: VllmTypes | None = None
) -> Callable[..., ChainResult]:
    """A sampler around vLLM's ``rejection_sample`` (``fn=None``: the installed one, kernels loaded) or a function
    of its signature (module docstring).

    The target rows of the draft positions go in as ``log p`` with temperature 1 in the metadata (the function
    receives processed logits); the bonus token is drawn here from target row n_r with ``u_recover[r, n_r]`` (vLLM
    samples it outside this function). Call k runs with torch's generator seeded from ``(seed, k)``, so a fresh
    adapter with the same seed repeats a test.
    """
    if fn is not None:
        _check_callable("fn", fn, "vLLM rejection_sample")
    _check_seed(seed)
    calls = iter(range(1 << 62))

    def sampler(draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover) -> ChainResult:
        batch, gamma, _ = check_chain_args(
            draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
        )
        n = num_draft_tokens.long()
        _check_laws(target_probs, n)
        kernel = _default_rejection_sample() if fn is None else fn
        owned = torch.arange(gamma, device=n.device)[None] < n[:, None]  # [B, G]
        metadata = vllm_sampling_metadata(batch, types=types, device=n.device)
        with _seeded(seed, next(calls), n.device):
            output = kernel(
                draft_token_ids[owned].to(torch.int32).contiguous(),
                n.tolist(),
                int(n.max()),
                n.cumsum(0).to(torch.int32),
                draft_probs[owned].float().contiguous(),
                _logits(target_probs[:, :gamma], 1.0)[owned].contiguous(),
                _bonus_tokens(n, target_probs, u_recover),
                metadata,
            )
        return _from_padded_output(output, n, gamma)

    sampler.consumes_uniforms = False
    sampler.seed = seed
    sampler.__qualname__ = "from_vllm_rejection_sample(" + ("vllm" if fn is None else _name(fn)) + ")"
    return sampler


def _name(value) -> str:
    return getattr(value, "__qualname__", type(value).__name__)


def _default_rejection_sampler():
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler

    _ensure_kernels()
    return RejectionSampler(Sampler())


def _check_constraints(temperature, top_k, top_p) -> None:
    check(
        isinstance(temperature, (int, float)) and temperature > 0,
        f"temperature={temperature!r} must be a number > 0; temperature 0 is vLLM's greedy path, whose law is a "
        "point mass (check greedy verification with the greedy certification instead).",
    )
    check(
        top_k is None or (isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= 1),
        f"top_k={top_k!r} must be None or an int >= 1.",
    )
    check(
        top_p is None or (isinstance(top_p, float) and 0 < top_p <= 1),
        f"top_p={top_p!r} must be None or a float in (0, 1].",
    )


def from_vllm_rejection_sampler(
    rejection_sampler=None,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    types: VllmTypes | None = None,
) -> Callable[..., ChainResult]:
    """A sampler around ``RejectionSampler.forward`` (``rejection_sampler=None``: ``RejectionSampler(Sampler())``
    of the installed vLLM, kernels loaded; else any object with a ``forward`` of that signature).

    Every request gets ``temperature``, ``top_k`` and ``top_p``; the logits are ``temperature * log(p)`` of every
    target row, the bonus row included, so vLLM's own processing recovers the case's rows: the expected law is
    ``exact_round_law(truncated_case(case, top_k=top_k, top_p=top_p))``. Seeding as in
    :func:`from_vllm_rejection_sample`; the uniforms given are not read at all.
    """
    if rejection_sampler is not None:
        check(
            callable(getattr(rejection_sampler, "forward", None)),
            f"rejection_sampler={rejection_sampler!r} has no callable forward; pass a vLLM RejectionSampler "
            "instance (or None for RejectionSampler(Sampler()) of the installed vLLM).",
        )
    _check_constraints(temperature, top_k, top_p)
    _check_seed(seed)
    calls, modules = iter(range(1 << 62)), []

    def sampler(draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover) -> ChainResult:
        batch, gamma, _ = check_chain_args(
            draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
        )
        n = num_draft_tokens.long()
        _check_laws(target_probs, n)
        if not modules:  # the installed vLLM's, made on first use (vLLM imported only then)
            modules.append(_default_rejection_sampler() if rejection_sampler is None else rejection_sampler)
        module = modules[0]
        owned = torch.arange(gamma, device=n.device)[None] < n[:, None]  # [B, G]
        with_bonus = torch.arange(gamma + 1, device=n.device)[None] <= n[:, None]  # [B, G+1]
        spec = vllm_spec_decode_metadata(draft_token_ids[owned], n, types=types)
        metadata = vllm_sampling_metadata(batch, temperature=temperature, top_k=top_k, top_p=top_p, types=types)
        with _seeded(seed, next(calls), n.device):
            output = module.forward(
                spec,
                draft_probs[owned].float().contiguous(),
                _logits(target_probs, temperature)[with_bonus].contiguous(),
                metadata,
            )
        return _from_padded_output(output.sampled_token_ids, n, gamma)

    sampler.consumes_uniforms = False
    sampler.seed = seed
    name = "vllm" if rejection_sampler is None else _name(rejection_sampler)
    sampler.__qualname__ = f"from_vllm_rejection_sampler({name}, temperature={temperature!r}, top_k={top_k!r}, " + (
        f"top_p={top_p!r})"
    )
    return sampler


def _top_k_row(row: np.ndarray, top_k: int) -> np.ndarray:
    # vLLM keeps every logit >= the k-th largest (topk_topp_sampler.py:498-502, :517): ties at the k-th value stay
    threshold = np.sort(row)[::-1][min(top_k, row.size) - 1]
    return np.where(row >= threshold, row, 0.0)


def _top_p_row(row: np.ndarray, top_p: float) -> np.ndarray:
    # vLLM drops, in ascending order, the tokens whose cumulative mass is <= 1 - p, never the largest (:504-511)
    order = np.argsort(row, kind="stable")
    cumulative = np.cumsum(row[order])
    check(
        bool(np.all(np.abs(cumulative - (1 - top_p)) > _TIE_ATOL)),
        f"top_p={top_p!r} lies within {_TIE_ATOL} of a cumulative mass of row {row.tolist()!r}: float rounding "
        "decides that token; pick a top_p away from the row's cumulative masses.",
    )
    dropped = cumulative <= 1 - top_p
    dropped[-1] = False
    kept = row[order][~dropped]
    lost = row[order][dropped]
    check(
        not np.intersect1d(kept, lost[lost > 0]).size,
        f"top_p={top_p!r} splits tied probabilities of row {row.tolist()!r}: which one vLLM keeps depends on its "
        "sort order; pick a top_p that does not cut through ties.",
    )
    out = row.copy()
    out[order[dropped]] = 0.0
    return out


def truncated_case(case: RoundCase, *, top_k: int | None = None, top_p: float | None = None) -> RoundCase:
    """``case`` with every target row restricted as vLLM 0.32 applies ``top_k`` then ``top_p`` and renormalised (in
    float64); the draft rows are kept. Raises ``InvalidArgument`` where float rounding or tie order would decide.

    Examples
    --------
    >>> case = RoundCase([[0.5, 0.3, 0.2], [0.6, 0.25, 0.15]], [[0.2, 0.3, 0.5]])
    >>> truncated_case(case, top_k=2).target_probs.round(4).tolist()
    [[0.625, 0.375, 0.0], [0.7059, 0.2941, 0.0]]
    """
    check(isinstance(case, RoundCase), f"case={case!r} must be a RoundCase.")
    _check_constraints(1.0, top_k, top_p)
    rows = []
    for row in np.asarray(case.target_probs, dtype=np.float64):
        row = row / row.sum()
        row = _top_k_row(row, top_k) if top_k is not None else row
        row = _top_p_row(row / row.sum(), top_p) if top_p is not None else row
        rows.append(row / row.sum())
    name = f"{case.name} top_k={top_k} top_p={top_p}".strip()
    return RoundCase(np.array(rows), case.draft_probs, dtype=case.dtype, name=name)
