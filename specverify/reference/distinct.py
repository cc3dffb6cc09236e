"""One round of the vectorized reference with each law computed once per distinct cache state.

The rows of a group share one prompt, so at any position they sit in few distinct states (a toy cache's KV entry,
or the table row behind it): the draft and target laws are computed once per state — ``Laws(probs [m, V], index)``
— and each row reads its law through ``index``. Every row's law is bit for bit the row the per-row path computes
(the processors act on each row alone), and the draws are the same keyed uniforms, so a seed gives the same
outcomes on both paths (``tests/reference/test_distinct.py``).

It applies where the law is a function of the raw logits and the EOS mask alone (no penalties, grammar or logits
processors: their state lives in the decoder's rows, not in the cache), for the plain ``VectorizedDecoder`` (a
subclass overrides steps of the round that this path would skip) and caches that offer ``forward_distinct``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from specverify.reference.finish import NO_TOKEN
from specverify.sampling import (
    _COLUMNWISE,
    Purpose,
    _running_sum,
    process_logits,
    residual_probs,
    sample_from_uniforms,
)

__all__ = ["Laws", "applies", "distinct_round", "sample_rows"]


class Laws(NamedTuple):
    """Laws of n rows held once per distinct state: row i's law is ``probs[index[i]]``."""

    probs: torch.Tensor  # [m, V]
    index: np.ndarray  # int64 [n] (or [n, K] for K positions)


def applies(dec, st) -> bool:
    """Whether a group can take the distinct-state path (see the module docstring)."""
    params = st.params
    return (
        getattr(dec, "distinct_laws", False)
        and not st.penalized
        and st.grammar is None
        and not params.logits_processors
        and hasattr(st.target_cache, "forward_distinct")
        and hasattr(st.draft_cache, "forward_distinct")
    )


_FEW_ROWS = 64  # below this many rows a dedup's extra numpy calls cost more than the rows they save

_BYTES = np.uint64(0x0101010101010101)  # x * _BYTES >> 56 sums the 8 bytes of x (each 0 or 1 here)


def sample_rows(probs: torch.Tensor, index: np.ndarray, uniforms: torch.Tensor) -> torch.Tensor:
    """``sample_from_uniforms(probs[index], uniforms)``, with the running sums taken once per distinct row.
    [m, V], int [n], [n] -> int64 [n].

    The same comparisons as the sampler's: a row's draw is how many entries of its running sum are ``<=``
    uniform × total, counted here as bytes of the [n, V] comparison (8 per uint64) instead of column by column."""
    # left to right, as the sampler's _running_sum (numpy's accumulate is sequential: the same sums, bit for bit,
    # without a torch call per column)
    cdf = np.add.accumulate(probs.numpy(), axis=1) if probs.shape[-1] <= _COLUMNWISE else _running_sum(probs).numpy()
    rows = cdf.take(index, axis=0)  # [n, V]
    below = rows <= (uniforms.numpy().astype(np.float64, copy=False) * rows[:, -1])[:, None]
    if below.shape[1] % 8:
        below = np.concatenate([below, np.zeros((below.shape[0], 8 - below.shape[1] % 8), dtype=bool)], axis=1)
    counts = (below.view(np.uint64) * _BYTES) >> np.uint64(56)  # [n, ceil(V / 8)]
    out = torch.from_numpy(counts.sum(axis=1, dtype=np.int64) if counts.shape[1] > 1 else counts[:, 0].astype(np.int64))
    over = out >= probs.shape[-1]  # rounding ran past the last positive entry: the sampler's own rare path
    if bool(over.any()):
        idx = torch.from_numpy(index)
        out[over] = sample_from_uniforms(probs.index_select(0, idx[over]), uniforms[over])
    return out


def _dense(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values of ``codes`` in [0, size), index of each code among them), in O(n + size)."""
    present = np.zeros(size, dtype=bool)
    present[codes] = True
    values = np.flatnonzero(present)
    lookup = np.empty(size, dtype=np.int64)
    lookup[values] = np.arange(values.size)
    return values, lookup[codes]


def _laws(dec, st, logits: torch.Tensor, index: np.ndarray, num_generated: np.ndarray) -> Laws:
    """The request's law of each distinct state; EOS masking (``min_tokens``) splits a state by whether the row
    has generated fewer than ``min_tokens`` tokens. [m, V], int [n], int [n] -> Laws."""
    params = st.params
    rep = np.zeros(logits.shape[0], dtype=np.int64)
    if params.min_tokens > 0 and not params.ignore_eos:
        early = (num_generated < params.min_tokens).astype(np.int64)
        values, index = _dense(2 * index + early, 2 * logits.shape[0])
        logits = logits.index_select(0, torch.from_numpy(values // 2))
        rep = np.where(values % 2 == 1, 0, params.min_tokens)  # a count on the same side of min_tokens
    probs = process_logits(logits, params, num_generated=torch.from_numpy(rep), eos_token_id=dec.vocab.eos_token_id)
    return Laws(probs, index)


def _propose(dec, st, rows: np.ndarray) -> tuple:
    """γ drafts per row from the draft's law per distinct state -> (drafts [n, γ], draft Laws per k, lengths)."""
    n, gamma = rows.size, st.gamma
    drafts = np.zeros((n, gamma), dtype=np.int64)
    draft_len = np.full(n, gamma, dtype=np.int64)
    laws = []
    feed, hint = st.last[rows], None
    for k in range(gamma):
        # rows of one state a token ago that draft the same token share a state: the cache's hint (checked there)
        logits, index = st.draft_cache.forward_distinct(rows, feed[:, None], groups=hint)  # [m, V], [n, 1]
        hint = index[:, 0] if rows.size > _FEW_ROWS else None  # small calls: np.unique is as cheap
        law = _laws(dec, st, logits, index[:, 0], st.n_gen[rows] + k)
        tok = sample_rows(law.probs, law.index, dec.uniforms(st, rows, k, Purpose.DRAFT)).numpy()
        draft_len[(tok < 0) & (draft_len == gamma)] = k
        tok = np.maximum(tok, 0)
        drafts[:, k] = tok
        laws.append(law)
        feed = tok
    return drafts, laws, draft_len


