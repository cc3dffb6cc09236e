"""The scenario matrix of each draft family (``specverify certify ... --drafts FAMILY``; docs/adapters.md).

Every family matrix has the four core scenarios (same names as the AR matrix, so the verdict rules apply as they
are) on that family's draft object, plus the scenarios where the family's own failure modes show. The factory
receives ``factory(target, draft)`` with ``draft`` the family's object from ``specverify.oracles.drafts`` (its
``family`` attribute names it). The pair specs are hashable and built deterministically (cached), like the toy ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import ClassVar

from specverify.enums import ScenarioKind
from specverify.oracles.pairs import ModelPair, ToyPairSpec
from specverify.params import SamplingParams

__all__ = ["DraftPairSpec", "drafts_matrix", "FAMILY_SCENARIOS"]


@dataclass(frozen=True)
class DraftPairSpec:
    """A toy target (``toy``'s target knobs) and a draft of family ``drafts`` built from toy drafts at
    ``draft_distance``: ``heads`` per-position heads (``markov``: plus a rank-``rank`` correction of ``strength``),
    the ``mtp`` shared module, ``ngram`` lookup of up to ``max_ngram`` tokens, a ``tree`` of ``shape`` with
    ``siblings``."""

    family: ClassVar[str] = "toy"
    drafts: str = "ar"
    toy: ToyPairSpec = ToyPairSpec()
    heads: int = 3
    rank: int = 2
    strength: float = 1.5
    offset: float = 0.0
    max_ngram: int = 3
    shape: tuple = (2, 2, 1)
    siblings: str = "iid"

    def build(self) -> ModelPair:
        return _build(self)


@lru_cache(maxsize=64)
def _build(spec: DraftPairSpec) -> ModelPair:
    from specverify.oracles import drafts as d
    from specverify.oracles.models import draft_near

    base = spec.toy.build()
    target, toy = base.target, spec.toy

    def near(offset: int) -> object:
        return draft_near(target, distance=toy.draft_distance, seed=toy.draft_seed + offset, zero_rate=toy.draft_zero)

    heads = tuple(near(17 * i) for i in range(spec.heads))
    draft = {
        "ar": lambda: base.draft,
        "heads": lambda: d.HeadsDraft(heads),
        "markov": lambda: d.MarkovDraft(
            heads, rank=spec.rank, strength=spec.strength, seed=toy.draft_seed, offset=spec.offset
        ),
        "mtp": lambda: d.MtpDraft(near(5)),
        "ngram": lambda: d.NgramDraft(target.vocab, max_ngram=spec.max_ngram),
        "tree": lambda: d.TreeDraft(near(0), shape=spec.shape, siblings=spec.siblings),
    }[spec.drafts]()
    return ModelPair(spec=spec, target=target, draft=draft)


P = SamplingParams
# name: (kind, exercises, core, changes to the scenario, changes to the toy pair, changes to the draft spec)
_COMMON = {
    "temperature-1": ("sampling", "first-position, middle and full acceptance; residual; bonus", True, {}, {}, {}),
    "eos-in-block": (
        "sampling",
        "EOS accepted inside a block ends the request there",
        True,
        dict(params=P(max_tokens=5)),
        dict(eos_bias=0.8),
        {},
    ),
    "max-tokens-not-multiple": (
        "sampling",
        "max_tokens not a multiple of γ+1 (cap inside a block)",
        True,
        dict(params=P(max_tokens=5)),
        {},
        {},
    ),
    "greedy": (
        "greedy",
        "temperature 0: output must equal the target's greedy output",
        True,
        dict(params=P(temperature=0.0, max_tokens=5), alone_prompts=40),
        dict(draft_distance=1.0, draft_seed=21),
        {},
    ),
    "temperature-0.5": (
        "sampling",
        "temperature applied to the family's law and the target's",
        False,
        dict(params=P(temperature=0.5, max_tokens=4)),
        {},
        {},
    ),
    "penalties": (
        "sampling",
        "penalty history along the drafts (each candidate's law given the candidates before it)",
        False,
        dict(params=P(repetition_penalty=1.8, frequency_penalty=0.6, presence_penalty=0.4, max_tokens=4)),
        dict(eos_bias=-2.0, vocab_size=5),
        {},
    ),
    "stop-spanning": (
        "sampling",
        "stop strings finishing inside a block",
        False,
        dict(params=P(stop=("ab", " b"), max_tokens=5)),
        dict(vocab_size=5),
        {},
    ),
}
FAMILY_SCENARIOS = {
    "ar": {},
    "heads": {
        "far-heads": ("sampling", "every head far from the target (rejections at every position)", False, {},
                      dict(draft_distance=1.0, draft_seed=11), {}),
    },
    "markov": {
        "strong-correction": ("sampling", "the Markov correction dominates the base logits", False, {}, {},
                              dict(strength=4.0)),
        "large-logits": ("sampling", "draft logits offset by 100 (same law): where bf16 rounding shows", False, {},
                         {}, dict(offset=100.0)),
    },
    "mtp": {"gamma-5": ("sampling", "the shared module applied 5 times", False,
                        dict(num_draft_tokens=5, params=P(max_tokens=4)), {}, {})},
    "ngram": {
        "repetitive": ("sampling", "a sharp target on a repetitive prompt: long matches accepted", False,
                       dict(prompt=(0, 1, 2, 0, 1, 2, 0), params=P(max_tokens=5)), dict(target_scale=3.0), {}),
    },
    "tree": {
        "tree-without-replacement": ("sampling", "siblings drawn without replacement (draft law updated)", False,
                                     {}, {}, dict(siblings="without-replacement")),
        "tree-top-k": ("sampling", "deterministic top-k siblings: the target's draw follows the matching child",
                       False, {}, {}, dict(siblings="top-k", shape=(3, 2, 1))),
        "tree-wide": ("sampling", "a wide first level (4 i.i.d. children)", False, {}, {}, dict(shape=(4, 1, 1))),
        "tree-padded": ("sampling", "fewer real top-k candidates than the shape (a top-k law): padded nodes", False,
                        dict(params=P(top_k=2, max_tokens=4)), dict(draft_distance=1.0, draft_seed=11),
                        dict(siblings="top-k", shape=(3, 2, 1))),
        "tree-positional": ("sampling", "a branching tree on a target whose law reads positions (node depth)",
                            False, {}, dict(target_positional=True), {}),
        "greedy-tree-positional": ("greedy", "greedy trees on a target whose law reads positions (node depth)",
                                   False, dict(params=P(temperature=0.0, max_tokens=5)),
                                   dict(target_positional=True, draft_distance=1.0, draft_seed=21), {}),
    },
}  # fmt: skip


_PROMPTS = {"ngram": (0, 1, 2, 0, 1)}  # a prompt lookup needs something to look up from the first round on


def drafts_matrix(drafts: str, base: dict) -> dict:
    """The scenarios of draft family ``drafts`` (``base``: the AR toy matrix, whose core scenarios give the
    defaults), in a stable order: the common ones, then the family's own."""
    out = {}
    for name, (kind, exercises, core, changes, toy, draft) in {**_COMMON, **FAMILY_SCENARIOS[drafts]}.items():
        template = base.get(name) or base["temperature-1"]
        pair = DraftPairSpec(drafts=drafts, toy=replace(ToyPairSpec(), **toy), **draft)
        fields = dict(name=name, kind=ScenarioKind(kind), exercises=exercises, core=core, pair=pair, members=())
        fields.update(params=template.params if name in base else P(max_tokens=4), alone_prompts=0)
        fields.update(num_draft_tokens=3, prompt=_PROMPTS.get(drafts, (0, 1)), seeded=True)
        fields.update(changes)
        out[name] = replace(template, **fields)
    return out
