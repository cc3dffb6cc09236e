"""The toy paged KV pool: contents against the flat ``ToyCache``, block accounting, prefix sharing, copy-on-write."""

import numpy as np
import pytest
import torch

from specverify.errors import InvalidArgument
from specverify.oracles import ToyCache, draft_near, make_vocab, random_target
from specverify.reference.paged import BlockPool, OutOfBlocks, PagedCache

VOCAB = make_vocab(6)
TARGET = random_target(VOCAB, seed=11)
DRAFT = draft_near(TARGET, distance=0.5, seed=12)
SEQ = [
    0,
    3,
    1,
    4,
    2,
    2,
    0,
    1,
    3,
    4,
    1,
    0,
    2,
    3,
    4,
    0,
    1,
    1,
    2,
    3,
    0,
    4,
    2,
    1,
    3,
    0,
    0,
    2,
    4,
    1,
    3,
    2,
    1,
    0,
    4,
    3,
    2,
    2,
    1,
]
BLOCK_SIZES = (1, 2, 3, 16)


def reference(tokens, model=TARGET):
    ref = ToyCache(model)
    if tokens:
        ref.forward(list(tokens))
    return ref


def assert_same(cache, ref):
    assert cache.tokens == ref.tokens
    assert cache.kv.tolist() == [int(v) for v in ref.kv]
    assert len(cache.block_table) == -(-len(ref.tokens) // cache.pool.block_size)


def snapshot(cache):
    pool = cache.pool
    return (
        cache.entries(),
        cache.block_table,
        len(cache),
        cache.num_committed,
        pool.num_free,
        [pool.refcount(b) for b in range(pool.num_blocks)],
        pool.num_published,
    )


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_forward_across_block_boundaries_at_every_offset(block_size):
    for start in range(2 * block_size + 2):
        for count in sorted({1, 2, block_size - 1, block_size, block_size + 1} - {0}):
            pool = BlockPool(16, block_size)
            cache = PagedCache(pool, TARGET)
            if start:
                cache.forward(SEQ[:start])
            logits = cache.forward(SEQ[start : start + count])
            ref = reference(SEQ[:start])
            assert torch.equal(logits, ref.forward(SEQ[start : start + count]))
            assert_same(cache, ref)
            assert pool.num_free == pool.num_blocks - len(cache.block_table)


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_crop_to_every_length_frees_whole_blocks_and_regrows_correctly(block_size):
    total = 2 * block_size + 3
    for length in range(total + 1):
        pool = BlockPool(16, block_size)
        cache = PagedCache(pool, TARGET)
        cache.forward(SEQ[:total])
        cache.crop(length)
        assert_same(cache, reference(SEQ[:length]))
        assert pool.num_free == pool.num_blocks - -(-length // block_size)
        regrow = SEQ[total : total + block_size + 1]  # a different continuation: stale slots must not leak
        ref = reference(SEQ[:length])
        assert torch.equal(cache.forward(regrow), ref.forward(regrow))
        assert_same(cache, ref)
        cache.free()
        assert pool.num_free == pool.num_blocks and len(cache) == 0


def test_out_of_blocks_leaves_cache_and_pool_unchanged():
    pool = BlockPool(3, 2)
    cache = PagedCache(pool, TARGET)
    cache.forward(SEQ[:5])
    before = snapshot(cache)
    with pytest.raises(OutOfBlocks, match="num_free=0"):
        cache.forward(SEQ[5:7])
    assert snapshot(cache) == before
    cache.commit()
    with pytest.raises(OutOfBlocks):
        cache.prefill(SEQ[5:8])
    assert snapshot(cache)[:2] == before[:2]
    cache.forward(SEQ[5:6])  # the last free slot still works
    assert_same(cache, reference(SEQ[:6]))


def test_copy_on_write_out_of_blocks_leaves_both_caches_unchanged():
    pool = BlockPool(3, 2)
    a, b = PagedCache(pool, TARGET), PagedCache(pool, TARGET)
    a.prefill(SEQ[:4])
    b.prefill(SEQ[:4])
    b.crop(3)  # b now ends inside a block a shares
    PagedCache(pool, TARGET).forward(SEQ[:2])  # takes the last free block
    before_a, before_b = snapshot(a), snapshot(b)
    with pytest.raises(OutOfBlocks):
        b.forward([SEQ[7]])
    assert (snapshot(a), snapshot(b)) == (before_a, before_b)


def test_prefix_sharing_shares_committed_full_blocks_only():
    pool = BlockPool(16, 3)
    a, b = PagedCache(pool, TARGET), PagedCache(pool, TARGET)
    a.prefill(SEQ[:7])  # two full blocks + one partial
    b.prefill(SEQ[:7])
    assert b.block_table[:2] == a.block_table[:2] and b.block_table[2] != a.block_table[2]
    assert [pool.refcount(x) for x in a.block_table] == [2, 2, 1]
    assert_same(b, reference(SEQ[:7]))
    c = PagedCache(pool, TARGET)
    c.prefill(SEQ[:3] + [SEQ[5]] + SEQ[4:7])  # first block matches, second does not
    assert c.block_table[0] == a.block_table[0] and c.block_table[1] not in a.block_table
    assert_same(c, reference(SEQ[:3] + [SEQ[5]] + SEQ[4:7]))
    for cache in (a, b, c):
        cache.free()
    assert pool.num_free == pool.num_blocks


def test_provisional_blocks_are_never_shared():
    pool = BlockPool(16, 2)
    a = PagedCache(pool, TARGET)
    a.forward(SEQ[:6])  # provisional
    b = PagedCache(pool, TARGET)
    b.prefill(SEQ[:6])
    assert not set(b.block_table) & set(a.block_table)
    a.commit(3)  # one full committed block (the second is only half committed)
    c = PagedCache(pool, TARGET)
    c.prefill(SEQ[:6])
    shared = set(c.block_table) & set(a.block_table)
    assert shared <= {a.block_table[0]}


def test_prefix_key_includes_the_model():
    pool = BlockPool(16, 2)
    t, d = PagedCache(pool, TARGET), PagedCache(pool, DRAFT)
    t.prefill(SEQ[:4])
    d.prefill(SEQ[:4])
    assert not set(t.block_table) & set(d.block_table)


def test_copy_on_write_keeps_the_other_holder_intact():
    pool = BlockPool(16, 3)
    a, b = PagedCache(pool, TARGET), PagedCache(pool, TARGET)
    a.prefill(SEQ[:6])
    b.prefill(SEQ[:6])
    shared = b.block_table[1]
    b.crop(4)  # inside the shared second block
    b.forward([SEQ[10], SEQ[11]])
    assert b.block_table[1] != shared and a.block_table[1] == shared and pool.refcount(shared) == 1
    assert_same(a, reference(SEQ[:6]))
    assert_same(b, reference(SEQ[:4] + [SEQ[10], SEQ[11]]))


def test_writing_into_an_own_published_block_unpublishes_it():
    pool = BlockPool(16, 3)
    a = PagedCache(pool, TARGET)
    a.prefill(SEQ[:6])
    a.crop(4)
    a.forward([SEQ[12]])  # rewrites slot 1 of a published block
    c = PagedCache(pool, TARGET)
    c.prefill(SEQ[:6])  # must not find the rewritten block under the old prefix
    assert_same(c, reference(SEQ[:6]))
    assert_same(a, reference(SEQ[:4] + [SEQ[12]]))


def test_freed_published_blocks_are_revived_then_evicted_under_pressure():
    pool = BlockPool(4, 2)
    a = PagedCache(pool, TARGET)
    a.prefill(SEQ[:4])
    table = a.block_table
    a.free()
    assert pool.num_free == 4 and pool.num_published == 2
    b = PagedCache(pool, TARGET)
    b.prefill(SEQ[:4])
    assert b.block_table == table  # revived from the free list
    b.free()
    other = PagedCache(pool, TARGET)
    other.forward(SEQ[10:18])  # takes every block: the published prefix is evicted
    other.free()
    c = PagedCache(pool, TARGET)
    c.prefill(SEQ[:4])
    assert_same(c, reference(SEQ[:4]))


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_random_operations_on_shared_pool_match_flat_caches(block_size):
    rng = np.random.default_rng(block_size)
    pool = BlockPool(12, block_size)
    caches = [PagedCache(pool, TARGET if i % 3 else DRAFT) for i in range(4)]
    refs = [[] for _ in caches]
    prefixes = [SEQ[:n] for n in (block_size, 2 * block_size, 2 * block_size + 1)]
    for step in range(300):
        i = int(rng.integers(len(caches)))
        cache, before = caches[i], snapshot(caches[i])
        op = rng.choice(["forward", "prefill", "crop", "commit", "free"], p=[0.35, 0.2, 0.25, 0.15, 0.05])
        try:
            if op == "forward":
                new = rng.integers(VOCAB.size, size=int(rng.integers(1, 2 * block_size + 2))).tolist()
                logits = cache.forward(new)
                ref = reference(refs[i], cache.model)
                assert torch.equal(logits, ref.forward(new))
                refs[i] = refs[i] + new
            elif op == "prefill":
                cache.crop(cache.num_committed)
                refs[i] = refs[i][: len(cache)]
                new = prefixes[int(rng.integers(3))] if not len(cache) else [int(rng.integers(VOCAB.size))]
                cache.prefill(new)
                refs[i] = refs[i] + list(new)
            elif op == "crop":
                length = int(rng.integers(len(cache) + 1))
                cache.crop(length)
                refs[i] = refs[i][:length]
            elif op == "commit":
                cache.commit(int(rng.integers(cache.num_committed, len(cache) + 1)))
            else:
                cache.free()
                refs[i] = []
        except OutOfBlocks:
            if op != "prefill":  # prefill crops first, then may fail: the crop stays
                assert snapshot(cache) == before
        assert_same(cache, reference(refs[i], cache.model))
        if step % 10 == 0:  # another holder of a shared block must never see a write
            for c, r in zip(caches, refs):
                assert_same(c, reference(r, c.model))
        held = sum(pool.refcount(b) for b in range(pool.num_blocks))
        assert held == sum(len(c.block_table) for c in caches)
        assert pool.num_free == sum(pool.refcount(b) == 0 for b in range(pool.num_blocks))
    for cache in caches:
        cache.free()
    assert pool.num_free == pool.num_blocks


def test_bad_arguments_raise_invalid_argument_with_name_and_value():
    with pytest.raises(InvalidArgument, match=r"num_blocks=0 must be an int >= 1"):
        BlockPool(0, 2)
    with pytest.raises(InvalidArgument, match=r"block_size=2\.0 must be an int >= 1"):
        BlockPool(4, 2.0)
    pool = BlockPool(4, 2)
    with pytest.raises(InvalidArgument, match=r"pool=None must be a BlockPool"):
        PagedCache(None, TARGET)
    cache = PagedCache(pool, TARGET)
    with pytest.raises(InvalidArgument, match=r"tokens=\[\] must hold at least one token"):
        cache.forward([])
    with pytest.raises(InvalidArgument, match=r"outside the vocabulary"):
        cache.forward([VOCAB.size])
    cache.forward([0, 1, 2])
    with pytest.raises(InvalidArgument, match=r"length=4 must be an int in \[0, 3\]"):
        cache.crop(4)
    with pytest.raises(InvalidArgument, match=r"length=-1"):
        cache.crop(-1)
    with pytest.raises(InvalidArgument, match=r"prefill\(\) after 3 provisional entries"):
        cache.prefill([0])
    cache.commit(2)
    with pytest.raises(InvalidArgument, match=r"length=1 must lie in \[2, 3\]"):
        cache.commit(1)
    with pytest.raises(InvalidArgument, match=r"block=3 has refcount 0"):
        pool.release(3)
