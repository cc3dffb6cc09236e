"""The vectorized reference decoder: chain speculative sampling over many requests at once, in arrays.

It keeps incremental per-request state — KV caches, penalty counts, grammar and stop-matcher states, the stream
log — and rolls it back each round; it never rebuilds state from the committed tokens, so a rollback mutation (the
zoo) changes its law and is caught. Each step of a round is a small method a zoo entry can override.

Layout: a *group* is B rows sharing one prompt, one ``SamplingParams`` and one γ. Rows finish independently.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.params import PROCESSOR_FIELDS, SamplingParams
from specverify.protocol import Request, SampleCounts
from specverify.reference import distinct
from specverify.reference.finish import EOS, LENGTH, NO_TOKEN, STOP, finish_codes, stop_step  # noqa: F401 (zoo)
from specverify.reference.group_state import _State, keyed_draws
from specverify.reference.outcomes import GroupResult, completions_of, count_accepted, count_outcomes, count_positions
from specverify.sampling import (
    Purpose,
    draw_seeds,
    keyed_uniforms,
    one_thread,
    process_logits,
    residual_probs,
    sample_from_uniforms,
)

__all__ = ["VectorizedDecoder"]


class VectorizedDecoder:
    """Reference chain speculative decoder over arrays; follows the protocol of docs/adapters.md.

    ``decoder(requests)`` returns one ``Completion`` per request; ``decoder.sample(request, n)`` returns the counts
    of distinct outcomes over n independent draws (the certifier's fast path). Unseeded requests get fresh 63-bit
    seeds from this decoder's own generator (``entropy``), so they are independent of each other.
    """

    capabilities = frozenset(PROCESSOR_FIELDS) | {"batch", "seed", "stream", "accepted"}

    def __init__(self, target, draft, *, entropy=None, distinct_laws=True):
        check(target.vocab == draft.vocab, "target and draft must share one vocabulary (same token space).")
        check(isinstance(distinct_laws, bool), f"distinct_laws={distinct_laws!r} must be True or False.")
        self.target, self.draft, self.vocab = target, draft, target.vocab
        self._rng = np.random.default_rng(entropy)
        # laws once per distinct cache state (reference/distinct.py); a subclass that overrides a step of the
        # round takes the per-row path, so its override runs
        self.distinct_laws = distinct_laws and type(self) is VectorizedDecoder

    # ------------------------------------------------------------------------------------------- protocol
    def __call__(self, requests):
        requests = list(requests)
        for i, req in enumerate(requests):
            if not isinstance(req, Request):
                raise InvalidArgument(f"requests[{i}]={req!r} must be a specverify Request.")
            self.vocab.check_tokens(req.prompt, "requests[i].prompt")
        seeds = self._request_seeds([r.seed for r in requests])
        groups: dict = {}
        for i, req in enumerate(requests):
            groups.setdefault((req.params, req.num_draft_tokens, req.tree), []).append(i)
        completions = [None] * len(requests)
        for (params, gamma, tree), members in groups.items():
            self.prepare_group(gamma, tree)
            prompts = [requests[i].prompt for i in members]
            result = self.run_group(prompts, params, gamma, seeds[members])
            for i, completion in zip(members, completions_of(result)):
                completions[i] = completion
        return completions

    def prepare_group(self, num_draft_tokens: int, tree: tuple | None) -> None:
        """Called before each group of requests sharing (params, γ, tree) is decoded; tree decoders set their shape."""

    def sample(self, request: Request, n: int, start: int = 0) -> SampleCounts:
        """Counts of distinct outcomes over ``n`` independent draws of ``request`` (seeded: draws ``start`` ..
        ``start + n - 1`` of its stream, draw i with a seed derived from (request.seed, i); unseeded: fresh
        seeds, ``start`` ignored)."""
        check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
        check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
        self.vocab.check_tokens(request.prompt, "request.prompt")
        if request.seed is None:
            check(isinstance(start, int) and start >= 0, f"start={start!r} must be an int >= 0.")
            seeds = self._request_seeds([None] * n)
        else:
            seeds = draw_seeds(request.seed, n, start)
        result = self.run_group(request.prompt, request.params, request.num_draft_tokens, seeds)
        first_round = result.accepted[:, :1]  # the protocol reports the first round's accepted count per draw
        return SampleCounts(
            outcomes=count_outcomes(result, self.vocab.size),
            accepted=count_accepted(first_round),
            rounds=count_accepted(result.accepted),
            positions=count_positions(result, request.num_draft_tokens),
        )

    def _request_seeds(self, seeds) -> np.ndarray:
        fresh = self._rng.integers(0, 2**63, size=len(seeds), dtype=np.int64).astype(np.uint64)
        given = np.array([0 if s is None else s for s in seeds], dtype=np.uint64)
        return np.where(np.array([s is None for s in seeds], dtype=bool), fresh, given)

    # ------------------------------------------------------------------------------------------- one group
    def run_group(
        self, prompt: object, params: SamplingParams, num_draft_tokens: int, seeds: np.ndarray
    ) -> GroupResult:
        """Decode one row per seed; ``prompt`` is one prompt for every row or a list of one prompt per row."""
        with one_thread():
            return self._run_group(prompt, params, num_draft_tokens, seeds)

    def _run_group(self, prompt, params, num_draft_tokens, seeds) -> GroupResult:
        st = _State(self, prompt, params, num_draft_tokens, np.asarray(seeds, dtype=np.uint64))
        step = (
            self.round if not distinct.applies(self, st) else lambda st, rows: distinct.distinct_round(self, st, rows)
        )
        active = np.arange(st.b)
        while active.size:
            step(st, active)
            st.rounds += 1
            active = np.flatnonzero(st.reason == 0)
        return GroupResult(
            tokens=st.out,
            lengths=st.n_gen,
            reasons=st.reason,
            accepted=st.accepted[:, : st.rounds],
            chunk_sizes=st.chunks[:, : st.rounds],
            verified=st.verified[:, : st.rounds],
        )

    def round(self, st: _State, rows: np.ndarray) -> None:
        """One transaction: draft γ tokens, verify, commit the accepted prefix + one token, roll back the rest."""
        st.round_start = st.n_gen.copy()
        drafts, draft_probs, draft_len = self.propose(st, rows)
        target_probs = self.verify(st, rows, drafts)
        self.accept_and_commit(st, rows, drafts, draft_probs, draft_len, target_probs)
        self.rollback(st, rows, drafts)

    def uniforms(self, st, rows, offset, purpose) -> torch.Tensor:
        """Keyed draws for the token at generated position (round start + offset) of each row."""
        positions = st.round_start[rows] + offset
        if isinstance(st, _State):  # keyed_uniforms(seeds, positions, purpose), its (seed, purpose) half made once
            return torch.from_numpy(keyed_draws(st.stems(purpose)[rows], positions))
        return torch.from_numpy(keyed_uniforms(st.seeds[rows], positions, purpose))

    def law(self, st, logits, prov, num_generated, params=None) -> torch.Tensor:  # [n, V] -> [n, V]
        """The processed law of each row under ``params`` (default: the request's) and its history ``prov``."""
        params = st.params if params is None else params
        seen, counts, gstate, histories = prov
        allowed = None
        if st.grammar is not None and params.grammar is not None:
            allowed = st.grammar[0][torch.from_numpy(gstate)]
        return process_logits(
            logits,
            params,
            seen=seen,
            counts=counts,
            num_generated=torch.from_numpy(num_generated),
            allowed=allowed,
            eos_token_id=self.vocab.eos_token_id,
            histories=histories,
        )

    def draft_laws(self, st: _State, logits: torch.Tensor, prov: tuple, num_generated: np.ndarray) -> tuple:
        """(law the draft samples from, law recorded for the acceptance ratio): the same law, by the exact rule."""
        q = self.law(st, logits, prov, num_generated)
        return q, q

    def verify_params(self, params: SamplingParams, k: int, num_draft_tokens: int) -> SamplingParams:
        """Parameters of target position k (k < γ verifies draft k, k = γ gives the bonus): the request's own."""
        return params

    def provisional(self, st: _State, rows: np.ndarray) -> tuple:
        """A copy of the committed history state (snapshot) that drafts may advance: ``(seen, counts, grammar
        states, histories)``; the penalty tensors are None without penalties, the histories (prompt + generated
        tokens per row) None without logits processors."""
        histories = None
        if st.prompts is not None:
            histories = [st.prompts[r] + tuple(st.out[r, : st.n_gen[r]].tolist()) for r in rows.tolist()]
        if not st.penalized:
            return None, None, st.gstate[rows].copy(), histories
        return st.seen[rows].clone(), st.counts[rows].clone(), st.gstate[rows].copy(), histories

    def advance(self, st: _State, prov: tuple, tokens: np.ndarray) -> tuple:
        seen, counts, gstate, histories = prov
        if histories is not None:
            histories = [h + (t,) for h, t in zip(histories, tokens.tolist())]
        if seen is not None:
            idx = torch.from_numpy(tokens)[:, None]
            seen.scatter_(1, idx, True)
            counts.scatter_add_(1, idx, torch.ones(idx.shape, dtype=counts.dtype))
        if st.grammar is not None:
            gstate = st.grammar[1][gstate, tokens]
        return seen, counts, gstate, histories

    # ------------------------------------------------------------------------------------------- draft
    def propose(self, st: _State, rows: np.ndarray) -> tuple:
        """Draft γ tokens per row from the draft's processed law; rows whose draft row has no mass stop drafting."""
        n, gamma = rows.size, st.gamma
        drafts = np.zeros((n, gamma), dtype=np.int64)
        draft_probs = torch.zeros((n, gamma, self.vocab.size), dtype=torch.float64)
        draft_len = np.full(n, gamma, dtype=np.int64)
        prov = self.provisional(st, rows)
        feed = st.last[rows]
        for k in range(gamma):
            logits = self.draft_step(st, rows, k, feed)
            sample_from, q = self.draft_laws(st, logits, prov, st.n_gen[rows] + k)
            tok = sample_from_uniforms(sample_from, self.uniforms(st, rows, k, Purpose.DRAFT)).numpy()
            dead = (tok < 0) & (draft_len == gamma)
            draft_len[dead] = k
            tok = np.maximum(tok, 0)
            drafts[:, k], draft_probs[:, k] = tok, q
            prov = self.advance(st, prov, tok)
            feed = tok
        return drafts, draft_probs, draft_len

    def draft_step(self, st: _State, rows: np.ndarray, k: int, feed: np.ndarray) -> torch.Tensor:  # -> [n, V]
        """Raw draft logits of position k given the token before it (``feed``): an AR draft stores it in its cache
        (``reference/chain_families.py`` handles the other draft families)."""
        return st.draft_cache.forward(rows, feed[:, None])[:, 0]

    # ------------------------------------------------------------------------------------------- verify
    def verify(self, st, rows, drafts) -> torch.Tensor:  # -> [n, γ+1, V]
        """One target call over [last, x_0 .. x_{γ-1}]; position k's processors see the drafts before it."""
        feed = np.concatenate([st.last[rows][:, None], drafts], axis=1)
        logits = self.target_forward(st, rows, feed)
        prov = self.provisional(st, rows)
        out = []
        for k in range(st.gamma + 1):
            params = self.verify_params(st.params, k, st.gamma)
            out.append(self.law(st, logits[:, k], prov, st.n_gen[rows] + k, params))
            if k < st.gamma:
                prov = self.advance(st, prov, drafts[:, k])
        return torch.stack(out, dim=1)

    def target_forward(self, st, rows, feed) -> torch.Tensor:  # int [n, γ+1] -> [n, γ+1, V]
        """Raw target logits of the verify rows: ``feed`` appended to each row's target cache."""
        return st.target_cache.forward(rows, feed)

    def accept(self, target_p, draft_q, u) -> torch.Tensor:  # [n], [n], [n] -> bool [n]
        return u * draft_q < target_p

    def recover(self, target_row, draft_row, u) -> torch.Tensor:  # [n, V], [n, V], [n] -> [n]
        return sample_from_uniforms(residual_probs(target_row, draft_row), u)

    def bonus(self, target_row, u) -> torch.Tensor:  # [n, V], [n] -> [n]
        return sample_from_uniforms(target_row, u)

    def accept_and_commit(
        self,
        st: _State,
        rows: np.ndarray,
        drafts: np.ndarray,
        draft_probs: torch.Tensor,
        draft_len: np.ndarray,
        target_probs: torch.Tensor,
    ) -> None:
        live = np.ones(rows.size, dtype=bool)  # still inside this round
        accepted = np.zeros(rows.size, dtype=np.int64)
        verified = np.zeros(rows.size, dtype=np.int64)
        committed = np.zeros(rows.size, dtype=np.int64)
        for k in range(st.gamma + 1):
            sel, p_row = self.live_rows(st, rows, live, target_probs, k)
            if sel is None:
                break
            has_draft = draft_len[sel] > k
            tok = np.empty(sel.size, dtype=np.int64)
            ends = ~has_draft
            d = np.flatnonzero(has_draft)
            if d.size:
                x = torch.from_numpy(drafts[sel[d], k])
                q_row = draft_probs[sel[d], k]
                p_x = p_row[d].gather(1, x[:, None])[:, 0]
                q_x = q_row.gather(1, x[:, None])[:, 0]
                ok = self.accept(p_x, q_x, self.uniforms(st, rows[sel[d]], k, Purpose.ACCEPT)).numpy()
                verified[sel[d]] += 1
                tok[d[ok]] = drafts[sel[d[ok]], k]
                accepted[sel[d[ok]]] += 1
                rej = d[~ok]
                if rej.size:
                    u = self.uniforms(st, rows[sel[rej]], k, Purpose.TARGET)
                    tok[rej] = self.recover(p_row[rej], q_row[~ok], u).numpy()
                    ends[rej] = True
            b = np.flatnonzero(~has_draft)
            if b.size:
                tok[b] = self.bonus(p_row[b], self.uniforms(st, rows[sel[b]], k, Purpose.TARGET)).numpy()
            self.commit_step(st, rows, sel, tok, ends, live, committed)
        self.store_round(st, rows, accepted, verified, committed)

    def live_rows(self, st, rows, live, target_probs, k) -> tuple:
        """(positions still inside the round, their target rows at k); rows without mass finish as no_token.
        ``(None, None)`` once no row is live."""
        sel = np.flatnonzero(live)
        if sel.size == 0:
            return None, None
        return self.drop_dead(st, rows, live, sel, target_probs[sel, k])

    def drop_dead(self, st, rows, live, sel, p_row) -> tuple:
        """``(sel, p_row)`` without the rows whose target row has no mass: those finish as no_token."""
        dead = (p_row.sum(-1) <= 0).numpy()
        if dead.any():
            self.finish(st, rows[sel[dead]], NO_TOKEN)
            live[sel[dead]] = False
            sel, p_row = sel[~dead], p_row[~dead]
        return sel, p_row

    def commit_step(self, st, rows, sel, tok, stop, live, committed) -> None:
        """Commit one position's tokens for the live rows ``sel``; a row leaves the round where ``stop`` or where
        its token finished the request."""
        self.commit(st, rows[sel], tok)
        committed[sel] += 1
        live[sel[stop]] = False
        live[sel[st.reason[rows[sel]] != 0]] = False

    @staticmethod
    def store_round(st, rows, accepted, verified, committed) -> None:
        """The round's accepted drafts, drafts verified and tokens committed, per row."""
        st.accepted[rows, st.rounds] = accepted
        st.verified[rows, st.rounds] = verified
        st.chunks[rows, st.rounds] = committed

    # ------------------------------------------------------------------------------------------- commit
    def commit(self, st, rows, tokens: np.ndarray) -> None:
        """Append one token per row to the committed state and decide finishing (``finish.py``)."""
        params = st.params
        pos = st.n_gen[rows]
        st.out.reshape(-1)[rows * st.out.shape[1] + pos] = tokens  # flat: ~2x cheaper than [rows, pos] pairs
        st.n_gen[rows] = pos + 1
        if st.penalized:
            idx, tok = torch.from_numpy(rows), torch.from_numpy(tokens)
            st.seen[idx, tok] = True
            st.counts[idx, tok] += 1
        if st.grammar is not None:
            st.gstate[rows] = st.grammar[1][st.gstate[rows], tokens]
        stop_hit, st.sstate[rows] = stop_step(st.stops, st.sstate[rows], tokens, pos + 1, params)
        st.reason[rows] = finish_codes(tokens, stop_hit, pos + 1, params, self.vocab.eos_token_id)
        st.last[rows] = tokens

    def finish(self, st, rows, reason: int) -> None:
        st.reason[rows] = reason

    # ------------------------------------------------------------------------------------------- rollback
    def rollback(self, st, rows, drafts) -> None:
        """Crop both caches to the committed tokens except the last (fed first next round); append committed
        tokens a cache is missing (the last accepted draft after full acceptance)."""
        alive = rows[st.reason[rows] == 0]
        if alive.size == 0:
            return
        keep = st.prompt_len[alive] + st.n_gen[alive] - 1
        for cache in (st.target_cache, st.draft_cache):
            stored = cache.lengths[alive]
            cache.crop(alive, np.minimum(stored, keep))
            short = np.flatnonzero(stored < keep)
            if short.size:
                r = alive[short]
                cache.forward(r, st.out[r, st.n_gen[r] - 2][:, None])
