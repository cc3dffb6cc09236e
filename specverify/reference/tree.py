"""Tree verification: the exact multi-candidate rule over a draft tree (docs/design.md; ``tree_data.py``).

A tree draft (``family == "tree"``: an AR ``base`` draft, a ``shape`` of children per depth, a ``siblings`` rule; a
request's ``tree`` overrides the shape) proposes every node before one target call. The walk from the root verifies
a node's children in draw order: i.i.d. children by recursive rejection (child i accepted with min(1, p_i/q), else
p_{i+1} = residual(p_i, q)); children drawn without replacement likewise with q_i renormalised without the children
drawn before; top-k children (point masses) by a target draw that follows the matching child. A node whose children
are all rejected emits a draw from the last residual; a leaf emits a bonus token.

Cache entries go through the tree's arrays: each node's entry is written to its slot from its parent's slot
(``step_kv``), and verification reads node i's target logits from ``slot[i]`` of the reordered tree
(:meth:`TreeDecoder.reorder`, a consistent permutation by default), so an inconsistent reorder changes the law.
Tree i.i.d. of shape (1, ..., 1) draws exactly what the chain reference draws (same keys).
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.errors import check
from specverify.protocol import Request, SampleCounts
from specverify.reference.chain_families import sync_cache
from specverify.reference.tree_data import Tree, canonical_tree, permute_tree
from specverify.reference.vectorized import VectorizedDecoder, _State
from specverify.sampling import Purpose, keyed_uniforms, residual_probs, sample_from_uniforms

__all__ = ["TreeDecoder"]

_SUB = 2**32  # key offset per sibling / node within a depth (positions stay far below it)


def _clone(prov: tuple) -> tuple:
    seen, counts, gstate, histories = prov  # histories: a list of tuples that advance() replaces, never edits
    return (
        None if seen is None else seen.clone(),
        None if counts is None else counts.clone(),
        gstate.copy(),
        histories,
    )


def _gather(probs: torch.Tensor, tokens: np.ndarray) -> torch.Tensor:  # [m, V], int [m] -> [m]
    return probs.gather(1, torch.from_numpy(tokens)[:, None])[:, 0]


class TreeDecoder(VectorizedDecoder):
    """Reference tree speculative decoder over arrays (protocol of docs/adapters.md; ``sample`` fast path)."""

    def __init__(self, target, draft, *, entropy=None):
        check(getattr(draft, "family", None) == "tree", f"draft={draft!r} must be a tree draft (family 'tree').")
        super().__init__(target, draft, entropy=entropy)
        self.siblings = draft.siblings
        self._shape = None

    # ------------------------------------------------------------------------------------------- protocol
    def prepare_group(self, num_draft_tokens: int, tree: tuple | None) -> None:
        self._shape = self.draft.shape_for(num_draft_tokens, tree)

    def sample(self, request: Request, n: int, start: int = 0) -> SampleCounts:
        check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
        self._shape = self.draft.shape_for(request.num_draft_tokens, request.tree)
        return super().sample(request, n, start)

    # ------------------------------------------------------------------------------------------- one round
    def round(self, st: _State, rows: np.ndarray) -> None:
        st.round_start = st.n_gen.copy()
        tree = canonical_tree(self._shape)
        tokens, valid, q_at, prov_at = self.draft_tree(st, rows, tree)
        p_at = self.verify_tree(st, rows, tree, tokens, valid, prov_at)
        self.walk(st, rows, tree, tokens, valid, q_at, p_at)
        alive = rows[st.reason[rows] == 0]
        if alive.size:
            sync_cache(st.target_cache, st, alive)
            sync_cache(st.draft_cache, st, alive)

    def keyed(self, st, rows, depth, sub, purpose) -> torch.Tensor:
        positions = st.round_start[rows] + depth + sub * _SUB
        return torch.from_numpy(keyed_uniforms(st.seeds[rows], positions, purpose))

    def draft_tree(self, st, rows, tree: Tree) -> tuple:
        """Tokens [n, N], valid [n, N], the draft law at each node [n, N+1, V] (slot 0: root) and the history
        state at each node."""
        n, size, vocab = rows.size, tree.size, self.vocab.size
        tokens = np.zeros((n, size), dtype=np.int64)
        valid = np.zeros((n, size), dtype=bool)
        q_at = torch.zeros((n, size + 1, vocab), dtype=torch.float64)
        kv = np.zeros((n, size + 1), dtype=np.uint64)
        logits = st.draft_cache.forward(rows, st.last[rows][:, None])[:, 0]
        kv[:, 0] = st.draft_cache.kv[rows, st.draft_cache.lengths[rows] - 1]
        prov_at = [self.provisional(st, rows)] + [None] * size
        q_at[:, 0] = self.law(st, logits, prov_at[0], st.n_gen[rows])
        alive_at = np.ones((n, size + 1), dtype=bool)
        for node in range(-1, size):
            kids = tree.children(node)
            if kids.size == 0:
                continue
            depth = 0 if node < 0 else int(tree.position[node])
            first = int(np.flatnonzero(tree.position == depth + 1)[0])
            drawn = self.draw_children(st, rows, q_at[:, node + 1], kids - first, depth)
            for j, kid in enumerate(kids.tolist()):
                valid[:, kid] = alive_at[:, node + 1] & (drawn[:, j] >= 0)
                tokens[:, kid] = np.maximum(drawn[:, j], 0)
                alive_at[:, kid + 1] = valid[:, kid]
                kv[:, kid + 1] = self.draft.base.step_kv(kv[:, node + 1], tokens[:, kid])
                prov_at[kid + 1] = self.advance(st, _clone(prov_at[node + 1]), tokens[:, kid])
                if tree.position[kid] < len(self._shape):
                    q_logits = self.draft.base.head(kv[:, kid + 1])
                    q_at[:, kid + 1] = self.law(st, q_logits, prov_at[kid + 1], st.n_gen[rows] + depth + 1)
        return tokens, valid, q_at, prov_at

    def draw_children(self, st, rows, q, subs, depth) -> np.ndarray:  # [n, V], int [c] -> int [n, c] (-1: none)
        out = np.full((rows.size, subs.size), -1, dtype=np.int64)
        if self.siblings == "top-k":
            order = torch.sort(-q, dim=1, stable=True).indices[:, : subs.size]
            picked = order.numpy()
            positive = (q.gather(1, order) > 0).numpy()
            out[:, : picked.shape[1]] = np.where(positive, picked, -1)
            return out
        left = q.clone()
        for j, sub in enumerate(subs.tolist()):
            tok = sample_from_uniforms(left, self.keyed(st, rows, depth, sub, Purpose.DRAFT)).numpy()
            out[:, j] = tok
            if self.siblings == "without-replacement":
                has = np.flatnonzero(tok >= 0)
                left[torch.from_numpy(has), torch.from_numpy(tok[has])] = 0.0
        return out

    def reorder(self, tree: Tree) -> tuple[Tree, np.ndarray]:
        """(the layout verification reads, ``order``: stored index j holds node ``order[j]``): siblings reversed
        within each depth, a consistent permutation of all four arrays."""
        order = np.lexsort((-np.arange(tree.size), tree.position))
        return permute_tree(tree, order), order

    def verify_tree(self, st, rows, tree: Tree, tokens, valid, prov_at) -> torch.Tensor:  # -> [n, N+1, V]
        """One target call over the tree: the entries of real nodes written to their slots (padding, a node
        without a candidate, gets none), laws read through ``reorder``."""
        n, size = rows.size, tree.size
        kv = np.zeros((n, size + 1), dtype=np.uint64)
        logits = st.target_cache.forward(rows, st.last[rows][:, None])[:, 0]
        kv[:, 0] = st.target_cache.kv[rows, st.target_cache.lengths[rows] - 1]
        root = st.target_cache.lengths[rows] - 1  # the position of the root's entry
        for node in np.argsort(tree.position, kind="stable").tolist():
            parent_slot = 0 if tree.parent[node] < 0 else tree.slot[tree.parent[node]]
            entry = self.node_entry(kv[:, parent_slot], tokens[:, node], root + self.node_offset(tree, node))
            kv[:, tree.slot[node]] = np.where(valid[:, node], entry, np.uint64(0))
        stored, order = self.reorder(Tree(tree.parent, tree.position, tokens, tree.slot))
        p_at = torch.zeros((n, size + 1, self.vocab.size), dtype=torch.float64)
        p_at[:, 0] = self.law(st, logits, prov_at[0], st.n_gen[rows])
        for j, node in enumerate(order.tolist()):
            node_logits = self.target.head(kv[:, stored.slot[j]])
            depth = int(tree.position[node])
            p_at[:, node + 1] = self.law(st, node_logits, prov_at[node + 1], st.n_gen[rows] + depth)
        return p_at

    def node_offset(self, tree: Tree, node: int) -> int:
        """A node's position after the root's: its depth (a rotary position counts tokens along the path)."""
        return int(tree.position[node])

    def node_entry(self, prev, tokens, positions) -> np.ndarray:  # uint64 [n], int [n], int [n] -> uint64 [n]
        """A node's target entry from its parent's; a target whose law reads positions is given the node's."""
        if getattr(self.target, "positional", False):
            return self.target.step_kv(prev, tokens, positions)
        return self.target.step_kv(prev, tokens)

    # ------------------------------------------------------------------------------------------- the walk
    def walk(self, st, rows, tree, tokens, valid, q_at, p_at) -> None:
        n = rows.size
        table = np.zeros((tree.size + 1, max(self._shape)), dtype=np.int64)  # children of node c at table[c + 1]
        for node in range(-1, tree.size):
            kids = tree.children(node)
            table[node + 1, : kids.size] = kids
        cur = np.full(n, -1, dtype=np.int64)
        live = np.ones(n, dtype=bool)
        accepted, verified, committed = (np.zeros(n, dtype=np.int64) for _ in range(3))
        for depth in range(len(self._shape) + 1):
            sel = np.flatnonzero(live)
            if sel.size == 0:
                break
            sel, p = self.drop_dead(st, rows, live, sel, p_at[sel, cur[sel] + 1])
            if depth == len(self._shape):
                tok = self.bonus(p, self.keyed(st, rows[sel], depth, 0, Purpose.TARGET)).numpy()
                choice = np.full(sel.size, -1, dtype=np.int64)
            else:
                kids = table[cur[sel] + 1, : self._shape[depth]]
                kid_tok, kid_ok = tokens[sel[:, None], kids], valid[sel[:, None], kids]
                verified[sel[kid_ok[:, 0]]] += 1
                q = q_at[sel, cur[sel] + 1]
                choice, tok = self.choose(st, rows[sel], depth, p, q, kid_tok, kid_ok)
            took = choice >= 0
            accepted[sel[took]] += 1
            if took.any():
                cur[sel[took]] = kids[took, choice[took]]
            self.commit_step(st, rows, sel, tok, ~took, live, committed)
        self.store_round(st, rows, accepted, verified, committed)

    def choose(self, st, rows, depth, p, q, kid_tok, kid_ok) -> tuple[np.ndarray, np.ndarray]:
        """(index of the accepted child or -1, the token committed) per row at one node."""
        m = rows.size
        choice = np.full(m, -1, dtype=np.int64)
        if self.siblings == "top-k":
            y = self.bonus(p, self.keyed(st, rows, depth, 0, Purpose.TARGET)).numpy()
            hit = (kid_tok == y[:, None]) & kid_ok
            choice[hit.any(1)] = hit.argmax(1)[hit.any(1)]
            return choice, y
        p_i, q_i = p.clone(), q.clone()
        for j in range(kid_tok.shape[1]):
            open_ = np.flatnonzero((choice < 0) & kid_ok[:, j])
            if open_.size == 0:
                continue
            x = kid_tok[open_, j]
            q_row = q_i[open_] / q_i[open_].sum(-1, keepdim=True)
            u = self.keyed(st, rows[open_], depth, j, Purpose.ACCEPT)
            ok = self.accept(_gather(p_i[open_], x), _gather(q_row, x), u).numpy()
            choice[open_[ok]] = j
            rej = open_[~ok]
            p_i[rej] = residual_probs(p_i[rej], q_row[~ok])
            if self.siblings == "without-replacement":
                q_i[torch.from_numpy(rej), torch.from_numpy(x[~ok])] = 0.0
        tok = np.where(choice >= 0, kid_tok[np.arange(m), np.maximum(choice, 0)], 0)
        emit = np.flatnonzero(choice < 0)
        if emit.size:
            u = self.keyed(st, rows[emit], depth, 0, Purpose.TARGET)
            tok[emit] = self.bonus(p_i[emit], u).numpy()
        return choice, tok
