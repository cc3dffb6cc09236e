"""Model pairs: the (target, draft) a scenario runs on, named by a hashable spec.

A spec says how to build a pair deterministically; the certifier keeps one decoder per spec (engines pay a start-up
per pair). ``ToyPairSpec`` builds the toy family; a checkpoint family adds its own spec with the same two members
(``family`` and ``build()``), so scenarios, sessions and reports never look inside a spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Protocol

__all__ = ["PairSpec", "ModelPair", "ToyPairSpec"]


class PairSpec(Protocol):
    """What every model-pair spec provides: a family name and a deterministic, cached ``build()``."""

    family: ClassVar[str]

    def build(self) -> ModelPair: ...


@dataclass(frozen=True, eq=False)
class ModelPair:
    """A built ``target`` and ``draft`` sharing one vocabulary, and the ``spec`` that built them."""

    spec: PairSpec
    target: object
    draft: object

    @property
    def vocab(self) -> object:
        return self.target.vocab


@dataclass(frozen=True)
class ToyPairSpec:
    """A toy target ``random_target(make_vocab(vocab_size), seed=target_seed, ...)`` and a draft mixed towards an
    independent model by ``draft_distance`` (0 = copy of the target, 1 = independent); ``*_zero`` give rows
    exact zeros (softmax cannot: toy-only); ``target_ties`` gives that share of the target's rows an exact tie at the
    top (greedy ties on purpose: toy-only); ``target_window`` > 0 gives the target a sliding window of that many tokens
    (``specverify.oracles.window``: toy-only); ``target_positional`` makes its law depend on positions too
    (``specverify.oracles.positional``: trees verified at a wrong position show; toy-only); ``target_recurrent``
    gives the target a recurrent state a rollback must restore (``specverify.oracles.recurrent``: decoders that
    declare ``recurrent``; toy-only)."""

    family: ClassVar[str] = "toy"
    vocab_size: int = 4
    target_seed: int = 3
    target_scale: float = 1.0
    target_zero: float = 0.0
    eos_bias: float = -1.0
    draft_distance: float = 0.6
    draft_seed: int = 7
    draft_zero: float = 0.0
    target_ties: float = 0.0
    target_window: int = 0
    target_positional: bool = False
    target_recurrent: bool = False

    def build(self) -> ModelPair:
        return _build_toy(self)


@lru_cache(maxsize=64)
def _build_toy(spec: ToyPairSpec) -> ModelPair:
    from specverify.oracles.models import draft_near, make_vocab, random_target

    if spec.target_positional:
        from specverify.oracles.positional import positional_target

        target = positional_target(make_vocab(spec.vocab_size), seed=spec.target_seed, eos_bias=spec.eos_bias)
        draft = draft_near(target, distance=spec.draft_distance, seed=spec.draft_seed, zero_rate=spec.draft_zero)
        return ModelPair(spec=spec, target=target, draft=draft)
    if spec.target_recurrent:
        from specverify.oracles.recurrent import recurrent_target

        target = recurrent_target(make_vocab(spec.vocab_size), seed=spec.target_seed, eos_bias=spec.eos_bias)
        draft = draft_near(target, distance=spec.draft_distance, seed=spec.draft_seed, zero_rate=spec.draft_zero)
        return ModelPair(spec=spec, target=target, draft=draft)
    if spec.target_window:
        from specverify.oracles.window import window_target

        target = window_target(
            make_vocab(spec.vocab_size), seed=spec.target_seed, window=spec.target_window, eos_bias=spec.eos_bias
        )
        draft = draft_near(target, distance=spec.draft_distance, seed=spec.draft_seed, zero_rate=spec.draft_zero)
        return ModelPair(spec=spec, target=target, draft=draft)
    target = random_target(
        make_vocab(spec.vocab_size),
        seed=spec.target_seed,
        scale=spec.target_scale,
        zero_rate=spec.target_zero,
        eos_bias=spec.eos_bias,
        tie_rate=spec.target_ties,
    )
    draft = draft_near(target, distance=spec.draft_distance, seed=spec.draft_seed, zero_rate=spec.draft_zero)
    return ModelPair(spec=spec, target=target, draft=draft)
