"""A tree is data: the validator accepts every consistent reordering and catches every harmful inconsistent one."""

import numpy as np
import pytest
from hypothesis import given, settings

from specverify.errors import InvalidArgument
from specverify.fuzz.trees import corrupted_trees, permuted_trees, slot_cache
from specverify.oracles.models import step_kv
from specverify.reference.tree_data import Tree, canonical_tree, permute_tree, tree_problems, validate_tree


def paths_by_slot(tree: Tree):
    """{slot: (the token path from the root to the node stored there, its position)}, or None if the parents do
    not form a tree (a node's position must be its path's length: position ids follow it)."""
    out = {}
    for j in range(tree.size):
        path, node, seen = [], j, set()
        while node >= 0:
            if node in seen or not 0 <= node < tree.size:
                return None
            seen.add(node)
            path.append(int(tree.token[node]))
            node = int(tree.parent[node])
        out[int(tree.slot[j])] = (tuple(reversed(path)), int(tree.position[j]))
    return out


def test_canonical_layout_is_breadth_first():
    tree = canonical_tree((2, 1))
    assert tree.parent.tolist() == [-1, -1, 0, 1] and tree.position.tolist() == [1, 1, 2, 2]
    assert tree.slot.tolist() == [1, 2, 3, 4] and tree.children(-1).tolist() == [0, 1]


@settings(max_examples=40, deadline=None)
@given(permuted_trees())
def test_every_consistent_permutation_validates_and_keeps_each_slots_path(case):
    shape, tree, permuted = case
    kv = slot_cache(tree, step_kv)
    validate_tree(permuted, vocab_size=5, shape=shape, slot_kv=kv, step=step_kv)
    assert paths_by_slot(permuted) == paths_by_slot(tree)


@settings(max_examples=120, deadline=None)
@given(corrupted_trees())
def test_an_inconsistent_reorder_is_caught_unless_it_changes_nothing(case):
    how, shape, tree, bad = case
    kv = slot_cache(tree, step_kv)  # the writer filled the slots from the arrays before the reorder
    problems = tree_problems(bad, vocab_size=5, shape=shape, slot_kv=kv, step=step_kv)
    harmless = paths_by_slot(bad) == paths_by_slot(tree)
    assert bool(problems) != harmless, f"{how}: problems={problems}, harmless={harmless}"


def test_a_slot_left_behind_is_caught_and_says_how_to_fix_it():
    tree = canonical_tree((2, 1), token=np.array([1, 2, 3, 4]))
    order = np.array([1, 0, 3, 2])
    good = permute_tree(tree, order)
    bad = Tree(good.parent, good.position, good.token, tree.slot)
    kv = slot_cache(tree, step_kv)
    validate_tree(good, slot_kv=kv, step=step_kv)
    with pytest.raises(
        InvalidArgument, match=r"does not hold node .*Reorder parent, position, token and slot together"
    ):
        validate_tree(bad, slot_kv=kv, step=step_kv)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(parent=np.array([-1, -1, 0, 0])), "children"),
        (dict(position=np.array([1, 1, 2, 3])), "one position below"),
        (dict(slot=np.array([1, 1, 3, 4])), "permutation of 1..N"),
        (dict(parent=np.array([-1, 1, 0, 1])), "differ from the node's own index"),
        (dict(token=np.array([0, 9, 0, 0])), r"tokens must lie in \[0, 5\)"),
    ],
)
def test_structural_corruption_is_named(change, message):
    tree = canonical_tree((2, 1))
    arrays = dict(parent=tree.parent, position=tree.position, token=tree.token, slot=tree.slot) | change
    with pytest.raises(InvalidArgument, match=message):
        validate_tree(Tree(**arrays), vocab_size=5, shape=(2, 1))


def test_bad_arguments_raise_invalid_argument():
    with pytest.raises(InvalidArgument, match="shape=.*children counts >= 1"):
        canonical_tree((2, 0))
    with pytest.raises(InvalidArgument, match="must be a permutation of range"):
        permute_tree(canonical_tree((2,)), [0, 0])


def test_the_zoos_slot_bug_is_what_the_validator_rejects():
    """tree_slot_not_reordered's layout fails validation against the cache its writer filled; the reference's passes."""
    from specverify.reference.tree import TreeDecoder
    from specverify.zoo.drafts import _SlotNotReordered

    tree = canonical_tree((2, 2, 1), token=np.array([1, 2, 0, 3, 1, 2, 3, 0, 1, 2]))
    kv = slot_cache(tree, step_kv)
    good, _ = TreeDecoder.reorder(None, tree)
    bad, _ = _SlotNotReordered.reorder(_SlotNotReordered.__new__(_SlotNotReordered), tree)
    validate_tree(good, vocab_size=5, shape=(2, 2, 1), slot_kv=kv, step=step_kv)
    with pytest.raises(InvalidArgument, match="does not hold node"):
        validate_tree(bad, vocab_size=5, shape=(2, 2, 1), slot_kv=kv, step=step_kv)
