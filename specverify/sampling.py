"""Canonical sampling: the processor pipeline, the single-position rule, residuals and inverse-CDF draws.

Everything that decides a law lives here so that ``reference`` and ``kernels`` build on one definition
(docs/design.md, "Canonical semantics"). All probabilities are float64 unless a caller passes another float dtype.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.keyed import Purpose, draw_seeds, keyed_uniforms  # noqa: F401 (the RNG's home: keyed.py)
from specverify.params import SamplingParams

__all__ = [
    "one_thread",
    "process_logits",
    "next_token_probs",
    "grammar_mask",
    "verify_candidate",
    "residual_probs",
    "sample_from_uniforms",
    "keyed_uniforms",
    "draw_seeds",
    "Purpose",
]


# --------------------------------------------------------------------------------------------------- processors


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch single-threaded inside the block: on [B, V≤16] tensors, waking the intra-op pool costs more
    (2–30 ms stalls measured on 2 loaded cores) than it gives. Restores the previous setting."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def _check_logits(logits: torch.Tensor) -> None:
    check(
        isinstance(logits, torch.Tensor) and logits.ndim == 2 and logits.shape[1] > 0,
        f"logits.shape={tuple(getattr(logits, 'shape', ()))!r} must be [B, V] with V >= 1 "
        "(pass a torch tensor; next_token_probs also takes a single [V] row).",
    )
    top = float(logits.amax()) if logits.numel() else 0.0  # NaN propagates through amax: one pass checks both
    if top != top or top == float("inf"):
        bad = torch.isnan(logits) | (logits == float("inf"))
        rows = torch.nonzero(bad.any(-1)).flatten().tolist()[:5]
        raise InvalidArgument(
            f"logits rows {rows!r} hold NaN or +inf: logits must be finite or -inf (masked). "
            "Check the model's output before sampling."
        )


def _penalize(logits, params, seen, counts):  # [B, V], bool [B, V], [B, V] -> [B, V]
    if params.repetition_penalty != 1.0 and seen is not None:
        penalized = torch.where(logits > 0, logits / params.repetition_penalty, logits * params.repetition_penalty)
        logits = torch.where(seen, penalized, logits)
    if counts is not None and (params.frequency_penalty or params.presence_penalty):
        finite = torch.isfinite(logits)
        shift = params.frequency_penalty * counts + params.presence_penalty * (counts > 0).to(logits.dtype)
        logits = torch.where(finite, logits - shift, logits)
    return logits


def _mask(logits, params, num_generated, allowed, eos_token_id):  # [B, V] -> [B, V]
    neg_inf = torch.tensor(float("-inf"), dtype=logits.dtype)
    if params.bad_token_ids:
        ids = [t for t in params.bad_token_ids if t < logits.shape[1]]
        logits = logits.clone()
        logits[:, ids] = neg_inf
    if params.min_tokens > 0 and not params.ignore_eos:
        check(eos_token_id is not None, "eos_token_id=None but min_tokens > 0: pass the vocabulary's EOS id.")
        early = torch.as_tensor(num_generated) < params.min_tokens  # [B]
        logits = logits.clone()
        logits[:, eos_token_id] = torch.where(early, neg_inf, logits[:, eos_token_id])
    if allowed is not None:
        logits = torch.where(allowed, logits, neg_inf)
    return logits


def _run_processors(logits, params, histories):  # [B, V] -> [B, V]
    """The request's ``logits_processors`` in order, after the penalties (docs/design.md, step 6)."""
    check(
        histories is not None and len(histories) == logits.shape[0],
        f"params.logits_processors={params.logits_processors!r} need histories (one token tuple per row, prompt + "
        f"generated), got {None if histories is None else len(histories)!r} for {logits.shape[0]} rows.",
    )
    for processor in params.logits_processors:
        out = processor(histories, logits.clone())  # a clone: a processor writing in place cannot reach the caller
        if not (isinstance(out, torch.Tensor) and out.shape == logits.shape):
            raise InvalidArgument(
                f"logits processor {processor!r} returned {type(out).__name__} of shape "
                f"{tuple(getattr(out, 'shape', ()))!r}; expected a tensor of shape {tuple(logits.shape)!r}."
            )
        logits = out.to(torch.float64)
        if bool((torch.isnan(logits) | (logits == float("inf"))).any()):
            raise InvalidArgument(f"logits processor {processor!r} returned NaN or +inf: return finite logits or -inf.")
    return logits


