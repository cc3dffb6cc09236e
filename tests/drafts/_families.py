"""Toy draft objects of every family on one target, shared by the tests of this directory."""

from __future__ import annotations

from functools import lru_cache

from specverify.oracles import draft_near, make_vocab, random_target
from specverify.oracles.drafts import HeadsDraft, MarkovDraft, MtpDraft, NgramDraft, TreeDraft

VOCAB = make_vocab(5)
PROMPT = (0, 1, 0)


@lru_cache(maxsize=4)
def target(eos_bias: float = -1.0):
    return random_target(VOCAB, seed=3, eos_bias=eos_bias)


@lru_cache(maxsize=32)
def draft(name: str, eos_bias: float = -1.0):
    """``name``: a chain family, or ``tree-iid`` / ``tree-without-replacement`` / ``tree-top-k``."""
    t = target(eos_bias)
    heads = tuple(draft_near(t, distance=0.6, seed=30 + i) for i in range(3))
    if name.startswith("tree-"):
        return TreeDraft(draft_near(t, distance=0.6, seed=7), shape=(3, 2, 1), siblings=name[5:])
    return {
        "ar": lambda: draft_near(t, distance=0.6, seed=7),
        "heads": lambda: HeadsDraft(heads),
        "markov": lambda: MarkovDraft(heads),
        "mtp": lambda: MtpDraft(draft_near(t, distance=0.5, seed=40)),
        "ngram": lambda: NgramDraft(VOCAB),
    }[name]()


CHAINS = ("ar", "heads", "markov", "mtp", "ngram")
TREES = ("tree-iid", "tree-without-replacement", "tree-top-k")
