"""The ONNX Runtime GenAI adapter's factories, each named as the package names it
(``specverify.adapters.onnxruntime_genai:NAME``), with their engine configurations.

- ``plain``: the target alone, speculation off (the control).
- ``draft_model``: the speculative model type (target and draft in one ``genai_config.json``), γ drafts a round
  (``max_draft_tokens``), the drafts sampled from the draft's truncated law.
- ``draft_model_adaptive``: the same with adaptive γ (``min_adaptive_k`` 1; the engine picks each round's width).
- ``ngram``: n-gram lookup in the request's own history (``ngram_size`` 2, ``max_draft_tokens`` γ); ``draft`` unused.

Configurations (``--engine-config NAME``) of the speculative factories: ``fixed`` (the default: every round
speculates) and ``cooldown`` (``cooldown=True``: after three rounds that accepted nothing, one plain step; its
evidence is a plain step, ``cooldown_steps`` in ``engine_info["state"]`` is not exported per generator, so it is
read from the rounds: the configuration is certified as its own decoder, its state not checked).

The speculative modes the installed version has and these factories leave out: MTP (``og.MtpGenerator``) needs a
main model exported with its hidden states and a one-layer MTP head (the builder's ``qwen_mtp`` path, Qwen3.5/3.6
only), which the checkpoint family has no export for; DFlash 2 and the ``Engine``-hosted drafters need the
continuous-batching ``Engine`` (docs/findings/onnxruntime_genai.md, "Not covered").
"""

from __future__ import annotations

from specverify.adapters.onnxruntime_genai.decoder import GenaiDecoder
from specverify.protocol import EngineConfig

__all__ = ["plain", "draft_model", "draft_model_adaptive", "ngram", "SPECULATIVE_CONFIGS"]

PACKAGE = __name__.rpartition(".")[0]

SPECULATIVE_CONFIGS = {
    "fixed": EngineConfig({"cooldown": False}, doc="every round speculates (the engine's default)"),
    "cooldown": EngineConfig({"cooldown": True}, doc="one plain step after three rounds that accepted nothing"),
}


def _named(factory, configs=None):
    factory.__module__ = PACKAGE
    if configs is not None:
        factory.engine_configs, factory.default_engine_config = configs, "fixed"
    return factory


def plain(target, draft) -> GenaiDecoder:
    """ONNX Runtime GenAI's ``Generator`` on the target alone: the control."""
    return GenaiDecoder(target, draft, "plain")


def draft_model(target, draft, *, cooldown: bool = False) -> GenaiDecoder:
    """The speculative model type with the draft checkpoint, γ drafts a round."""
    return GenaiDecoder(target, draft, "draft_model", cooldown=cooldown)


def draft_model_adaptive(target, draft, *, cooldown: bool = False) -> GenaiDecoder:
    """The speculative model type with adaptive γ (``min_adaptive_k`` 1)."""
    return GenaiDecoder(target, draft, "draft_model_adaptive", cooldown=cooldown)


def ngram(target, draft, *, cooldown: bool = False) -> GenaiDecoder:
    """N-gram lookup drafts (``ngram_size`` 2, γ a round) on the target alone; ``draft`` is not used."""
    return GenaiDecoder(target, draft, "ngram", cooldown=cooldown)


_named(plain)
for _factory in (draft_model, draft_model_adaptive, ngram):
    _named(_factory, SPECULATIVE_CONFIGS)