def _truncate(probs, params):  # [B, V] -> [B, V], rows renormalised
    if params.top_k and params.top_k < probs.shape[1]:
        order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
        keep = torch.zeros_like(probs, dtype=torch.bool).scatter_(-1, order[:, : params.top_k], True)
        probs = _renormalize(torch.where(keep, probs, torch.zeros_like(probs)))
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        mass_before = torch.cumsum(sorted_probs, -1) - sorted_probs  # exclusive cumulative mass
        keep = torch.zeros_like(probs, dtype=torch.bool).scatter_(-1, order, mass_before < params.top_p)
        probs = _renormalize(torch.where(keep, probs, torch.zeros_like(probs)))
    if params.min_p > 0.0:
        floor = params.min_p * probs.max(-1, keepdim=True).values
        probs = _renormalize(torch.where(probs >= floor, probs, torch.zeros_like(probs)))
    return probs


def _renormalize(probs):  # [B, V] -> [B, V]; all-zero rows stay zero
    mass = probs.sum(-1, keepdim=True)
    return torch.where(mass > 0, probs / mass.clamp_min(torch.finfo(probs.dtype).tiny), probs)


def process_logits(
    logits,
    params: SamplingParams,
    *,
    seen=None,
    counts=None,
    num_generated=0,
    allowed=None,
    eos_token_id=None,
    histories=None,
) -> torch.Tensor:
    """Batched canonical pipeline: raw logits [B, V] -> next-token law [B, V] (float64).

    Parameters
    ----------
    logits : torch.Tensor [B, V]
        Raw logits; -inf entries are masked tokens. NaN or +inf raise ``InvalidArgument``.
    params : SamplingParams
        One configuration for the whole batch.
    seen : bool tensor [B, V], optional
        Tokens present in prompt + generated (repetition penalty).
    counts : tensor [B, V], optional
        Occurrences of each token among the generated tokens (frequency / presence penalties).
    num_generated : int or int tensor [B]
        Tokens generated so far (``min_tokens`` masks EOS while this is below it).
    allowed : bool tensor [B, V], optional
        Grammar mask (EOS column = accepting state).
    eos_token_id : int, optional
        Needed when ``min_tokens > 0``.
    histories : sequence of B tuples of token ids, optional
        Each row's prompt + generated tokens; needed when ``params.logits_processors`` is not empty (they run
        after the penalties, before the temperature).

    Returns
    -------
    torch.Tensor [B, V]
        Rows sum to 1, or are all zero where no token has positive probability (``no_token``). Greedy
        (temperature 0) rows are one-hot at the argmax of the processed logits, lowest index on ties.
    """
    _check_logits(logits)
    logits = logits.to(torch.float64)
    logits = _mask(logits, params, num_generated, allowed, eos_token_id)
    logits = _penalize(logits, params, seen, counts)
    if params.logits_processors:
        logits = _run_processors(logits, params, histories)
    if params.temperature == 0:
        alive = torch.isfinite(logits).any(-1, keepdim=True)  # [B, 1]
        hot = torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[1]).to(torch.float64)
        return torch.where(alive, hot, torch.zeros_like(hot))
    scaled = logits if params.temperature == 1.0 else logits / params.temperature
    # exp(-inf) = 0 masks single tokens; a row with every token masked comes out NaN: make it all zeros
    # written out: for the small vocabularies certification uses this is ~3x faster than torch.softmax
    top = scaled.amax(-1, keepdim=True)
    weights = torch.exp(scaled - top)
    probs = weights / weights.sum(-1, keepdim=True)
    dead = top[..., 0] == float("-inf")  # every token masked: exp(-inf - -inf) is NaN; report all zeros
    if bool(dead.any()):
        probs[dead] = 0.0
    return _truncate(probs, params)


