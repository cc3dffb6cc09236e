"""Hypothesis strategies for kernel inputs (imports hypothesis; ``specverify.kernels`` loads this only on request).

Hypothesis draws the structure (batch, γ, vocabulary, ragged lengths, one kind per row and per uniform) and a seed;
numpy builds the arrays from it, so examples stay cheap while shrinking still simplifies the structure. The kinds
cover the corners where kernels go wrong: zero rows, 1e-12 masses, ties, one-hot rows, vocabularies that are not a
power of two, unnormalised targets, drafts equal to (or a hair above) the target so the residual has no mass, draft
ids of draft probability 0 or outside the vocabulary, NaN/±inf/negative rows, bad lengths, uniforms exactly 0, just
below 1, exactly at the acceptance ratio p/q, and at a CDF boundary.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

from specverify.kernels.layout import ChainInputs, compute_dtype

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


@st.composite
def chain_inputs(draw, *, max_batch: int = 16, max_gamma: int = 8, max_vocab: int = 257,
                 dtypes=(torch.float32,), invalid: bool = True, device="cpu") -> ChainInputs:
    """``ChainInputs`` for one ragged chain round (see the module docstring for the corners covered)."""
    batch = draw(st.integers(1, max_batch))
    gamma = draw(st.integers(1, max_gamma))
    vocab = draw(st.sampled_from([v for v in VOCABS if v <= max_vocab]) | st.integers(1, max_vocab))
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    acc = compute_dtype(dtype)
    below_one = torch.nextafter(torch.tensor(1.0, dtype=acc), torch.tensor(0.0, dtype=acc)).item()
    lengths = draw(st.lists(st.integers(0, gamma), min_size=batch, max_size=batch))
    if invalid and draw(st.booleans()):
        lengths[draw(st.integers(0, batch - 1))] = draw(st.sampled_from([-1, gamma + 1]))
    kinds = st.sampled_from(ROW_KINDS)
    target = np.zeros((batch, gamma + 1, vocab))
    draft = np.zeros((batch, gamma, vocab))
    ids = np.zeros((batch, gamma), dtype=np.int64)
    u_accept = np.zeros((batch, gamma))
    u_recover = np.zeros((batch, gamma + 1))
    for r in range(batch):
        t_kind, d_kind, relation = draw(kinds), draw(kinds), draw(st.sampled_from(DRAFT_RELATIONS))
        id_kind = draw(st.sampled_from(ID_KINDS if invalid else ID_KINDS[:4]))
        ua_kind, ur_kind = draw(st.sampled_from(UNIFORM_KINDS)), draw(st.sampled_from(UNIFORM_KINDS))
        corruption = draw(st.sampled_from(CORRUPTIONS if invalid else ("none",)))
        for k in range(gamma + 1):
            target[r, k] = _row(rng, t_kind if rng.random() < 0.8 else str(rng.choice(ROW_KINDS)), vocab)
            u_recover[r, k] = _uniform(rng, ur_kind, target[r, k], 0.0, below_one)
            if k == gamma:
                break
            draft[r, k] = _draft_row(rng, relation, d_kind, target[r, k])
            if relation == "above":
                target[r, k] = target[r, k] * (1 - 1e-6)
            ids[r, k] = _draft_id(rng, id_kind if rng.random() < 0.5 else "sampled", draft[r, k])
            x = min(max(ids[r, k], 0), vocab - 1)
            ratio = target[r, k, x] / draft[r, k, x] if draft[r, k, x] > 0 else 0.0
            u_accept[r, k] = _uniform(rng, ua_kind, draft[r, k], ratio, below_one)
        if corruption != "none":
            where = rng.integers(2 * gamma + 1)
            if where <= gamma:
                target[r, where] = _corrupt(rng, corruption, target[r, where])
            else:
                draft[r, where - gamma - 1] = _corrupt(rng, corruption, draft[r, where - gamma - 1])
    return ChainInputs(torch.as_tensor(ids), torch.as_tensor(lengths, dtype=torch.int64),
                       torch.as_tensor(draft).to(dtype), torch.as_tensor(target).to(dtype),
                       torch.as_tensor(u_accept).to(acc), torch.as_tensor(u_recover).to(acc)).to(device)


@st.composite
def categorical_inputs(draw, *, max_batch: int = 32, max_vocab: int = 257, dtypes=(torch.float32,),
                       invalid: bool = True, device="cpu"):
    """``(probs [B, V], uniforms [B])`` with the row and uniform kinds of :func:`chain_inputs`."""
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
