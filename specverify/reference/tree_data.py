"""A draft tree as data: parent, position, token and cache slot per node, with a validator (the seed: the four
arrays must correspond one to one, and any reordering must update all of them together).

Node i sits at ``position[i]`` (depth: 1 for the root's children), below ``parent[i]`` (-1: the root, which is the
last committed token, held in slot 0), holds ``token[..., i]`` (a leading batch axis is allowed: rows sharing one
topology) and writes its cache entry to ``slot[i]`` (1..N). :func:`canonical_tree` lays a shape out breadth-first;
:func:`permute_tree` reorders nodes consistently; :func:`validate_tree` checks structure and, given the slot cache,
that every slot holds the entry of its node's own path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from specverify.errors import InvalidArgument, check

__all__ = ["Tree", "canonical_tree", "permute_tree", "validate_tree", "tree_problems"]


@dataclass(frozen=True, eq=False)
class Tree:
    """Parent [N], position [N], token [..., N] and slot [N] of a draft tree's nodes (int64 arrays)."""

    parent: np.ndarray
    position: np.ndarray
    token: np.ndarray
    slot: np.ndarray

    @property
    def size(self) -> int:
        return int(self.parent.shape[0])

    def children(self, node: int) -> np.ndarray:
        """Indices of ``node``'s children (node -1: the root's), in index order."""
        return np.flatnonzero(self.parent == node)


def canonical_tree(shape: tuple, token: Optional[np.ndarray] = None) -> Tree:
    """Breadth-first layout of ``shape`` (children per depth); slot i + 1 for node i; tokens default to 0."""
    check(
        len(shape) >= 1 and all(isinstance(c, (int, np.integer)) and c >= 1 for c in shape),
        f"shape={shape!r} must be a non-empty tuple of children counts >= 1.",
    )
    parent, position, level = [], [], [-1]
    for depth, count in enumerate(shape, start=1):
        nxt = []
        for p in level:
            for _ in range(count):
                nxt.append(len(parent))
                parent.append(p)
                position.append(depth)
        level = nxt
    size = len(parent)
    token = np.zeros(size, dtype=np.int64) if token is None else np.asarray(token, dtype=np.int64)
    return Tree(
        parent=np.asarray(parent, dtype=np.int64),
        position=np.asarray(position, dtype=np.int64),
        token=token,
        slot=np.arange(1, size + 1, dtype=np.int64),
    )


def permute_tree(tree: Tree, order: np.ndarray) -> Tree:
    """The same tree with node ``order[j]`` stored at index j: every array moves, parent ids are renamed."""
    order = np.asarray(order, dtype=np.int64)
    check(
        order.shape == (tree.size,) and np.array_equal(np.sort(order), np.arange(tree.size)),
        f"order={order.tolist()!r} must be a permutation of range({tree.size}).",
    )
    rename = np.empty(tree.size, dtype=np.int64)
    rename[order] = np.arange(tree.size)
    old_parent = tree.parent[order]
    parent = np.where(old_parent < 0, -1, rename[np.maximum(old_parent, 0)])
    return Tree(parent=parent, position=tree.position[order], token=tree.token[..., order], slot=tree.slot[order])


def tree_problems(
    tree: Tree,
    *,
    vocab_size: Optional[int] = None,
    shape: Optional[tuple] = None,
    slot_kv: Optional[np.ndarray] = None,
    step: Optional[Callable] = None,
) -> list:
    """Every inconsistency found (messages; empty when the tree is consistent). See :func:`validate_tree`."""
    n = tree.size
    problems = []
    arrays = dict(parent=tree.parent, position=tree.position, slot=tree.slot)
    for name, arr in arrays.items():
        if arr.shape != (n,):
            problems.append(f"{name} has shape {arr.shape}, expected ({n},)")
    if tree.token.shape[-1:] != (n,):
        problems.append(f"token has shape {tree.token.shape}, expected (..., {n})")
    if problems:
        return problems
    if np.any((tree.parent < -1) | (tree.parent >= n)) or np.any(tree.parent == np.arange(n)):
        return problems + ["parent ids must lie in [-1, N) and differ from the node's own index"]
    parent_pos = np.where(tree.parent < 0, 0, tree.position[np.maximum(tree.parent, 0)])
    bad = np.flatnonzero(tree.position != parent_pos + 1)
    if bad.size:
        problems.append(f"nodes {bad[:5].tolist()} are not one position below their parent")
    if not np.array_equal(np.sort(tree.slot), np.arange(1, n + 1)):
        problems.append("slots must be a permutation of 1..N (slot 0 is the root)")
    if vocab_size is not None and np.any((tree.token < 0) | (tree.token >= vocab_size)):
        problems.append(f"tokens must lie in [0, {vocab_size})")
    if shape is not None and not problems:
        for node in np.flatnonzero(tree.position < len(shape)).tolist() + [-1]:
            depth = 0 if node < 0 else int(tree.position[node])
            if tree.children(node).size != shape[depth]:
                problems.append(f"node {node} has {tree.children(node).size} children, shape says {shape[depth]}")
                break
    if slot_kv is not None and step is not None and not problems:
        problems += _slot_problems(tree, slot_kv, step)
    return problems


def _slot_problems(tree: Tree, slot_kv: np.ndarray, step: Callable) -> list:
    for node in np.argsort(tree.position, kind="stable").tolist():
        parent = int(tree.parent[node])
        before = slot_kv[..., 0] if parent < 0 else slot_kv[..., tree.slot[parent]]
        if not np.array_equal(slot_kv[..., tree.slot[node]], step(before, tree.token[..., node])):
            return [f"slot {int(tree.slot[node])} does not hold node {node}'s entry (parent {parent}'s slot + token)"]
    return []


def validate_tree(tree: Tree, **kw) -> Tree:
    """Raise ``InvalidArgument`` unless parent, position, token and slot are consistent; return the tree.

    Checks: shapes agree; parents are -1 or other nodes; each node sits one position below its parent (so there
    are no cycles); slots are a permutation of 1..N; with ``vocab_size``, tokens are ids; with ``shape``, each node
    has its depth's number of children; with ``slot_kv`` ([..., N+1] cache entries, slot 0 the root's) and ``step``
    (the model's ``step_kv``), each slot holds ``step(entry of the parent's slot, token)``.

    Examples
    --------
    >>> tree = canonical_tree((2, 1))
    >>> validate_tree(permute_tree(tree, [3, 1, 2, 0]), shape=(2, 1)).size
    4
    """
    problems = tree_problems(tree, **kw)
    if problems:
        raise InvalidArgument(
            "the tree's arrays are inconsistent: " + "; ".join(problems) + ". Reorder parent, position, token and "
            "slot together (specverify.reference.tree_data.permute_tree)."
        )
    return tree