def grammar_mask(grammar, states: Sequence, vocab_size: int, eos_token_id: int) -> torch.Tensor:
    """Bool [B, V]: non-EOS tokens the grammar allows in each state, EOS where the state is accepting."""
    distinct = {}
    rows = [distinct.setdefault(state, len(distinct)) for state in states]
    mask = torch.zeros((len(distinct), vocab_size), dtype=torch.bool)
    for state, row in distinct.items():
        ids = [t for t in grammar.allowed(state) if t < vocab_size and t != eos_token_id]
        mask[row, ids] = True
        mask[row, eos_token_id] = bool(grammar.accepting(state))
    return mask[torch.as_tensor(rows, dtype=torch.long)]


def next_token_probs(
    logits,
    params: SamplingParams,
    *,
    prompt: Sequence[int],
    generated: Sequence[int],
    grammar_state=None,
    eos_token_id: int | None = None,
) -> torch.Tensor:
    """The next-token law of plain target sampling after ``prompt + generated`` (docs/design.md order).

    ``logits`` is one row [V] (returns [V]) or the same history's rows stacked [B, V]. Penalty state is computed
    from ``prompt`` and ``generated``; ``grammar_state`` defaults to the grammar's initial state advanced over
    ``generated``. A row with no token of positive probability comes back all zeros (``no_token``), never NaN.

    Examples
    --------
    >>> import torch
    >>> next_token_probs(torch.tensor([0.0, 0.0, 1.0]), SamplingParams(temperature=0), prompt=[0], generated=[])
    tensor([0., 0., 1.], dtype=torch.float64)
    """
    check(isinstance(logits, torch.Tensor), f"logits={type(logits).__name__} must be a torch tensor.")
    single = logits.ndim == 1
    rows = logits[None] if single else logits
    check(rows.ndim == 2, f"logits.shape={tuple(logits.shape)!r} must be [V] or [B, V].")
    vocab = rows.shape[1]
    history = list(prompt) + list(generated)
    check(
        all(isinstance(t, (int, np.integer)) and 0 <= t < vocab for t in history),
        f"prompt + generated={history!r} must hold token ids in [0, {vocab}).",
    )
    ids = torch.as_tensor(history, dtype=torch.long)
    seen = torch.zeros(vocab, dtype=torch.bool)
    seen[ids] = True
    counts = torch.bincount(torch.as_tensor(list(generated), dtype=torch.long), minlength=vocab).to(torch.float64)
    allowed = None
    if params.grammar is not None:
        check(eos_token_id is not None, "eos_token_id=None but params.grammar is set: pass the vocabulary's EOS id.")
        if grammar_state is None:
            grammar_state = params.grammar.initial_state
            for tok in generated:
                grammar_state = params.grammar.advance(grammar_state, int(tok))
        allowed = grammar_mask(params.grammar, [grammar_state], vocab, eos_token_id).expand(rows.shape[0], -1)
    probs = process_logits(
        rows,
        params,
        seen=seen.expand(rows.shape[0], -1),
        counts=counts.expand(rows.shape[0], -1),
        num_generated=len(generated),
        allowed=allowed,
        eos_token_id=eos_token_id,
        histories=(tuple(int(t) for t in history),) * rows.shape[0],
    )
    return probs[0] if single else probs


# ------------------------------------------------------------------------------------- the single-position rule


