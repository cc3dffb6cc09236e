"""A toy recurrent target: one state per request, advanced by every token it is fed, that no crop can undo.

``RecurrentToyModel`` is a :class:`~specverify.oracles.models.ToyModel` read as a recurrent model (an SSM, a linear
attention layer): its state after a prefix is the toy's 64-bit chain entry, ``state <- step(state, token)``, and its
logits are a function of that state alone (``head``), so its law over complete outputs is the toy model's and the
oracle enumerates it exactly through the same pure ``logits(prefixes)``. What differs is the cache a decoder gets:
``RecurrentBatchCache`` keeps the *current* state of each row, not one entry per position. Feeding tokens advances it;
a rollback cannot drop inputs from it. A decoder that verifies several tokens in one call must keep the state after
each verified position (``forward_states``) and put the row back to the state after its last kept token
(``restore``) — what an engine serving a recurrent target does with its per-position state checkpoints. ``crop`` to
anything but the current length raises, so a decoder written for a KV cache fails loudly here instead of passing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.oracles.models import ToyModel, Vocab
from specverify.oracles.toy_hash import _ROOT_KV, step_kv

__all__ = ["RecurrentToyModel", "RecurrentBatchCache", "recurrent_target", "is_recurrent"]


@dataclass(frozen=True, eq=False)
class RecurrentToyModel(ToyModel):
    """A toy target whose cache is a recurrent state (``RecurrentBatchCache``); its law is the toy model's."""

    recurrent: ClassVar[bool] = True

    def new_cache(self) -> None:
        raise NotImplementedError("a RecurrentToyModel serves the batch cache only (new_batch_cache)")

    def new_batch_cache(self, batch: int, capacity: int) -> "RecurrentBatchCache":
        return RecurrentBatchCache(self, batch, capacity)


def is_recurrent(model: object) -> bool:
    """Whether ``model`` is a recurrent target (its cache keeps one state per row: ``RecurrentBatchCache``)."""
    return bool(getattr(model, "recurrent", False))


class RecurrentBatchCache:
    """The recurrent state of B rows: ``state`` uint64 [B] after ``lengths`` [B] tokens fed (no tokens stored).

    ``forward(rows, tokens)`` feeds ``tokens`` [n, k] and returns the logits after each [n, k, V];
    ``forward_states`` also returns the state after each fed token [n, k] (the checkpoints a verification keeps);
    ``restore(rows, states, lengths)`` puts rows back to states they held; ``crop`` keeps the current length only.
    """

    def __init__(self, model: RecurrentToyModel, batch: int, capacity: int):
        check(isinstance(batch, int) and batch >= 1, f"batch={batch!r} must be an int >= 1.")
        check(isinstance(capacity, int) and capacity >= 1, f"capacity={capacity!r} must be an int >= 1.")
        self.model, self.capacity = model, capacity
        self.state = np.full(batch, _ROOT_KV, dtype=np.uint64)
        self.lengths = np.zeros(batch, dtype=np.int64)

    def forward_states(self, rows: np.ndarray, tokens: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
        """Feed ``tokens`` [n, k] to ``rows`` [n]: (logits after each [n, k, V], state after each uint64 [n, k])."""
        n, k = tokens.shape
        if int((self.lengths[rows] + k).max(initial=0)) > self.capacity:
            raise InvalidArgument(f"forward() past capacity={self.capacity!r}; open the cache with more room.")
        states = np.empty((n, k), dtype=np.uint64)
        state = self.state[rows]
        for j in range(k):
            state = step_kv(state, tokens[:, j])
            states[:, j] = state
        self.state[rows] = state
        self.lengths[rows] += k
        return self.model.head(states.reshape(-1)).reshape(n, k, -1), states

    def forward(self, rows: np.ndarray, tokens: np.ndarray) -> torch.Tensor:  # [n], [n, k] -> [n, k, V]
        return self.forward_states(rows, tokens)[0]

    def fill(self, rows: np.ndarray, tokens: np.ndarray) -> None:  # [n], [k]
        """Feed the same ``tokens`` (a prompt) to the empty rows ``rows``, the state computed once."""
        check(bool(np.all(self.lengths[rows] == 0)), "fill() feeds a prompt to empty rows only.")
        if rows.size == 0 or len(tokens) == 0:
            return
        _, states = self.forward_states(rows[:1], np.asarray(tokens, dtype=np.int64)[None, :])
        self.state[rows], self.lengths[rows] = states[0, -1], len(tokens)

    def restore(self, rows: np.ndarray, states: np.ndarray, lengths: np.ndarray) -> None:
        """Put ``rows`` back to ``states`` (each one it held after ``lengths`` tokens: a checkpoint)."""
        check(
            bool(np.all((lengths >= 0) & (lengths <= self.lengths[rows]))),
            "restore() lengths must lie in [0, fed length] per row: a checkpoint of the row's past.",
        )
        self.state[rows], self.lengths[rows] = states, lengths

    def crop(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        """A recurrent state cannot drop inputs: only the current length is accepted (a no-op)."""
        if not np.array_equal(np.asarray(lengths), self.lengths[rows]):
            raise InvalidArgument(
                "crop() on a recurrent state: the state after the rejected tokens cannot be cut back. Keep the "
                "state after each verified position (forward_states) and restore() the one after the last kept "
                "token; a decoder that does declares the 'recurrent' capability."
            )


def recurrent_target(vocab: Vocab, *, seed: int, eos_bias: float = 0.0) -> RecurrentToyModel:
    """A random recurrent target (the law of ``random_target(vocab, seed=seed, eos_bias=eos_bias)``)."""
    return RecurrentToyModel(vocab=vocab, seed=seed, eos_bias=eos_bias)
