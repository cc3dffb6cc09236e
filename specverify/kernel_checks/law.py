"""The exact law of one chain verification round, by enumeration, and the plumbing to run a case through a kernel.

A :class:`RoundCase` is one request: target rows [n+1, V], draft rows [n, V] (each the law its draft token is sampled
from). An *outcome* of the round is ``(tokens, num_accepted, status)``: the committed tokens without padding, the
number of accepted drafts and the status bits. :func:`exact_round_law` enumerates the draft tokens weighted by their
draft probabilities and applies the rule of ``specverify.kernels.layout`` with exact acceptance probabilities
``min(1, target_prob / draft_prob)`` and residual laws from ``sampling.residual_probs``, so it involves no uniform at
all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.kernels.layout import (
    PAD_TOKEN_ID,
    STATUS_INVALID_PROBS,
    STATUS_NO_TOKEN,
    ChainInputs,
    ChainResult,
    describe_status,
)
from specverify.sampling import residual_probs

__all__ = ["RoundCase", "RoundLaw", "exact_round_law", "case_inputs", "outcome_rows", "format_outcome"]

DRAFT_SUM_ATOL = 1e-6
_PAD_DRAFT_ID = -7  # draft ids of slots past n when a case is padded: reading one sets STATUS_BAD_DRAFT_TOKEN


@dataclass(frozen=True)
class RoundCase:
    """One request of a chain round: ``target_probs`` [n+1, V] and ``draft_probs`` [n, V].

    ``dtype`` is the dtype the kernel sees; the exact law is computed (in float64) from the values rounded to it.
    Draft rows must be laws (finite, non-negative, summing to 1 within 1e-6) unless the case holds an invalid row
    on purpose (NaN, ±inf or negative entries anywhere), whose exact law is an error flag with probability 1.
    """

    target_probs: np.ndarray
    draft_probs: np.ndarray
    dtype: torch.dtype = torch.float32
    name: str = ""
    _valid: bool = field(default=True, init=False, repr=False, compare=False)

    def __post_init__(self):
        target = _rounded(self.target_probs, self.dtype, "target_probs")
        draft = _rounded(self.draft_probs, self.dtype, "draft_probs")
        check(
            target.ndim == 2
            and draft.ndim == 2
            and target.shape[1] == draft.shape[1]
            and target.shape[0] == draft.shape[0] + 1
            and target.shape[1] >= 1,
            f"target_probs.shape={target.shape!r}, draft_probs.shape={draft.shape!r}: expected [n+1, V] and [n, V].",
        )
        valid = bool(np.all(np.isfinite(target) & (target >= 0)) and np.all(np.isfinite(draft) & (draft >= 0)))
        if valid and draft.shape[0]:
            sums = draft.sum(-1)
            check(
                bool(np.all(np.abs(sums - 1) <= DRAFT_SUM_ATOL)),
                f"draft_probs rows sum to {sums.tolist()!r}; expected 1 within {DRAFT_SUM_ATOL} after rounding to "
                f"{self.dtype}: a draft token must be sampled from its row. Normalise the rows (in float64).",
            )
        object.__setattr__(self, "target_probs", target)
        object.__setattr__(self, "draft_probs", draft)
        object.__setattr__(self, "_valid", valid)

    @property
    def num_draft_tokens(self) -> int:
        return self.draft_probs.shape[0]

    @property
    def vocab_size(self) -> int:
        return self.target_probs.shape[1]

    @property
    def valid(self) -> bool:
        return self._valid

    def draft_sequences(self) -> tuple[np.ndarray, np.ndarray]:
        """Every draft token sequence of positive draft probability: ids [S, n] int64 and weights [S] float64.

        An invalid case has no law to sample drafts from; it enumerates the argmax token of each (cleaned) row.
        """
        rows = self.draft_probs
        if not self.valid:
            clean = np.where(np.isfinite(rows) & (rows > 0), rows, 0.0)
            return clean.argmax(-1)[None].astype(np.int64), np.ones(1)
        ids, weights = [()], [1.0]
        for row in rows:
            support = np.flatnonzero(row > 0)
            ids = [prefix + (int(x),) for prefix in ids for x in support]
            weights = [w * row[x] for w in weights for x in support]
        return np.array(ids, dtype=np.int64).reshape(len(ids), rows.shape[0]), np.array(weights)


def _rounded(values, dtype, name) -> np.ndarray:
    try:
        tensor = torch.as_tensor(np.asarray(values, dtype=np.float64)).to(dtype)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"{name}={values!r} is not a numeric array; pass a float array [rows, V].") from error
    return tensor.to(torch.float64).numpy()


@dataclass(frozen=True)
class RoundLaw:
    """Outcomes of positive exact probability and their probabilities (float64, summing to 1 within 1e-12)."""

    outcomes: tuple
    probs: np.ndarray

    def as_dict(self) -> dict:
        return dict(zip(self.outcomes, self.probs.tolist()))


def _normalised(row: torch.Tensor) -> dict:
    mass = float(row.sum())
    return {} if mass <= 0 else {int(i): float(row[i]) / mass for i in torch.nonzero(row > 0).flatten().tolist()}


def exact_round_law(case: RoundCase) -> RoundLaw:
    """The exact law of one verification round of ``case``, by enumeration (no uniforms, no sampling).

    Examples
    --------
    >>> case = RoundCase([[0.5, 0.5], [0.25, 0.75]], [[1.0, 0.0]])
    >>> {key: round(prob, 9) for key, prob in exact_round_law(case).as_dict().items()}
    {((1,), 0, 0): 0.5, ((0, 0), 1, 0): 0.125, ((0, 1), 1, 0): 0.375}
    """
    if not case.valid:
        return RoundLaw((((), 0, STATUS_INVALID_PROBS),), np.ones(1))
    target = torch.as_tensor(case.target_probs)
    draft = torch.as_tensor(case.draft_probs)
    law: dict = {}

    def emit(prefix, accepted, row, weight):
        draws = _normalised(row)
        if not draws:
            law[(prefix, accepted, STATUS_NO_TOKEN)] = law.get((prefix, accepted, STATUS_NO_TOKEN), 0.0) + weight
        for token, prob in draws.items():
            key = (prefix + (token,), accepted, 0)
            law[key] = law.get(key, 0.0) + weight * prob

    def walk(k, prefix, weight):
        if k == case.num_draft_tokens:
            return emit(prefix, k, target[k], weight)
        residual = residual_probs(target[k], draft[k])
        reject = 0.0
        for x in torch.nonzero(draft[k] > 0).flatten().tolist():
            target_prob, draft_prob = float(target[k, x]), float(draft[k, x])
            accept = min(1.0, target_prob / draft_prob)
            if accept > 0:
                walk(k + 1, prefix + (x,), weight * draft_prob * accept)
            reject += draft_prob * (1.0 - accept)
        if reject > 0:
            emit(prefix, k, residual, weight * reject)

    walk(0, (), 1.0)
    outcomes = tuple(sorted(law, key=lambda o: (len(o[0]), o)))
    probs = np.array([law[o] for o in outcomes])
    total = math.fsum(probs.tolist())
    # draft rows rounded to float32 sum to 1 only within DRAFT_SUM_ATOL; the law is normalised over that
    check(
        abs(total - 1.0) <= 2 * DRAFT_SUM_ATOL * max(1, case.num_draft_tokens),
        f"exact round law sums to {total!r}; expected 1 (draft rows must be laws).",
    )
    return RoundLaw(outcomes, probs / total)


def case_inputs(
    case: RoundCase,
    draft_ids: np.ndarray,
    u_accept: np.ndarray,
    u_recover: np.ndarray,
    *,
    pad_to: int | None = None,
    device: str | torch.device = "cpu",
) -> ChainInputs:
    """A batch of B copies of ``case`` with draft ids [B, n], uniforms u_accept [B, n] and u_recover [B] (the same
    value in every recovery slot: one is consumed). ``pad_to`` = G > n adds slots past n filled with NaN rows,
    NaN uniforms and the out-of-range draft id -7, which a correct kernel never reads."""
    n, vocab = case.num_draft_tokens, case.vocab_size
    gamma = max(n, 1) if pad_to is None else pad_to
    check(
        isinstance(gamma, (int, np.integer)) and gamma >= max(n, 1),
        f"pad_to={pad_to!r} must be an int >= max(1, n) = {max(n, 1)} (n = the case's draft count); pass None "
        "for no padding.",
    )
    batch = draft_ids.shape[0]
    target = torch.full((gamma + 1, vocab), float("nan"), dtype=torch.float64)
    target[: n + 1] = torch.as_tensor(case.target_probs)
    draft = torch.full((gamma, vocab), float("nan"), dtype=torch.float64)
    draft[:n] = torch.as_tensor(case.draft_probs)
    ids = torch.full((batch, gamma), _PAD_DRAFT_ID, dtype=torch.int64)
    ids[:, :n] = torch.as_tensor(draft_ids)
    acc = torch.float64 if case.dtype == torch.float64 else torch.float32
    ua = torch.full((batch, gamma), float("nan"), dtype=acc)
    ua[:, :n] = torch.as_tensor(u_accept, dtype=acc)
    ur = torch.full((batch, gamma + 1), float("nan"), dtype=acc)
    ur[:, : n + 1] = torch.as_tensor(u_recover, dtype=acc)[:, None]
    return ChainInputs(
        ids,
        torch.full((batch,), n, dtype=torch.int64),
        draft.to(case.dtype).expand(batch, -1, -1).contiguous(),
        target.to(case.dtype).expand(batch, -1, -1).contiguous(),
        ua,
        ur,
    ).to(device)


def outcome_rows(result: ChainResult) -> np.ndarray:
    """[B, G+3] int64 rows ``tokens..., num_accepted, status``: one row per request, comparable with ``np.unique``."""
    return (
        torch.cat([result.tokens.long(), result.num_accepted.long()[:, None], result.status.long()[:, None]], dim=1)
        .cpu()
        .numpy()
    )


def row_of(outcome: tuple, num_draft_tokens: int) -> tuple:
    """The ``outcome_rows`` row of ``outcome = (tokens, num_accepted, status)`` for G = ``num_draft_tokens`` slots.

    Examples
    --------
    >>> row_of(((3, 1), 1, 0), 2), outcome_of(row_of(((3, 1), 1, 0), 2))
    ((3, 1, -1, 1, 0), ((3, 1), 1, 0))
    """
    tokens, accepted, status = outcome
    return tuple(tokens) + (PAD_TOKEN_ID,) * (num_draft_tokens + 1 - len(tokens)) + (accepted, status)


def outcome_of(row: Sequence[int]) -> tuple:
    """Inverse of :func:`row_of`."""
    *tokens, accepted, status = (int(v) for v in row)
    return tuple(t for t in tokens if t != PAD_TOKEN_ID), accepted, status


def format_outcome(outcome: tuple) -> str:
    """``'tokens=(3, 1) accepted=1 status=ok'``."""
    tokens, accepted, status = outcome
    return f"tokens={tokens!r} accepted={accepted} status={describe_status(status)}"
