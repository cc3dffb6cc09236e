"""Hypothesis strategies for kernel inputs (imports hypothesis; ``specverify.kernel_checks`` never re-exports it).

Hypothesis draws the structure (batch, γ, vocabulary, ragged lengths, one kind per row and per uniform) and a seed;
numpy builds the arrays from it, so examples stay cheap while shrinking still simplifies the structure. The kinds
cover the corners where kernels go wrong: zero rows, 1e-12 masses, ties, one-hot rows, vocabularies that are not a
power of two, unnormalised targets, drafts equal to (or a hair above) the target so the residual has no mass, draft
ids of draft probability 0 or outside the vocabulary, NaN/±inf/negative rows, bad lengths, uniforms exactly 0, just
below 1, exactly at the acceptance ratio target_prob / draft_prob, and at a CDF boundary.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from hypothesis import strategies as st

from specverify.errors import check
from specverify.kernels.layout import PROB_DTYPES, ChainInputs, compute_dtype

__all__ = ["chain_inputs", "categorical_inputs", "ROW_KINDS", "UNIFORM_KINDS"]

ROW_KINDS = ("dense", "sparse", "tiny", "one_hot", "ties", "zero", "half")
DRAFT_RELATIONS = ("independent", "independent", "copy", "above", "near")
ID_KINDS = ("sampled", "sampled", "sampled", "any", "out_of_range")
UNIFORM_KINDS = ("random", "random", "zero", "below_one", "ratio", "boundary")
CORRUPTIONS = ("none",) * 6 + ("nan", "negative", "inf")
VOCABS = (1, 2, 3, 5, 7, 17, 31, 33, 100, 127, 257)


def _row(rng, kind: str, vocab: int) -> np.ndarray:  # float64 [V], non-negative
    if kind == "zero":
        return np.zeros(vocab)
    if kind == "one_hot":
        return np.eye(vocab)[rng.integers(vocab)]
    if kind == "ties":
        support = rng.random(vocab) < 0.5
        support[rng.integers(vocab)] = True
        return support / support.sum()
    row = rng.dirichlet(np.ones(vocab))
    if kind == "sparse":
        row = np.where(rng.random(vocab) < 0.5, 0.0, row)
        row[rng.integers(vocab)] += 0.5
    if kind == "tiny":
        row = np.where(rng.random(vocab) < 0.5, 1e-12, row)
    row = row / row.sum()
    return row * 0.5 if kind == "half" else row  # "half": a target row need not sum to 1


def _draft_row(rng, relation: str, kind: str, target: np.ndarray) -> np.ndarray:
    if relation == "copy" and target.sum() > 0:
        return target / target.sum()
    if relation == "above" and target.sum() > 0:  # draft >= target everywhere: a rejection leaves no residual mass
        return target / target.sum()
    if relation == "near" and target.sum() > 0:
        row = target / target.sum() + 1e-7 * rng.random(target.size)
        return row / row.sum()
    row = _row(rng, kind, target.size)
    return row / row.sum() if row.sum() > 0 else row


def _corrupt(rng, kind: str, row: np.ndarray) -> np.ndarray:
    if kind != "none":
        row = row.copy()
        row[rng.integers(row.size)] = {"nan": np.nan, "negative": -1e-3, "inf": np.inf}[kind]
    return row


def _draft_id(rng, kind: str, row: np.ndarray) -> int:
    vocab = row.size
    if kind == "out_of_range":
        return int(rng.choice([-1, vocab, vocab + 5]))
    if kind == "any" or not row.sum() > 0:
        return int(rng.integers(vocab))
    return int(rng.choice(vocab, p=row / row.sum()))


def _uniform(rng, kind: str, row: np.ndarray, ratio: float, below_one: float) -> float:
    if kind == "zero":
        return 0.0
    if kind == "below_one":
        return below_one
    if kind == "ratio" and 0 < ratio < 1:
        return ratio
    if kind == "boundary" and row.sum() > 0:
        cdf = np.cumsum(row) / row.sum()
        return float(min(cdf[rng.integers(row.size)], below_one))
    return float(rng.random())


def _check_size(name: str, value, low: int = 1) -> None:
    check(
        isinstance(value, int) and not isinstance(value, bool) and value >= low,
        f"{name}={value!r} must be an int >= {low}; pass a small positive bound.",
    )


def _check_dtypes(dtypes) -> tuple:
    dtypes = tuple(dtypes)
    check(
        bool(dtypes) and all(d in PROB_DTYPES for d in dtypes),
        f"dtypes={dtypes!r} must be a non-empty sequence of {[str(d) for d in PROB_DTYPES]}.",
    )
    return dtypes


def chain_inputs(
    *,
    max_batch: int = 16,
    max_num_draft_tokens: int = 8,
    max_vocab: int = 257,
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    invalid: bool = True,
    device: str | torch.device = "cpu",
) -> st.SearchStrategy[ChainInputs]:
    """``ChainInputs`` for one ragged chain round (see the module docstring for the corners covered), with up to
    ``max_batch`` requests and ``max_num_draft_tokens`` draft slots G per request."""
    _check_size("max_batch", max_batch)
    _check_size("max_num_draft_tokens", max_num_draft_tokens)
    _check_size("max_vocab", max_vocab)
    return _chain_inputs(max_batch, max_num_draft_tokens, max_vocab, _check_dtypes(dtypes), bool(invalid), device)


@st.composite
def _chain_inputs(draw, max_batch, max_num_draft_tokens, max_vocab, dtypes, invalid, device) -> ChainInputs:
    batch = draw(st.integers(1, max_batch))
    num_slots = draw(st.integers(1, max_num_draft_tokens))
    vocab = draw(st.sampled_from([v for v in VOCABS if v <= max_vocab]) | st.integers(1, max_vocab))
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    acc = compute_dtype(dtype)
    below_one = torch.nextafter(torch.tensor(1.0, dtype=acc), torch.tensor(0.0, dtype=acc)).item()
    lengths = draw(st.lists(st.integers(0, num_slots), min_size=batch, max_size=batch))
    if invalid and draw(st.booleans()):
        lengths[draw(st.integers(0, batch - 1))] = draw(st.sampled_from([-1, num_slots + 1]))
    arrays = _Arrays(batch, num_slots, vocab)
    for r in range(batch):
        _request(draw, rng, arrays, r, invalid, below_one)
    return ChainInputs(
        torch.as_tensor(arrays.ids),
        torch.as_tensor(lengths, dtype=torch.int64),
        torch.as_tensor(arrays.draft).to(dtype),
        torch.as_tensor(arrays.target).to(dtype),
        torch.as_tensor(arrays.u_accept).to(acc),
        torch.as_tensor(arrays.u_recover).to(acc),
    ).to(device)


class _Arrays:
    """The float64/int64 arrays of one chain round under construction."""

    def __init__(self, batch: int, num_slots: int, vocab: int):
        self.target = np.zeros((batch, num_slots + 1, vocab))
        self.draft = np.zeros((batch, num_slots, vocab))
        self.ids = np.zeros((batch, num_slots), dtype=np.int64)
        self.u_accept = np.zeros((batch, num_slots))
        self.u_recover = np.zeros((batch, num_slots + 1))


def _request(draw, rng, arrays: _Arrays, r: int, invalid: bool, below_one: float) -> None:
    # request r: every slot, then at most one corrupted row (the draws keep the order hypothesis shrinks by)
    target, draft = arrays.target, arrays.draft
    num_slots, vocab = draft.shape[1], draft.shape[2]
    kinds = st.sampled_from(ROW_KINDS)
    t_kind, d_kind, relation = draw(kinds), draw(kinds), draw(st.sampled_from(DRAFT_RELATIONS))
    id_kind = draw(st.sampled_from(ID_KINDS if invalid else ID_KINDS[:4]))
    ua_kind, ur_kind = draw(st.sampled_from(UNIFORM_KINDS)), draw(st.sampled_from(UNIFORM_KINDS))
    corruption = draw(st.sampled_from(CORRUPTIONS if invalid else ("none",)))
    for k in range(num_slots + 1):
        target[r, k] = _row(rng, t_kind if rng.random() < 0.8 else str(rng.choice(ROW_KINDS)), vocab)
        arrays.u_recover[r, k] = _uniform(rng, ur_kind, target[r, k], 0.0, below_one)
        if k == num_slots:
            break
        draft[r, k] = _draft_row(rng, relation, d_kind, target[r, k])
        if relation == "above":
            target[r, k] = target[r, k] * (1 - 1e-6)
        arrays.ids[r, k] = _draft_id(rng, id_kind if rng.random() < 0.5 else "sampled", draft[r, k])
        x = min(max(arrays.ids[r, k], 0), vocab - 1)
        ratio = target[r, k, x] / draft[r, k, x] if draft[r, k, x] > 0 else 0.0
        arrays.u_accept[r, k] = _uniform(rng, ua_kind, draft[r, k], ratio, below_one)
    if corruption != "none":
        where = rng.integers(2 * num_slots + 1)
        if where <= num_slots:
            target[r, where] = _corrupt(rng, corruption, target[r, where])
        else:
            draft[r, where - num_slots - 1] = _corrupt(rng, corruption, draft[r, where - num_slots - 1])


def categorical_inputs(
    *,
    max_batch: int = 32,
    max_vocab: int = 257,
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    invalid: bool = True,
    device: str | torch.device = "cpu",
) -> st.SearchStrategy[tuple[torch.Tensor, torch.Tensor]]:
    """``(probs [B, V], uniforms [B])`` with the row and uniform kinds of :func:`chain_inputs`."""
    _check_size("max_batch", max_batch)
    _check_size("max_vocab", max_vocab)
    return _categorical_inputs(max_batch, max_vocab, _check_dtypes(dtypes), bool(invalid), device)


@st.composite
def _categorical_inputs(draw, max_batch, max_vocab, dtypes, invalid, device) -> tuple[torch.Tensor, torch.Tensor]:
    batch = draw(st.integers(1, max_batch))
    vocab = draw(st.sampled_from([v for v in VOCABS if v <= max_vocab]) | st.integers(1, max_vocab))
    dtype = draw(st.sampled_from(dtypes))
    acc = compute_dtype(dtype)
    below_one = torch.nextafter(torch.tensor(1.0, dtype=acc), torch.tensor(0.0, dtype=acc)).item()
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    probs = np.zeros((batch, vocab))
    uniforms = np.zeros(batch)
    for r in range(batch):
        probs[r] = _row(rng, draw(st.sampled_from(ROW_KINDS)), vocab)
        uniforms[r] = _uniform(rng, draw(st.sampled_from(UNIFORM_KINDS)), probs[r], 0.0, below_one)
        probs[r] = _corrupt(rng, draw(st.sampled_from(CORRUPTIONS if invalid else ("none",))), probs[r])
    return torch.as_tensor(probs).to(dtype).to(device), torch.as_tensor(uniforms).to(acc).to(device)
