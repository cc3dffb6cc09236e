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

import numpy as np
import torch

from specverify.errors import check
from specverify.kernel_checks.adapters import (
    _bonus_tokens,
    _check_callable,
    _check_generator,
    _draw_uniforms,
    _from_padded_output,
)
from specverify.kernel_checks.law import RoundCase
from specverify.kernel_checks.vllm_types import (
    VllmTypes,
    _ensure_kernels,
    vllm_sampling_metadata,
    vllm_spec_decode_metadata,
)
from specverify.kernels.layout import ChainResult, check_chain_args

__all__ = [
    "from_vllm_style",
    "as_vllm_style",
    "from_vllm_rejection_sample",
    "from_vllm_rejection_sampler",
    "truncated_case",
]

ROW_SUM_ATOL = 1e-5  # float32 rows of a law sum to 1 within a few eps times sqrt(V)
_TIE_ATOL = 1e-6


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


def from_vllm_style(fn: Callable, *, seed: int = 0) -> Callable[..., ChainResult]:
    """A sampler around ``fn``, vLLM's ``rejection_sample`` or a function of its signature (module docstring):
    ``vllm_sampler.from_vllm_rejection_sample(fn, seed=seed)``. ``status`` is always 0 (no error flags in the
    signature), so check such kernels on valid cases only."""
    _check_callable("fn", fn, "vLLM rejection_sample")
    return from_vllm_rejection_sample(fn, seed=seed)


def as_vllm_style(sampler: Callable[..., ChainResult], *, generator: torch.Generator) -> Callable:
    """``sampler`` as a function of vLLM's ``rejection_sample`` signature (module docstring) drawing its uniforms
    from ``generator``: softmax of ``target_logits`` in float32 as vLLM does; greedy metadata is refused."""
    _check_callable("sampler", sampler, "chain_rejection_sample")
    _check_generator(generator)

    def fn(
        draft_token_ids: torch.Tensor,
        num_draft_tokens: list[int],
        max_spec_len: int,
        cu_num_draft_tokens: torch.Tensor,
        draft_probs: torch.Tensor,
        target_logits: torch.Tensor,
        bonus_token_ids: torch.Tensor,
        sampling_metadata,
        **engine_options,
    ) -> torch.Tensor:
        check(
            not sampling_metadata.all_greedy,
            "sampling_metadata.all_greedy=True: this stand-in implements random sampling only.",
        )
        check(draft_probs is not None, "draft_probs=None (n-gram drafts) is not supported: pass the draft rows.")
        target_probs = target_logits.softmax(dim=-1, dtype=torch.float32)
        n = torch.as_tensor(num_draft_tokens, dtype=torch.long, device=target_probs.device)
        batch, vocab, width = n.shape[0], target_probs.shape[1], max_spec_len + 1
        max_spec_len = max(max_spec_len, 1)  # the chain signature has at least one draft slot
        owned = torch.arange(max_spec_len, device=n.device)[None] < n[:, None]
        ids = torch.zeros((batch, max_spec_len), dtype=torch.long, device=n.device)
        ids[owned] = draft_token_ids.long()
        draft = torch.zeros((batch, max_spec_len, vocab), dtype=draft_probs.dtype, device=n.device)
        draft[owned] = draft_probs
        target = torch.zeros((batch, max_spec_len + 1, vocab), dtype=target_probs.dtype, device=n.device)
        target[:, :max_spec_len][owned] = target_probs
        target[torch.arange(batch), n, 0] = 1.0  # the bonus comes from bonus_token_ids; any valid row will do
        result = sampler(ids, n, draft, target, *_draw_uniforms(batch, max_spec_len, draft.dtype, n.device, generator))
        tokens = result.tokens.clone()
        bonus = result.num_accepted.long() == n
        tokens[bonus, n[bonus]] = bonus_token_ids.reshape(-1).long()[bonus]
        return tokens[:, :width].to(torch.int32)

    return fn


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
