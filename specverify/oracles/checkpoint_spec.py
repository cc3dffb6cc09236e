"""The checkpoint family's specs (``CheckpointSpec``, ``CheckpointPairSpec``): plain data, light to import.

Scenario matrices name their model pairs at import time, so the specs and the digest that names their directories
import neither torch nor transformers; ``CheckpointPairSpec.build()`` imports ``specverify.oracles.checkpoint``
(the recipe, the model) when it is called; that module never imports this one (it reads a spec's fields).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from specverify.errors import check

if TYPE_CHECKING:
    from specverify.oracles.models import Vocab
    from specverify.oracles.pairs import ModelPair

__all__ = ["FORMAT_VERSION", "TOY_VOCAB_SIZES", "CheckpointSpec", "CheckpointPairSpec"]

# bump when the recipe of specverify.oracles.checkpoint (draw order, config, files) changes: it is part of every
# directory's hash
FORMAT_VERSION = 1
#: The vocabulary sizes the toy strings can hold (``oracles.models.make_vocab``: 15 strings and EOS; tested equal).
TOY_VOCAB_SIZES = range(2, 17)


@dataclass(frozen=True)
class CheckpointSpec:
    """A tiny Llama target, fully determined by these fields.

    ``eos_scale`` multiplies the EOS row of ``lm_head`` after the draw, so the EOS logit is exactly ``eos_scale`` times
    its unscaled value after every prefix (0: the EOS logit is 0 everywhere, which lowers the EOS rate; > 1 widens it).
    An additive EOS offset is not offered: Llama's head has no bias and its input is RMS-normalised, so no weight edit
    adds the same constant after every prefix.
    """

    family: ClassVar[str] = "checkpoint"
    format_version: ClassVar[int] = FORMAT_VERSION  # written into the checkpoint's metadata
    vocab_size: int = 6
    num_layers: int = 1
    hidden_size: int = 64
    head_dim: int = 32
    intermediate_size: int = 128
    init_scale: float = 0.2
    eos_scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        for name in ("vocab_size", "num_layers", "hidden_size", "head_dim", "intermediate_size", "seed"):
            value = getattr(self, name)
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= (0 if name == "seed" else 1),
                f"{name}={value!r} must be an int >= {0 if name == 'seed' else 1}.",
            )
        check(
            self.vocab_size in TOY_VOCAB_SIZES,
            f"vocab_size={self.vocab_size!r} must be an int in [{TOY_VOCAB_SIZES[0]}, {TOY_VOCAB_SIZES[-1]}] "
            "(the toy vocabulary's strings and EOS).",
        )
        check(
            self.head_dim % 2 == 0 and self.hidden_size % self.head_dim == 0,
            f"head_dim={self.head_dim!r} must be even and divide hidden_size={self.hidden_size!r} (rotary halves).",
        )
        check(
            isinstance(self.init_scale, (int, float)) and math.isfinite(self.init_scale) and self.init_scale > 0,
            f"init_scale={self.init_scale!r} must be a finite number > 0 (the std of every matrix entry).",
        )
        check(
            isinstance(self.eos_scale, (int, float)) and math.isfinite(self.eos_scale),
            f"eos_scale={self.eos_scale!r} must be a finite number (1 = no change to the EOS row).",
        )
        object.__setattr__(self, "init_scale", float(self.init_scale))
        object.__setattr__(self, "eos_scale", float(self.eos_scale))

    @property
    def vocab(self) -> Vocab:
        from specverify.oracles.models import make_vocab

        return make_vocab(self.vocab_size)

    def key(self) -> str:
        """Hex digest naming this target's directory (spec fields and ``FORMAT_VERSION``)."""
        return _digest({"kind": "target", **_fields(self)})


@dataclass(frozen=True)
class CheckpointPairSpec:
    """A checkpoint ``target`` and a draft equal to it plus ``draft_sigma`` · N(0, 1) noise on every parameter,
    drawn from ``default_rng(draft_seed)`` (σ = 0: a copy). ``build()`` writes both if needed and is cached."""

    family: ClassVar[str] = "checkpoint"
    target: CheckpointSpec = CheckpointSpec()
    draft_sigma: float = 0.005
    draft_seed: int = 1

    def __post_init__(self):
        check(isinstance(self.target, CheckpointSpec), f"target={self.target!r} must be a CheckpointSpec.")
        check(
            isinstance(self.draft_sigma, (int, float)) and math.isfinite(self.draft_sigma) and self.draft_sigma >= 0,
            f"draft_sigma={self.draft_sigma!r} must be a finite number >= 0 (0 = the draft copies the target).",
        )
        check(
            isinstance(self.draft_seed, int) and self.draft_seed >= 0,
            f"draft_seed={self.draft_seed!r} must be an int >= 0.",
        )
        object.__setattr__(self, "draft_sigma", float(self.draft_sigma))

    def key(self) -> str:
        """Hex digest naming the draft's directory (target fields, σ, draft seed and ``FORMAT_VERSION``)."""
        return _digest(
            {
                "kind": "draft",
                "target": _fields(self.target),
                "draft_sigma": self.draft_sigma,
                "draft_seed": self.draft_seed,
            }
        )

    def build(self) -> ModelPair:
        from specverify.oracles.checkpoint import _build_pair, cache_root  # the recipe and the model: heavy

        return _build_pair(self, str(cache_root()))


def _fields(spec: CheckpointSpec) -> dict:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


def _digest(payload: dict) -> str:
    text = json.dumps({"format": FORMAT_VERSION, **payload}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
