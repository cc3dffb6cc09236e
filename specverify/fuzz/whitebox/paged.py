"""Paged KV under random operations: every cache reads what a flat cache fed the same tokens reads, at every block
offset, while caches share prefix blocks and copy on write.

Hypothesis draws the block size, the number of caches, the number of operations and a seed; numpy draws the
operations (forward, prefill of a shared prefix, crop -- often to an offset inside a shared block, commit, free,
and branch: take another cache's committed blocks, crop inside the last shared one and write a new continuation).
After each operation every cache's contents must equal its flat reference (a write into a shared block would show in
the *other* holder), the block accounting must balance, and a failed allocation must change nothing.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from specverify.errors import check
from specverify.fuzz.properties import PropertyFailure

__all__ = ["paged_cases", "check_paged_operations"]

OPS = ("forward", "prefill", "crop", "commit", "free", "branch")
OP_WEIGHTS = (0.3, 0.15, 0.2, 0.15, 0.05, 0.15)


def paged_cases(*, block_sizes=(1, 2, 3, 16), max_caches: int = 4, max_ops: int = 40) -> st.SearchStrategy:
    """``dict(block_size, num_caches, num_ops, seed)`` for ``check_paged_operations``."""
    check(len(block_sizes) > 0, f"block_sizes={block_sizes!r} must be non-empty.")
    check(isinstance(max_caches, int) and max_caches >= 2, f"max_caches={max_caches!r} must be an int >= 2.")
    check(isinstance(max_ops, int) and max_ops >= 1, f"max_ops={max_ops!r} must be an int >= 1.")
    return st.builds(
        dict,
        block_size=st.sampled_from(tuple(block_sizes)),
        num_caches=st.integers(2, max_caches),
        num_ops=st.integers(min(10, max_ops), max_ops),
        seed=st.integers(0, 2**32 - 1),
    )


class _Flat:
    """KV entries a flat cache holds after a token list, per model (memoised by prefix: checks stay cheap)."""

    def __init__(self):
        self.memo: dict = {}

    def __call__(self, model, tokens) -> list:
        from specverify.oracles.models import step_kv

        key = (id(model), tuple(tokens))
        if key not in self.memo:
            if not tokens:
                self.memo[key] = []
            else:
                prev = self(model, tokens[:-1])
                last = np.uint64(prev[-1]) if prev else model.root_kv
                entry = step_kv(np.array([last], dtype=np.uint64), np.array([tokens[-1]]))[0]
                self.memo[key] = prev + [int(entry)]
        return self.memo[key]


def _crop_length(rng, cache, block_size: int) -> int:
    """Mostly an offset inside a block (often the last shared one), sometimes anywhere."""
    length = len(cache)
    if length and rng.random() < 0.6:
        block = int(rng.integers(0, -(-length // block_size)))
        return min(length, block * block_size + int(rng.integers(0, block_size)))
    return int(rng.integers(0, length + 1))


def _branch(rng, cache, source, source_tokens: list, vocab_size: int, block_size: int):
    """Share ``source``'s committed full blocks, crop inside the last of them, write on: copy-on-write. Returns
    the tokens the cache holds afterwards (also where an allocation fails part way) and whether the write copied a
    shared block; None where nothing is shared."""
    from specverify.reference.paged import OutOfBlocks

    shared = source_tokens[: source.num_committed // block_size * block_size]
    if source is cache or not shared or source.model is not cache.model:
        return None
    length = len(shared) - int(rng.integers(0, block_size))
    new = rng.integers(0, vocab_size, size=int(rng.integers(1, block_size + 2))).tolist()
    cache.free()
    tokens = []
    copies = length % block_size != 0  # the write lands inside a block the source still holds
    try:
        cache.prefill(shared)
        tokens = shared[:length]
        cache.crop(length)
        cache.forward(new)
        tokens = tokens + new
    except OutOfBlocks:
        copies = False
    return tokens, copies


def _apply(op: str, rng, cache, tokens: list, prefixes, vocab_size: int, block_size: int) -> list:
    """Run one operation; return the cache's token list afterwards (what its flat reference holds)."""
    if op == "forward":
        new = rng.integers(0, vocab_size, size=int(rng.integers(1, 2 * block_size + 2))).tolist()
        cache.forward(new)
        return tokens + new
    if op == "prefill":
        cache.crop(cache.num_committed)
        tokens = tokens[: len(cache)]
        new = list(prefixes[int(rng.integers(len(prefixes)))]) if not tokens else [int(rng.integers(vocab_size))]
        cache.prefill(new)
        return tokens + new
    if op == "crop":
        length = _crop_length(rng, cache, block_size)
        cache.crop(length)
        return tokens[:length]
    if op == "commit":
        cache.commit(int(rng.integers(cache.num_committed, len(cache) + 1)))
        return tokens
    cache.free()
    return []