def verify_candidate(target_probs: torch.Tensor, draft_probs: torch.Tensor, token: int, uniform: float) -> tuple:
    """Single-position exact acceptance (the seed's reference): ``(True, None)`` or ``(False, residual)``.

    Accept ``token`` iff ``uniform < min(1, target_probs[token] / draft_probs[token])``; on rejection return the
    normalised positive residual ``(target_probs - draft_probs)_+``. Raises ``ValueError`` (``InvalidArgument``) on
    misaligned or invalid distributions, a token the draft could not have sampled, a uniform outside [0, 1), and on a
    rejection with no residual mass (here, unlike ``residual_probs``, there is no fallback).
    """
    if target_probs.ndim != 1 or target_probs.shape != draft_probs.shape or target_probs.numel() == 0:
        raise InvalidArgument(
            f"target_probs.shape={tuple(target_probs.shape)!r}, draft_probs.shape="
            f"{tuple(draft_probs.shape)!r}: expected two aligned non-empty 1-D distributions over "
            "one vocabulary."
        )
    if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < target_probs.numel():
        raise InvalidArgument(
            f"token={token!r} must be an int indexing the shared vocabulary [0, {target_probs.numel()})."
        )
    for name, dist in (("target_probs", target_probs), ("draft_probs", draft_probs)):
        if not bool(torch.all(torch.isfinite(dist) & (dist >= 0))):
            raise InvalidArgument(f"{name} holds negative or non-finite entries: pass probabilities, not logits.")
        if abs(float(dist.sum()) - 1.0) > 1e-6:
            raise InvalidArgument(f"{name} sums to {float(dist.sum())!r}, expected 1 (atol=1e-6). Did you pass logits?")
    if not 0 <= float(uniform) < 1:
        raise InvalidArgument(f"uniform={float(uniform)!r} must lie in [0, 1).")
    if draft_probs[token] <= 0:
        raise InvalidArgument(f"token={token!r} has draft probability 0: the draft could not have sampled it.")
    if float(uniform) * float(draft_probs[token]) < float(target_probs[token]):  # u < min(1, p/q), without dividing
        return True, None
    residual = (target_probs - draft_probs).clamp_min(0)
    if residual.sum() <= 0:
        raise InvalidArgument(
            "rejection has no residual mass (target_probs == draft_probs where it matters): "
            "this cannot happen for exact distributions; check the inputs."
        )
    return False, residual / residual.sum()


def residual_probs(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:  # [.., V] x2 -> [.., V]
    """Normalised ``(target_probs - draft_probs).clamp_min(0)``; rows without positive mass fall back to
    ``target_probs`` (docs/design.md: float rounding makes that reachable; never divide by zero)."""
    residual = (target_probs - draft_probs).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    return torch.where(mass > 0, residual / mass.clamp_min(torch.finfo(mass.dtype).tiny), target_probs)


def sample_from_uniforms(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:  # [B, V], [B] -> [B] int64
    """Inverse-CDF categorical draw: the smallest index ``i`` with ``uniform * total < cdf[i]``.

    Zero-probability entries can never be returned; a uniform so close to 1 that rounding runs past the last
    positive entry returns that last positive entry (never a trailing zero-probability index). Rows without
    positive mass return -1.
    """
    vocab = probs.shape[-1]
    cdf = _running_sum(probs)  # left to right, so a zero entry repeats the previous value exactly
    threshold = uniforms.to(cdf.dtype) * cdf[..., -1]
    index = _count_at_most(cdf, threshold)
    # rounding can carry u * total up to total: the count then runs past the last positive entry (rare path)
    over = index >= vocab
    if bool(over.any()):
        positive = probs[over] > 0
        last_positive = vocab - 1 - torch.flip(positive, dims=(-1,)).to(torch.int8).argmax(-1)
        index[over] = torch.where(positive.any(-1), last_positive, torch.full_like(last_positive, -1))
    return index


_COLUMNWISE = 64  # up to this vocabulary size a loop over columns beats torch's per-row kernels ~5x


def _running_sum(probs):  # [..., V] -> [..., V], summed strictly left to right
    if probs.shape[-1] > _COLUMNWISE:
        return torch.cumsum(probs, -1)
    cdf = probs.clone()
    for j in range(1, probs.shape[-1]):
        cdf[..., j] += cdf[..., j - 1]
    return cdf


def _count_at_most(cdf, threshold):  # [..., V], [...] -> [...] int64: how many cdf entries are <= threshold
    if cdf.shape[-1] > _COLUMNWISE:
        return (cdf <= threshold[..., None]).sum(-1)
    count = (cdf[..., 0] <= threshold).to(torch.int64)
    for j in range(1, cdf.shape[-1]):
        count += cdf[..., j] <= threshold
    return count
