"""One round's exact law under each verification rule, by enumeration over draft paths (``acceptance_rounds``).

A round starts from committed tokens ``g``. Its law maps ``(next, accepted, tokens, verified)`` to a probability,
where ``next`` is ``("next", g')`` (the next round's start) or ``("done", outcome)``. Rows are the canonical
pipeline's (``next_token_probs``) on the target and on the draft family's raw proposal logits; nothing here is
shared with the decoders.

Rules:

- **chain / tree** (:func:`tree_round`; a chain is a tree with one child per depth): at a node with target law p
  and draft law q, its children are verified in order. i.i.d. children: child i is accepted with
  min(1, p_i(x)/q(x)), else p_{i+1} = residual(p_i, q). Children drawn without replacement: the same with q_i
  renormalised without the children drawn before. Top-k children (point masses): a target draw y ~ p follows the
  child equal to y, else y is emitted. After every child is rejected the node emits a draw from the last residual.
- **block** (:func:`block_round`; Sun et al. 2024, arXiv 2403.10444, Algorithm 2): with w_0 = 1 and
  w_i = min(1, w_{i-1} p_i(x_i)/q_i(x_i)), Z_i = Σ_x [w_i p_{i+1}(x) - q_{i+1}(x)]_+, h_i = Z_i / (Z_i + 1 - w_i)
  (h = 1 where that is 0/0) and h_L = w_L, independent coins; τ is the last i whose coin is below h_i (0 if none).
  Drafts x_1..x_τ are accepted, then a token from [w_τ p_{τ+1} - q_{τ+1}]_+ normalised (τ < L) or from p_{L+1}.
  The block ends early at a draft that finishes the request, a target row without mass or a draft row without
  mass (L ≤ γ).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from specverify.oracles.drafts import draft_family
from specverify.oracles.law import first_finish
from specverify.params import SamplingParams
from specverify.sampling import next_token_probs, process_logits

__all__ = ["RoundContext", "tree_round", "block_round", "node_law", "residual"]


_ROWS: dict = {}  # (target, draft, prompt, params) -> the row caches of RoundContext: models hash by identity
_MAX_SHAPES = 16


def _shared_rows(target, draft, prompt, params) -> tuple:
    """The row caches ``(target rows, draft rows, finishes)`` of one (model pair, prompt, params): the rows do not
    depend on γ or the rule, so every law of that request shape in a process (the first round's, every round's,
    after a prefill) reads the same rows. Fresh ones where the params do not hash (a grammar holds dicts)."""
    key = (target, draft, prompt, params)
    try:
        hash(key)
    except TypeError:
        return {}, {}, {}
    if key not in _ROWS:
        if len(_ROWS) >= _MAX_SHAPES:
            _ROWS.pop(next(iter(_ROWS)))
        _ROWS[key] = ({}, {}, {})
    return _ROWS[key]


class RoundContext:
    """Rows of the target and the draft along committed tokens and draft paths, cached for one request shape.

    A row missing from the cache is computed together with its siblings (the other children of its parent that no
    round has finished): one ``logits`` call and one batched pipeline for up to V rows, where the enumeration asks
    for them one at a time. Each row is the one ``next_token_probs`` gives for its history alone (the pipeline acts
    on each row by itself; ``tests/oracles/test_round_rules.py`` checks them bit for bit)."""

    def __init__(self, target, draft, prompt: tuple, params: SamplingParams, gamma: int):
        self.target, self.draft, self.prompt, self.params, self.gamma = target, draft, prompt, params, gamma
        self.vocab = target.vocab
        self.family = draft_family(draft)
        self._target, self._draft, self._finish = _shared_rows(target, draft, prompt, params)

    def _probs(self, logits, generated: tuple) -> np.ndarray:
        return next_token_probs(
            logits, self.params, prompt=self.prompt, generated=generated, eos_token_id=self.vocab.eos_token_id
        ).numpy()

    def _batch_probs(self, logits, generated: list) -> np.ndarray:  # [B, V], B histories of one length -> [B, V]
        """``_probs`` of each row at once: the same penalty history, EOS mask and processors per row."""
        size, prompt, rows = self.vocab.size, self.prompt, len(generated)
        seen = torch.zeros((rows, size), dtype=torch.bool)
        seen[:, list(prompt)] = True
        counts = torch.zeros((rows, size), dtype=torch.float64)
        if generated[0]:
            tokens = torch.tensor(generated, dtype=torch.long)  # [B, L]: one length per batch (siblings)
            seen.scatter_(1, tokens, True)
            counts.scatter_add_(1, tokens, torch.ones(tokens.shape, dtype=torch.float64))  # whole numbers: exact
        return process_logits(
            logits,
            self.params,
            seen=seen,
            counts=counts,
            num_generated=len(generated[0]),
            eos_token_id=self.vocab.eos_token_id,
            histories=[prompt + g for g in generated],
        ).numpy()

    def _siblings(self, generated: tuple, known: dict) -> list:
        """``generated`` first, then its parent's other unfinished children not in ``known`` (none with a grammar,
        whose state forbids some of them)."""
        if not generated or self.params.grammar is not None:
            return [generated]
        head, last = generated[:-1], generated[-1]
        others = [head + (t,) for t in range(self.vocab.size) if t != last]
        return [generated] + [g for g in others if g not in known and self.finish(g) is None]

    def _fill(self, model, known: dict, generated: tuple) -> None:
        todo = self._siblings(generated, known)
        if len(todo) == 1:
            known[generated] = self._probs(model.logits([self.prompt + generated])[0], generated)
            return
        rows = self._batch_probs(model.logits([self.prompt + g for g in todo]), todo)
        known.update(zip(todo, rows))

    def target_row(self, generated: tuple) -> np.ndarray:  # -> [V]
        if generated not in self._target:
            self._fill(self.target, self._target, generated)
        return self._target[generated]

    def draft_row(self, committed: tuple, drafted: tuple) -> np.ndarray:  # -> [V]
        # an AR model's row is a function of the history alone, wherever the round split it into committed tokens
        # and drafts (a draft family's proposal may not be)
        if not hasattr(self.draft, "proposal_logits"):  # an AR toy (or checkpoint) model: with its siblings
            key = committed + drafted
            if key not in self._draft:
                self._fill(self.draft, self._draft, key)
            return self._draft[key]
        key = (committed, drafted)
        if key not in self._draft:
            logits = self.draft.proposal_logits(self.prompt + committed, drafted)
            if getattr(self.draft, "unprocessed", False):  # proposed whatever the processors (ArgmaxDraft)
                self._draft[key] = torch.softmax(logits.to(torch.float64), -1).numpy()
            else:
                self._draft[key] = self._probs(logits, committed + drafted)
        return self._draft[key]

    def finish(self, generated: tuple) -> tuple | None:
        """The outcome when the last token of ``generated`` finishes the request, else None."""
        if generated not in self._finish:
            hit = first_finish(self.vocab, generated, self.params)
            self._finish[generated] = None if hit is None else (generated, hit[1])
        return self._finish[generated]

    def after(self, generated: tuple) -> tuple:
        done = self.finish(generated)
        return ("done", done) if done else ("next", generated)


def residual(target_probs: np.ndarray, draft_probs: np.ndarray) -> np.ndarray:
    """Normalised [target - draft]_+, or ``target_probs`` where it has no mass (``sampling.residual_probs``)."""
    res = np.maximum(target_probs - draft_probs, 0.0)
    total = res.sum()
    return res / total if total > 0 else target_probs


def node_law(target_probs, draft_probs, children: int, siblings: str) -> tuple[np.ndarray, np.ndarray]:
    """(P(the node's accepted child is token t), P(the node emits token y)): [V] each, summing to 1 together."""
    descend = np.zeros_like(target_probs)
    emit = np.zeros_like(target_probs)
    if siblings == "top-k":
        order = sorted(np.flatnonzero(draft_probs > 0).tolist(), key=lambda t: (-draft_probs[t], t))[:children]
        descend[order] = target_probs[order]
        emit[:] = target_probs
        emit[order] = 0.0
        return descend, emit
    states = [(1.0, target_probs, draft_probs)]
    for _ in range(children):
        nxt = []
        for reach, p_i, q_i in states:
            if q_i.sum() <= 0:  # nothing left to draw (without replacement): emit from the residual so far
                emit += reach * p_i
                continue
            overlap = np.minimum(p_i, q_i)
            descend += reach * overlap
            p_next = residual(p_i, q_i)
            if siblings == "iid":
                nxt.append((reach * max(0.0, 1.0 - overlap.sum()), p_next, q_i))
                continue
            rejected = np.maximum(q_i - p_i, 0.0)
            for x in np.flatnonzero(rejected > 0).tolist():
                q_next = q_i.copy()
                q_next[x] = 0.0
                total = q_next.sum()
                nxt.append((reach * rejected[x], p_next, q_next / total if total > 0 else q_next))
        states = nxt
    for reach, p_i, _ in states:
        emit += reach * p_i
    return descend, emit


def _emit(ctx, out, g, x, weights, mass, verified) -> None:
    d = len(x)
    for y in np.flatnonzero(weights > 0).tolist():
        out[(ctx.after(g + x + (y,)), d, d + 1, verified)] += mass * float(weights[y])


def tree_round(ctx: RoundContext, g: tuple, shape: tuple, siblings: str) -> dict:
    """The law of one round from committed ``g`` for a tree of ``shape`` (chain: ``(1,) * γ``, ``"iid"``)."""
    out: dict = defaultdict(float)
    stack = [((), 1.0)]
    while stack:
        x, mass = stack.pop()
        d = len(x)
        p = ctx.target_row(g + x)
        if p.sum() <= 0:
            out[(("done", (g + x, "no_token")), d, d, d)] += mass
            continue
        q = ctx.draft_row(g, x) if d < len(shape) else None
        if q is None or q.sum() <= 0:  # no draft at this depth: a plain target draw (bonus)
            _emit(ctx, out, g, x, p, mass, d)
            continue
        descend, emit = node_law(p, q, shape[d], siblings)
        for t in np.flatnonzero(descend > 0).tolist():
            step = g + x + (t,)
            if ctx.finish(step):
                out[(ctx.after(step), d + 1, d + 1, d + 1)] += mass * float(descend[t])
            else:
                stack.append((x + (t,), mass * float(descend[t])))
        _emit(ctx, out, g, x, emit, mass, d + 1)
    return dict(out)


def block_round(ctx: RoundContext, g: tuple) -> dict:
    """The law of one round from committed ``g`` under block verification of the draft family's chain."""
    out: dict = defaultdict(float)
    stack = [((), 1.0, (), ())]
    while stack:
        x, mass, ps, qs = stack.pop()
        k = len(x)
        p = ctx.target_row(g + x)
        if p.sum() <= 0:
            _block_leaf(ctx, out, g, x, mass, ps, qs, "no_token")
            continue
        ps = ps + (p,)
        q = ctx.draft_row(g, x) if k < ctx.gamma else None
        if q is None or q.sum() <= 0:
            _block_leaf(ctx, out, g, x, mass, ps, qs, "bonus")
            continue
        for t in np.flatnonzero(q > 0).tolist():
            step = x + (t,)
            if ctx.finish(g + step):
                _block_leaf(ctx, out, g, step, mass * float(q[t]), ps, qs + (q,), "finished")
            else:
                stack.append((step, mass * float(q[t]), ps, qs + (q,)))
    return dict(out)


def block_weights(x, ps, qs) -> tuple[np.ndarray, np.ndarray]:
    """(w [L+1], h [L+1]) of block verification for drafts ``x`` (h[0] unused)."""
    size = len(x)
    w = np.ones(size + 1)
    for i in range(1, size + 1):
        tok = x[i - 1]
        w[i] = min(1.0, w[i - 1] * ps[i - 1][tok] / qs[i - 1][tok])
    h = np.ones(size + 1)
    for i in range(1, size):
        z = np.maximum(w[i] * ps[i] - qs[i], 0.0).sum()
        denom = z + 1.0 - w[i]
        h[i] = z / denom if denom > 0 else 1.0
    if size:
        h[size] = w[size]
    return w, h


def _block_leaf(ctx, out, g, x, mass, ps, qs, end) -> None:
    size = len(x)
    w, h = block_weights(x, ps, qs)
    for tau in range(size + 1):
        prob = (h[tau] if tau else 1.0) * float(np.prod(1.0 - h[tau + 1 :]))
        if prob <= 0:
            continue
        if tau == size and end == "finished":
            out[(ctx.after(g + x), size, size, size)] += mass * prob
        elif tau == size and end == "no_token":
            out[(("done", (g + x, "no_token")), size, size, size)] += mass * prob
        elif tau == size:
            _emit(ctx, out, g, x, ps[size], mass * prob, size)
        else:
            weights = np.maximum(w[tau] * ps[tau] - qs[tau], 0.0)
            total = weights.sum()  # no mass only through rounding (then tau's probability is ~0): the target row
            _emit(ctx, out, g, x[:tau], weights / total if total > 0 else ps[tau], mass * prob, size)
