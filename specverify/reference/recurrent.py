"""A toy recurrent (SSM-like) model and chain speculative decoding over it with state replay (seed: Recurrent state
replay).

``ToySSM`` keeps one state vector per request: ``h <- gate(x) * h + update(x)`` for each token ``x``, where
``(gate, update)`` are the token's *projected inputs*; logits are a readout of ``h``. Order matters (the gates
differ per token), so a replay out of order, or one that lets a rejected token in, leaves another state.

``RecurrentCache`` is the state transaction: the committed state never holds a provisional token. Drafting or
verifying runs a scan over a *copy* and caches the projected inputs of the branch; ``commit(accepted, extra)``
replays only the first ``accepted`` cached inputs, in order, then the extra (recovered / bonus) tokens, into the
committed state; ``abort`` drops the branch. ``RecurrentDecoder`` runs exact chain speculative sampling with a
``ToySSM`` target and draft, both through such caches.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from specverify.errors import check
from specverify.params import SamplingParams
from specverify.protocol import Completion, Request
from specverify.sampling import Purpose, keyed_uniforms, process_logits, residual_probs, sample_from_uniforms

__all__ = ["ToySSM", "RecurrentCache", "RecurrentDecoder"]


class ToySSM:
    """A diagonal linear recurrence over ``vocab`` with state dimension ``dim`` (float64).

    Examples
    --------
    >>> from specverify.oracles import make_vocab
    >>> ssm = ToySSM(make_vocab(4), dim=3, seed=0)
    >>> h = ssm.replay(ssm.initial_state(), *ssm.project([0, 2]))
    >>> bool(np.array_equal(h, ssm.state_after([0, 2])))
    True
    """

    def __init__(self, vocab, *, dim: int = 4, seed: int = 0, scale: float = 2.0):
        check(hasattr(vocab, "size") and hasattr(vocab, "eos_token_id"), f"vocab={vocab!r} must be a Vocab.")
        check(isinstance(dim, int) and dim >= 1, f"dim={dim!r} must be an int >= 1.")
        check(isinstance(seed, int) and seed >= 0, f"seed={seed!r} must be an int >= 0.")
        rng = np.random.default_rng(seed)
        self.vocab, self.dim, self.seed = vocab, dim, seed
        self.gates = rng.uniform(0.2, 0.95, (vocab.size, dim))  # [V, D], per-token decay
        self.updates = rng.normal(0.0, 1.0, (vocab.size, dim))  # [V, D]
        self.readout = rng.normal(0.0, scale, (dim, vocab.size))  # [D, V]
        self.bias = rng.normal(0.0, 0.5, vocab.size)

    def initial_state(self) -> np.ndarray:  # -> [D]
        return np.zeros(self.dim)

    def project(self, tokens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:  # [k] -> [k, D], [k, D]
        """The projected inputs of ``tokens`` (what a speculative branch caches)."""
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        self.vocab.check_tokens(ids.tolist())
        return self.gates[ids], self.updates[ids]

    @staticmethod
    def replay(state, gates, updates) -> np.ndarray:  # [D], [k, D], [k, D] -> [D]
        """Apply projected inputs in order (the one update rule; ``scan`` and from-scratch use it too)."""
        for gate, update in zip(gates, updates):
            state = gate * state + update
        return state

    def scan(self, state, gates, updates) -> np.ndarray:  # [D], [k, D], [k, D] -> [k, D] states after each
        out = np.empty((len(gates), self.dim))
        for i in range(len(gates)):
            state = self.replay(state, gates[i : i + 1], updates[i : i + 1])
            out[i] = state
        return out

    def head(self, states) -> torch.Tensor:  # [k, D] -> logits float64 [k, V]
        return torch.from_numpy(np.atleast_2d(states) @ self.readout + self.bias)

    def state_after(self, tokens: Sequence[int]) -> np.ndarray:
        """Recompute from scratch: the state after ``tokens`` from the initial state."""
        if len(tokens) == 0:
            return self.initial_state()
        return self.replay(self.initial_state(), *self.project(tokens))

    def logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:  # -> [B, V], pure (the oracle's API)
        check(len(prefixes) > 0, "prefixes must hold at least one history.")
        return self.head(np.stack([self.state_after(prefix) for prefix in prefixes]))


class RecurrentCache:
    """One request's recurrent state as a transaction: committed ``state`` after ``tokens``, plus the projected
    inputs of the open branch (``extend``). Nothing provisional ever reaches ``state``."""

    def __init__(self, model: ToySSM, tokens: Sequence[int] = ()):
        self.model = model
        self.tokens: tuple[int, ...] = tuple(int(t) for t in tokens)
        self.state = model.state_after(self.tokens)
        self.branch: list[int] = []
        self._gates = np.zeros((0, model.dim))
        self._updates = np.zeros((0, model.dim))

    def logits(self) -> torch.Tensor:  # -> [1, V], after the committed tokens
        return self.model.head(self.state)

    def extend(self, tokens: Sequence[int]) -> torch.Tensor:  # [k] -> logits [k, V] after each branch token
        """Append ``tokens`` to the branch: project them once, cache the inputs, scan a copy of the state."""
        gates, updates = self.model.project(tokens)
        start = self.model.replay(self.state.copy(), self._gates, self._updates)
        self.branch += [int(t) for t in tokens]
        self._gates, self._updates = np.concatenate([self._gates, gates]), np.concatenate([self._updates, updates])
        return self.model.head(self.model.scan(start, gates, updates))

    def commit(self, accepted: int, extra: Sequence[int] = ()) -> None:
        """Replay the cached inputs of the first ``accepted`` branch tokens, in order, then ``extra`` tokens, into
        the committed state; drop the rest of the branch."""
        check(
            isinstance(accepted, int) and 0 <= accepted <= len(self.branch),
            f"accepted={accepted!r} must lie in [0, {len(self.branch)}] (the branch length).",
        )
        self.state = self.model.replay(self.state, self._gates[:accepted], self._updates[:accepted])
        if len(extra):
            self.state = self.model.replay(self.state, *self.model.project(extra))
        self.tokens += tuple(self.branch[:accepted]) + tuple(int(t) for t in extra)
        self.abort()

    def abort(self) -> None:
        """Drop the branch (rejected or failed): the committed state is untouched."""
        self.branch = []
        self._gates, self._updates = self._gates[:0], self._updates[:0]


class RecurrentDecoder:
    """Exact chain speculative sampling over ``ToySSM`` target and draft with recurrent state replay.

    Honours ``temperature``, ``top_k``, ``top_p``, ``min_p``, ``bad_token_ids``, ``max_tokens`` and EOS (processors
    without history). Draws are keyed by (seed, position, purpose) as in the other reference decoders.
    """

    capabilities = frozenset(
        {"temperature", "top_k", "top_p", "min_p", "bad_token_ids", "max_tokens", "seed", "stream", "accepted"}
    )
    cache_class = RecurrentCache

    def __init__(self, target: ToySSM, draft: ToySSM, *, entropy=None):
        check(target.vocab == draft.vocab, "target and draft must share one vocabulary.")
        self.target, self.draft, self.vocab = target, draft, target.vocab
        self._rng = np.random.default_rng(entropy)

    def __call__(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for i, request in enumerate(requests):
            check(isinstance(request, Request), f"requests[{i}]={request!r} must be a specverify Request.")
            check(
                request.params.active() <= self.capabilities | {"max_tokens"},
                f"requests[{i}].params use {sorted(request.params.active() - self.capabilities)}, which "
                "RecurrentDecoder does not honour.",
            )
            seed = request.seed if request.seed is not None else int(self._rng.integers(0, 2**63))
            out.append(self.decode(request, seed))
        return out

    def decode(self, request: Request, seed: int) -> Completion:
        target = self.cache_class(self.target, request.prompt)
        draft = self.cache_class(self.draft, request.prompt)
        generated, stream, accepted, reason = [], [], [], None
        while reason is None:
            before = len(generated)
            reason, num_accepted = self.round(request, seed, target, draft, generated)
            stream.append(tuple(generated[before:]))
            accepted.append(num_accepted)
        return Completion(
            tokens=tuple(generated),
            finish_reason=reason,
            stream=tuple(c for c in stream if c),
            accepted=tuple(accepted),
        )

    def _law(self, logits, params: SamplingParams, num_generated: int) -> torch.Tensor:  # [k, V] -> [k, V]
        return process_logits(logits, params, num_generated=num_generated, eos_token_id=self.vocab.eos_token_id)

    def _finish(self, params, generated) -> Optional[str]:
        if generated[-1] == self.vocab.eos_token_id and not params.ignore_eos:
            return "eos"
        return "length" if len(generated) >= params.max_tokens else None

    def round(self, request, seed, target, draft, generated) -> tuple[Optional[str], int]:
        """One round; appends the committed tokens to ``generated``; returns (finish reason or None, accepted)."""
        params, n = request.params, len(generated)
        num_draft_tokens = min(request.num_draft_tokens, params.max_tokens - n)
        positions = np.arange(n, n + num_draft_tokens + 1)
        u = {
            purpose: keyed_uniforms(seed, positions, purpose)
            for purpose in (Purpose.DRAFT, Purpose.ACCEPT, Purpose.TARGET)
        }
        drafts, rows = self._propose(params, n, num_draft_tokens, draft, u[Purpose.DRAFT])
        target_rows = self._law(
            torch.cat([target.logits(), target.extend(drafts)]) if drafts else target.logits(),
            params,
            n + np.arange(len(drafts) + 1),
        )
        committed, extra, reason = self._accept(params, generated, drafts, rows, target_rows, u)
        for cache in (target, draft):  # the transaction: replay only what was accepted, in order
            cached = min(committed, len(cache.branch))
            cache.commit(cached, drafts[cached:committed] + extra)
        return reason, committed

    def _propose(self, params, n, num_draft_tokens, draft, uniforms) -> tuple[list, list]:
        drafts, rows, logits = [], [], draft.logits()
        for k in range(num_draft_tokens):
            draft_probs = self._law(logits, params, n + k)  # [1, V]
            token = int(sample_from_uniforms(draft_probs, torch.from_numpy(uniforms[k : k + 1]))[0])
            if token < 0:
                break
            drafts.append(token)
            rows.append(draft_probs[0])
            if token == self.vocab.eos_token_id or k == num_draft_tokens - 1:
                break
            logits = draft.extend([token])
        return drafts, rows

    def _accept(self, params, generated, drafts, rows, target_rows, u) -> tuple[int, list, Optional[str]]:
        """Walk the drafts; returns (accepted drafts committed, extra tokens committed, finish reason)."""
        for k, target_probs in enumerate(target_rows):
            if float(target_probs.sum()) <= 0:
                return k, [], "no_token"
            probs = target_probs  # bonus (or no draft here): the target row itself
            if k < len(drafts):
                x, draft_probs = drafts[k], rows[k]
                if float(u[Purpose.ACCEPT][k]) * float(draft_probs[x]) < float(target_probs[x]):
                    generated.append(x)
                    reason = self._finish(params, generated)
                    if reason is not None:
                        return k + 1, [], reason
                    continue
                probs = residual_probs(target_probs, draft_probs)  # the recovered token's law
            uniform = torch.from_numpy(u[Purpose.TARGET][k : k + 1])
            token = int(sample_from_uniforms(probs[None], uniform)[0])
            generated.append(token)
            return k, [token], self._finish(params, generated)
        raise AssertionError("unreachable: the last target row always commits a token")