def _snapshot(cache):
    pool = cache.pool
    return (
        cache.entries(),
        cache.block_table,
        cache.num_committed,
        pool.num_free,
        tuple(pool.refcount(b) for b in range(pool.num_blocks)),
    )


def _check_all(i: int, op: str, caches, refs, pool, flat) -> None:
    for j, (cache, tokens) in enumerate(zip(caches, refs)):
        if cache.tokens != tokens or cache.kv.tolist() != flat(cache.model, tokens):
            raise PropertyFailure(
                "paged",
                f"op {i} ({op}): cache {j} holds other KV than a flat cache fed "
                f"{tokens!r} (a write into a shared block, or a stale slot)",
            )
        if len(cache.block_table) != -(-len(tokens) // pool.block_size):
            raise PropertyFailure(
                "paged",
                f"op {i} ({op}): cache {j} holds {len(cache.block_table)} blocks for "
                f"{len(tokens)} entries of block_size {pool.block_size}",
            )
    held = sum(len(c.block_table) for c in caches)
    if sum(pool.refcount(b) for b in range(pool.num_blocks)) != held or pool.num_free != sum(
        pool.refcount(b) == 0 for b in range(pool.num_blocks)
    ):
        raise PropertyFailure(
            "paged", f"op {i} ({op}): refcounts do not match the block tables (a leak or a double release)"
        )


def check_paged_operations(case: dict, *, cache_class=None, models=None, vocab_size: int = 6) -> dict:
    """Run ``case`` (from ``paged_cases``) on caches of ``cache_class`` (default ``PagedCache``) in a shared pool;
    raise ``PropertyFailure("paged")`` on the first operation after which a property fails. Returns counts of
    what happened: ``branch`` (shared another cache's blocks), ``copy-on-write`` (then wrote inside a shared
    block), ``out_of_blocks``."""
    from specverify.oracles import draft_near, make_vocab, random_target
    from specverify.reference.paged import BlockPool, OutOfBlocks, PagedCache

    check(
        isinstance(case, dict) and {"block_size", "num_caches", "num_ops", "seed"} <= set(case),
        f"case={case!r} must be a dict with block_size, num_caches, num_ops and seed (paged_cases).",
    )
    check(case["num_caches"] >= 1 and case["block_size"] >= 1, f"case={case!r} needs num_caches, block_size >= 1.")
    bs, rng = case["block_size"], np.random.default_rng(case["seed"])
    if models is None:
        target = random_target(make_vocab(vocab_size), seed=11)
        models = (target, draft_near(target, distance=0.5, seed=12))
    pool = BlockPool(max(3, case["num_caches"] * (-(-24 // bs))), bs)
    count = case["num_caches"]  # from three caches on, the last reads the second model (keys include the model)
    caches = [
        (cache_class or PagedCache)(pool, models[-1 if i == count - 1 and count >= 3 else 0]) for i in range(count)
    ]
    refs, flat, counts = [[] for _ in caches], _Flat(), {"branch": 0, "copy-on-write": 0, "out_of_blocks": 0}
    prefixes = [rng.integers(0, vocab_size, size=n * bs + extra).tolist() for n, extra in ((1, 0), (2, 0), (2, 1))]
    for i in range(case["num_ops"]):
        j = int(rng.integers(len(caches)))
        op = OPS[int(rng.choice(len(OPS), p=OP_WEIGHTS))]
        before, k = _snapshot(caches[j]), int(rng.integers(len(caches)))
        try:
            if op == "branch":
                branched = _branch(rng, caches[j], caches[k], refs[k], vocab_size, bs)
                if branched is not None:
                    refs[j] = branched[0]
                    counts["branch"] += 1
                    counts["copy-on-write"] += branched[1]
            else:
                refs[j] = _apply(op, rng, caches[j], refs[j], prefixes, vocab_size, bs)
        except OutOfBlocks:
            counts["out_of_blocks"] += 1
            if op != "prefill" and _snapshot(caches[j]) != before:  # prefill crops first, then may fail
                raise PropertyFailure("paged", f"op {i} ({op}) failed with OutOfBlocks but changed the cache")
            refs[j] = refs[j][: len(caches[j])]
        _check_all(i, op, caches, refs, pool, flat)
    for cache in caches:
        cache.free()
    if pool.num_free != pool.num_blocks:
        raise PropertyFailure("paged", f"every cache freed but {pool.num_free} of {pool.num_blocks} blocks are free")
    return counts
