"""Laws once per distinct cache state (reference/distinct.py): the same seed gives the same outcomes as before.

Two references: the per-row path kept beside it (``VectorizedDecoder(..., distinct_laws=False)``), and counts
recorded from the commit before the distinct path existed (``tests/data/distinct_before.json``, written by
``python tests/reference/test_distinct.py --write`` run with that commit first on ``sys.path``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from specverify import InvalidArgument, SamplingParams
from specverify.oracles import draft_near, make_vocab, random_target
from specverify.protocol import Request
from specverify.reference import VectorizedDecoder

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "distinct_before.json"
DRAWS = 2000  # per-row comparison
FIXTURE_DRAWS = 400  # keeps the committed fixture small
VOCAB = make_vocab(8)
TARGET = random_target(VOCAB, seed=3, eos_bias=-1.0)
DRAFT = draft_near(TARGET, distance=0.5, seed=7)
PAIRS = {
    "default": (TARGET, DRAFT),
    "draft_zero": (TARGET, draft_near(TARGET, distance=0.6, seed=7, zero_rate=0.4)),
    "target_zero": (
        random_target(VOCAB, seed=4, zero_rate=0.4, eos_bias=-1.0),
        draft_near(TARGET, distance=1.0, seed=8),
    ),
    "eos_heavy": (random_target(VOCAB, seed=5, eos_bias=0.8), DRAFT),
}
SHAPES = {  # name: (pair, prompt, params, γ)
    "off_g1": ("default", (0, 1), SamplingParams(max_tokens=6), 1),
    "off_g3": ("default", (0, 1), SamplingParams(max_tokens=6), 3),
    "off_g5_long_prompt": ("default", (2, 0, 1, 4, 3), SamplingParams(max_tokens=7), 5),
    "one_token_prompt": ("default", (3,), SamplingParams(max_tokens=5), 2),
    "min_tokens_top_k": ("default", (0, 1), SamplingParams(max_tokens=7, min_tokens=3, top_k=4, temperature=0.7), 3),
    "top_p_min_p_stop_bad": (
        "default", (0, 1), SamplingParams(max_tokens=5, top_p=0.8, min_p=0.05, stop=("ab", " b"), bad_token_ids=(2,)), 3
    ),
    "greedy": ("default", (0, 1), SamplingParams(max_tokens=6, temperature=0.0), 3),
    "draft_zero": ("draft_zero", (0, 1), SamplingParams(max_tokens=5), 3),
    "target_zero": ("target_zero", (0, 1), SamplingParams(max_tokens=5), 3),
    "eos_in_block": ("eos_heavy", (0, 1), SamplingParams(max_tokens=6, ignore_eos=False), 4),
    "penalties": ("default", (0, 1), SamplingParams(max_tokens=5, repetition_penalty=1.3, presence_penalty=0.2), 3),
}  # fmt: skip


def _counts(decoder, name: str):
    pair, prompt, params, gamma = SHAPES[name]
    return decoder.sample(Request(prompt, params, gamma, seed=1234), FIXTURE_DRAWS)


def _decoder(name: str, **kw) -> VectorizedDecoder:
    target, draft = PAIRS[SHAPES[name][0]]
    return VectorizedDecoder(target, draft, **kw)


def _as_json(counts) -> dict:
    return {
        "outcomes": sorted([list(tokens), reason, c] for (tokens, reason), c in counts.outcomes.items()),
        "accepted": sorted([k, c] for k, c in counts.accepted.items()),
        "rounds": sorted([k, c] for k, c in counts.rounds.items()),
        "positions": None if counts.positions is None else [list(p) for p in counts.positions],
    }


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_same_counts_as_the_commit_before(name):
    before = json.loads(FIXTURE.read_text())[name]
    after = _as_json(_counts(_decoder(name), name))
    assert after == before, f"{name}: a fixed seed's counts changed. Reproduce: pytest {__file__} -k {name}"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_distinct_path_equals_per_row_path(name):
    fast, slow = _decoder(name), _decoder(name, distinct_laws=False)
    pair, prompt, params, gamma = SHAPES[name]
    seeds = np.arange(DRAWS, dtype=np.uint64) * np.uint64(7919) + np.uint64(5)
    a = fast.run_group(prompt, params, gamma, seeds)
    b = slow.run_group(prompt, params, gamma, seeds)
    for field in ("tokens", "lengths", "reasons", "accepted", "chunk_sizes", "verified"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), f"{name}: {field} differs"


def test_distinct_path_is_taken_where_it_applies():
    import specverify.reference.distinct as distinct

    calls = []
    original = distinct.distinct_round
    try:
        distinct.distinct_round = lambda *a: (calls.append(1), original(*a))[1]
        _counts(_decoder("off_g3"), "off_g3")
        assert calls, "the processors-off group did not take the distinct path"
        calls.clear()
        _counts(_decoder("penalties"), "penalties")
        assert not calls, "penalties keep their state per row: that group must take the per-row path"
    finally:
        distinct.distinct_round = original


def test_batch_call_matches_per_row_path():
    requests = [
        Request(SHAPES[name][1], SHAPES[name][2], SHAPES[name][3], seed=100 + i)
        for i, name in enumerate(["off_g3", "greedy", "min_tokens_top_k", "off_g3", "one_token_prompt"] * 3)
    ]
    requests.append(Request((5, 2), SamplingParams(max_tokens=6), 3, seed=7))  # another prompt, one group
    assert _decoder("off_g3")(requests) == _decoder("off_g3", distinct_laws=False)(requests)


def test_subclasses_keep_the_per_row_path():
    class Sub(VectorizedDecoder):
        pass

    assert VectorizedDecoder(TARGET, DRAFT).distinct_laws
    assert not Sub(TARGET, DRAFT).distinct_laws
    assert not VectorizedDecoder(TARGET, DRAFT, distinct_laws=False).distinct_laws
    with pytest.raises(InvalidArgument, match="distinct_laws"):
        VectorizedDecoder(TARGET, DRAFT, distinct_laws=1)


@pytest.mark.parametrize("model", [TARGET, DRAFT, PAIRS["draft_zero"][1]], ids=["table", "mix", "mix_zero"])
def test_forward_distinct_expands_to_forward(model):
    rng = np.random.default_rng(0)
    a, b = model.new_batch_cache(300, 8), model.new_batch_cache(300, 8)
    rows = np.arange(300)
    for width in (2, 1, 3):
        tokens = rng.integers(0, 3, (300, width))  # few distinct histories
        full = a.forward(rows, tokens)
        logits, index = b.forward_distinct(rows, tokens)
        assert logits.shape[0] < 300 * width
        assert index.shape == tokens.shape
        assert torch.equal(logits[torch.from_numpy(index)], full)
        assert np.array_equal(a.kv, b.kv) and np.array_equal(a.lengths, b.lengths)


@pytest.mark.parametrize("model", [TARGET, DRAFT, PAIRS["draft_zero"][1]], ids=["table", "mix", "mix_zero"])
def test_forward_distinct_with_group_hints_expands_to_forward(model):
    """The (group, token) hint gives the same logits as forward, and a wrong hint is caught and ignored."""
    rng = np.random.default_rng(1)
    a, b = model.new_batch_cache(300, 8), model.new_batch_cache(300, 8)
    rows = np.arange(300)
    tokens = rng.integers(0, 3, (300, 1))
    a.forward(rows, tokens)
    _, groups = b.forward_distinct(rows, tokens)
    groups = groups[:, 0]
    for hint in ("right", "wrong", "right"):
        tokens = rng.integers(0, 3, (300, 1))
        full = a.forward(rows, tokens)
        given = groups if hint == "right" else np.zeros_like(groups)  # "wrong": every row one group
        logits, index = b.forward_distinct(rows, tokens, groups=given)
        assert torch.equal(logits[torch.from_numpy(index)], full), hint
        assert logits.shape[0] < 300 and np.array_equal(a.kv, b.kv)
        groups = index[:, 0]


@pytest.mark.parametrize("rows", [np.arange(10, 40), np.array([3, 7, 8, 20, 49]), np.array([5])])
def test_fill_stores_what_forward_stores(rows):
    a, b = TARGET.new_batch_cache(50, 6), TARGET.new_batch_cache(50, 6)
    a.forward(rows, np.tile(np.array([4, 0, 2]), (rows.size, 1)))
    b.fill(rows, np.array([4, 0, 2]))
    assert np.array_equal(a.kv, b.kv) and np.array_equal(a.tokens, b.tokens)
    assert np.array_equal(a.lengths, b.lengths)
    with pytest.raises(InvalidArgument, match="empty rows"):
        b.fill(rows, np.array([1]))


@pytest.mark.parametrize("vocab", [3, 8, 13, 16])  # the counts go 8 comparisons to a word: short and long rows
def test_sample_rows_equals_sample_from_uniforms(vocab):
    from specverify.reference.distinct import sample_rows
    from specverify.sampling import sample_from_uniforms

    gen = torch.Generator().manual_seed(vocab)
    probs = torch.rand((6, vocab), generator=gen, dtype=torch.float64)
    probs[1, vocab // 2 + 1 :] = 0.0  # trailing zeros: a uniform near 1 must not land on them
    probs[2] = 0.0  # no mass: -1
    probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-300)
    index = np.random.default_rng(1).integers(0, 6, 4000)
    u = torch.rand(4000, generator=gen, dtype=torch.float64)
    u[:50] = 1.0 - 2.0**-53  # the sampler's rare path: rounding can carry u * total up to total
    expected = sample_from_uniforms(probs[torch.from_numpy(index)], u)
    assert torch.equal(sample_rows(probs, index, u), expected)


def _write() -> None:  # run with the commit before the distinct path first on sys.path
    out = {}
    for name in sorted(SHAPES):
        target, draft = PAIRS[SHAPES[name][0]]
        out[name] = _as_json(_counts(VectorizedDecoder(target, draft), name))
    FIXTURE.write_text(json.dumps(out, separators=(",", ":")) + "\n")


if __name__ == "__main__" and "--write" in sys.argv:
    _write()
