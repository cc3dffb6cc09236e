"""The checkpoint family's specs (``CheckpointSpec``, ``CheckpointPairSpec``; ``MimoSpec``, ``MimoPairSpec``): plain
data, light to import.

Scenario matrices name their model pairs at import time, so the specs and the digest that names their directories
import neither torch nor transformers; ``CheckpointPairSpec.build()`` imports ``specverify.oracles.checkpoint``
(the recipe, the model) when it is called, ``MimoPairSpec.build()`` ``specverify.oracles.checkpoint_mimo``; those
modules never import this one (they read a spec's fields).

Two architectures (docs/design.md, model families): the Llama targets and drafts of ``CheckpointPairSpec``, and one
MiMo target (Qwen2 with multi-token-prediction layers inside it) for the engine methods whose drafts live inside the
target (vLLM's ``mtp``): its pair's draft is the target itself. A spec's ``architecture`` tells the recipes apart.
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

__all__ = [
    "FORMAT_VERSION",
    "MIMO_FORMAT_VERSION",
    "TOY_VOCAB_SIZES",
    "CheckpointSpec",
    "CheckpointPairSpec",
    "MimoSpec",
    "MimoPairSpec",
]

# bump when the recipe of specverify.oracles.checkpoint (draw order, config, files) changes: it is part of every
# directory's hash
FORMAT_VERSION = 2  # 2: max_position_embeddings 128 (was 64), for prompts past two KV blocks
# the same for the MiMo recipe of specverify.oracles.checkpoint_mimo (its own counter: the Llama directories stay)
MIMO_FORMAT_VERSION = 2  # 2: max_position_embeddings 128
#: The vocabulary sizes the toy strings can hold (``oracles.models.make_vocab``: 15 strings and EOS; tested equal).
TOY_VOCAB_SIZES = range(2, 17)


def _check_model_fields(spec, ints: tuple) -> None:
    """The checks every checkpoint model spec shares: ``ints`` are ints >= 1 (``seed`` >= 0), the vocabulary fits the
    toy strings, ``head_dim`` is even and divides ``hidden_size``, ``init_scale`` > 0 and ``eos_scale`` finite (both
    stored as floats)."""
    for name in ints:
        value = getattr(spec, name)
        low = 0 if name == "seed" else 1
        check(
            isinstance(value, int) and not isinstance(value, bool) and value >= low,
            f"{name}={value!r} must be an int >= {low}.",
        )
    check(
        spec.vocab_size in TOY_VOCAB_SIZES,
        f"vocab_size={spec.vocab_size!r} must be an int in [{TOY_VOCAB_SIZES[0]}, {TOY_VOCAB_SIZES[-1]}] "
        "(the toy vocabulary's strings and EOS).",
    )
    check(
        spec.head_dim % 2 == 0 and spec.hidden_size % spec.head_dim == 0,
        f"head_dim={spec.head_dim!r} must be even and divide hidden_size={spec.hidden_size!r} (rotary halves).",
    )
    check(
        isinstance(spec.init_scale, (int, float)) and math.isfinite(spec.init_scale) and spec.init_scale > 0,
        f"init_scale={spec.init_scale!r} must be a finite number > 0 (the std of every drawn entry).",
    )
    check(
        isinstance(spec.eos_scale, (int, float)) and math.isfinite(spec.eos_scale),
        f"eos_scale={spec.eos_scale!r} must be a finite number (1 = no change to the EOS row).",
    )
    object.__setattr__(spec, "init_scale", float(spec.init_scale))
    object.__setattr__(spec, "eos_scale", float(spec.eos_scale))


@dataclass(frozen=True)
class CheckpointSpec:
    """A tiny Llama target, fully determined by these fields.

    ``eos_scale`` multiplies the EOS row of ``lm_head`` after the draw, so the EOS logit is exactly ``eos_scale`` times
    its unscaled value after every prefix (0: the EOS logit is 0 everywhere, which lowers the EOS rate; > 1 widens it).
    An additive EOS offset is not offered: Llama's head has no bias and its input is RMS-normalised, so no weight edit
    adds the same constant after every prefix.
    """

    family: ClassVar[str] = "checkpoint"
    architecture: ClassVar[str] = "llama"
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
        _check_model_fields(self, ("vocab_size", "num_layers", "hidden_size", "head_dim", "intermediate_size", "seed"))

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


@dataclass(frozen=True)
class MimoSpec:
    """A tiny MiMo target (``MiMoForCausalLM``, ``model_type`` "qwen2"): a Qwen2 model (q/k/v biases, ``kv_heads``
    key/value heads, untied LM head) plus ``mtp_layers`` multi-token-prediction layers (``num_nextn_predict_layers``)
    stored under ``model.mtp_layers.N``, which vLLM's ``mtp`` method drafts with. The main model is drawn as the Llama
    family draws (norm weights ones, every other parameter, biases included, N(0, ``init_scale``²), in sorted name
    order from ``default_rng(seed)``; ``eos_scale`` scales the EOS row of the LM head); the MTP layers are derived
    from the main layer, not drawn (``specverify.oracles.checkpoint_mimo``). The law ignores the MTP layers."""

    family: ClassVar[str] = "checkpoint"
    architecture: ClassVar[str] = "mimo"
    format_version: ClassVar[int] = MIMO_FORMAT_VERSION
    vocab_size: int = 6
    num_layers: int = 1
    hidden_size: int = 64
    head_dim: int = 32
    kv_heads: int = 2
    intermediate_size: int = 128
    mtp_layers: int = 1
    init_scale: float = 0.2
    eos_scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        ints = ("vocab_size", "num_layers", "hidden_size", "head_dim", "kv_heads", "intermediate_size", "mtp_layers")
        _check_model_fields(self, (*ints, "seed"))
        heads = self.hidden_size // self.head_dim
        check(
            heads % self.kv_heads == 0,
            f"kv_heads={self.kv_heads!r} must divide the {heads} attention heads (hidden_size // head_dim).",
        )

    @property
    def num_heads(self) -> int:
        return self.hidden_size // self.head_dim

    @property
    def vocab(self) -> Vocab:
        from specverify.oracles.models import make_vocab

        return make_vocab(self.vocab_size)

    def key(self) -> str:
        """Hex digest naming this target's directory (spec fields and ``MIMO_FORMAT_VERSION``)."""
        return _digest({"kind": "mimo", **_fields(self)}, MIMO_FORMAT_VERSION)


@dataclass(frozen=True)
class MimoPairSpec:
    """The MiMo target and, as its draft, the same model: the drafts of the methods this pair serves come from the
    MTP layers inside the target directory, so only the target's law matters (docs/design.md, model families).
    ``pair_set`` names the matrix the pair belongs to (``specverify.certification.matrix.checkpoint.PAIR_SETS``)."""

    family: ClassVar[str] = "checkpoint"
    pair_set: ClassVar[str] = "mimo"
    target: MimoSpec = MimoSpec()

    def __post_init__(self):
        check(isinstance(self.target, MimoSpec), f"target={self.target!r} must be a MimoSpec.")

    def key(self) -> str:
        return self.target.key()

    def build(self) -> ModelPair:
        from specverify.oracles.checkpoint import cache_root
        from specverify.oracles.checkpoint_mimo import _build_pair  # the recipe and the forward: heavy

        return _build_pair(self, str(cache_root()))


def _fields(spec) -> dict:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


def _digest(payload: dict, version: int = FORMAT_VERSION) -> str:
    text = json.dumps({"format": version, **payload}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