def _verify(dec, st, rows: np.ndarray, drafts: np.ndarray) -> Laws:
    """One target call over [last, x_0 .. x_{γ-1}] -> Laws with index [n, γ+1]."""
    feed = np.concatenate([st.last[rows][:, None], drafts], axis=1)
    logits, index = st.target_cache.forward_distinct(rows, feed)  # [m, V], [n, γ+1]
    num_generated = st.n_gen[rows][:, None] + np.arange(st.gamma + 1)
    law = _laws(dec, st, logits, index.reshape(-1), num_generated.reshape(-1))
    return Laws(law.probs, law.index.reshape(index.shape))


def _judge(dec, st, rows, sel, k, x, target: Laws, p_index, draft: Laws, tok, ends, counters) -> None:
    """Acceptance test of draft ``x`` at position k for the rows ``sel`` that have one; rejected rows draw
    from the residual. Writes ``tok`` and ``ends`` in place."""
    verified, accepted = counters
    q_index = draft.index[sel]
    p_x = target.probs.numpy()[p_index, x]  # numpy: ~2x cheaper than torch's indexing on [n] picks
    q_x = draft.probs.numpy()[q_index, x]
    ok = dec.uniforms(st, rows[sel], k, Purpose.ACCEPT).numpy() * q_x < p_x  # the rule of VectorizedDecoder.accept
    verified[sel] += 1
    accepted[sel[ok]] += 1
    tok[ok] = x[ok]
    rej = np.flatnonzero(~ok)
    if rej.size:
        u = dec.uniforms(st, rows[sel[rej]], k, Purpose.TARGET)
        residual = _residuals(target.probs, p_index[rej], draft.probs, q_index[rej])
        tok[rej] = sample_rows(residual.probs, residual.index, u).numpy()
        ends[rej] = True


def _residuals(target_probs, p_index, draft_probs, q_index) -> Laws:
    """``residual_probs(target_probs[p_index], draft_probs[q_index])`` once per distinct (target, draft) pair of
    laws: a residual row is a function of its two rows alone. [m_p, V], int [r], [m_q, V], int [r] -> Laws."""
    if p_index.size <= _FEW_ROWS:  # a small call: the dedup costs more numpy calls than it saves
        rows = residual_probs(target_probs[torch.from_numpy(p_index)], draft_probs[torch.from_numpy(q_index)])
        return Laws(rows, np.arange(p_index.size))
    m_q = draft_probs.shape[0]
    pair = p_index * m_q + q_index
    size = target_probs.shape[0] * m_q
    if size <= 8 * pair.size + 65536:  # a dense look-up costs O(size): only where it is not much above O(r)
        values, index = _dense(pair, size)
    else:
        values, index = np.unique(pair, return_inverse=True)
        index = index.reshape(-1)
    values = torch.from_numpy(values)
    return Laws(
        residual_probs(target_probs.index_select(0, values // m_q), draft_probs.index_select(0, values % m_q)), index
    )


def _accept_and_commit(dec, st, rows, drafts, draft_laws, draft_len, target: Laws) -> None:
    live = np.ones(rows.size, dtype=bool)  # still inside this round
    accepted = np.zeros(rows.size, dtype=np.int64)
    verified = np.zeros(rows.size, dtype=np.int64)
    committed = np.zeros(rows.size, dtype=np.int64)
    mass = (target.probs.sum(-1) <= 0).numpy()  # per distinct state: no token has mass (no_token)
    for k in range(st.gamma + 1):
        sel = np.flatnonzero(live)
        if sel.size == 0:
            break
        p_index = target.index[sel, k]
        dead = mass[p_index]
        if dead.any():
            dec.finish(st, rows[sel[dead]], NO_TOKEN)
            live[sel[dead]] = False
            sel, p_index = sel[~dead], p_index[~dead]
        has_draft = draft_len[sel] > k
        tok = np.empty(sel.size, dtype=np.int64)
        ends = ~has_draft
        d = np.flatnonzero(has_draft)
        if d.size:
            sub_tok, sub_ends = tok[d], ends[d]
            x = drafts[sel[d], k]
            _judge(
                dec, st, rows, sel[d], k, x, target, p_index[d], draft_laws[k], sub_tok, sub_ends, (verified, accepted)
            )
            tok[d], ends[d] = sub_tok, sub_ends
        b = np.flatnonzero(~has_draft)
        if b.size:
            u = dec.uniforms(st, rows[sel[b]], k, Purpose.TARGET)
            tok[b] = sample_rows(target.probs, p_index[b], u).numpy()
        dec.commit_step(st, rows, sel, tok, ends, live, committed)
    dec.store_round(st, rows, accepted, verified, committed)


def distinct_round(dec, st, rows: np.ndarray) -> None:
    """``VectorizedDecoder.round`` with the laws per distinct state: draft, verify, commit, roll back."""
    st.round_start = st.n_gen.copy()
    drafts, draft_laws, draft_len = _propose(dec, st, rows)
    target = _verify(dec, st, rows, drafts)
    _accept_and_commit(dec, st, rows, drafts, draft_laws, draft_len, target)
    dec.rollback(st, rows, drafts)
