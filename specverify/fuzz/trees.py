"""Hypothesis strategies for draft trees (``specverify.reference.tree_data``): consistent reorderings and the
inconsistent ones engines shipped (imports hypothesis).

``permuted_trees`` draws a shape, tokens and a node permutation and applies it to all four arrays (parent ids
renamed): every draw is a consistent tree. ``corrupted_trees`` applies one of ``CORRUPTIONS`` instead — a reorder
that forgets one array or the renaming — and returns the canonical tree's slot cache as well, so the validator can
be asked whether it sees the corruption (``slot_cache`` builds that cache).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from specverify.reference.tree_data import Tree, canonical_tree, permute_tree

__all__ = ["tree_shapes", "permuted_trees", "corrupted_trees", "slot_cache", "CORRUPTIONS"]

CORRUPTIONS = ("slot-not-moved", "parent-not-renamed", "position-not-moved", "token-not-moved")


def tree_shapes(*, max_depth: int = 3, max_children: int = 3) -> st.SearchStrategy:
    """Children per depth: 1..``max_depth`` levels of 1..``max_children`` children."""
    return st.lists(st.integers(1, max_children), min_size=1, max_size=max_depth).map(tuple)


@st.composite
def _tree_and_order(draw, vocab_size: int) -> tuple:
    shape = draw(tree_shapes())
    tree = canonical_tree(shape)
    tokens = np.asarray(draw(st.lists(st.integers(0, vocab_size - 1), min_size=tree.size, max_size=tree.size)))
    tree = Tree(tree.parent, tree.position, tokens, tree.slot)
    order = np.asarray(draw(st.permutations(range(tree.size))), dtype=np.int64)
    return shape, tree, order


def permuted_trees(*, vocab_size: int = 5) -> st.SearchStrategy:
    """``(shape, canonical tree, permuted tree)``: the permutation moves every array and renames parents."""
    return _tree_and_order(vocab_size).map(lambda t: (t[0], t[1], permute_tree(t[1], t[2])))


def slot_cache(tree: Tree, step, root: int = 12345) -> np.ndarray:  # -> uint64 [N+1]
    """The slot cache a writer fills from ``tree`` (slot 0: the root's entry): each slot from its parent's."""
    kv = np.zeros(tree.size + 1, dtype=np.uint64)
    kv[0] = np.uint64(root)
    for node in np.argsort(tree.position, kind="stable").tolist():
        parent = int(tree.parent[node])
        before = kv[0] if parent < 0 else kv[tree.slot[parent]]
        kv[tree.slot[node]] = step(np.array([before]), np.array([tree.token[node]]))[0]
    return kv


def _corrupt(tree: Tree, order: np.ndarray, how: str) -> Tree:
    good = permute_tree(tree, order)
    if how == "slot-not-moved":
        return Tree(good.parent, good.position, good.token, tree.slot)
    if how == "parent-not-renamed":
        return Tree(tree.parent[order], good.position, good.token, good.slot)
    if how == "position-not-moved":
        return Tree(good.parent, tree.position, good.token, good.slot)
    return Tree(good.parent, good.position, tree.token, good.slot)


@st.composite
def corrupted_trees(draw, *, vocab_size: int = 5) -> tuple:
    """``(how, shape, canonical tree, corrupted tree)``: a reorder that forgets one array or the renaming (it may
    happen to change nothing that matters, e.g. swapping two nodes with the same path)."""
    shape, tree, order = draw(_tree_and_order(vocab_size))
    how = draw(st.sampled_from(CORRUPTIONS))
    return how, shape, tree, _corrupt(tree, order, how)
