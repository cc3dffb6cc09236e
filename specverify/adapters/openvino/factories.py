"""The OpenVINO GenAI adapter's factories, each named as the package names it (``specverify.adapters.openvino:NAME``),
with their engine configurations (``CONFIGS``).

- ``plain``: ``LLMPipeline`` on the target, speculation off (the control).
- ``draft_model``: ``LLMPipeline(draft_model=...)``, ``num_assistant_tokens`` = γ.
- ``draft_model_confidence``: the same with ``assistant_confidence_threshold`` 0.4 (the draft's own confidence
  decides how many it proposes; γ not used).
- ``prompt_lookup``: ``LLMPipeline(prompt_lookup=True)``, ``max_ngram_size`` 2, ``num_assistant_tokens`` = γ.
- ``cb_plain`` / ``cb_draft_model``: the ``ContinuousBatchingPipeline`` without / with the draft: batches, a
  ``GenerationConfig`` and ``rng_seed`` per request.

Configurations (``--engine-config NAME``): ``f32`` (the default: f32 inference and KV cache, prefix caching on, the
engine's default), ``f32-no-prefix-cache`` (prefix caching off), ``f32-no-prefix-cache-whole-batch`` (prefix caching
off and a step budget no call reaches: the workaround of docs/findings/openvino.md's finding 3, where a batch's prompt
cut at its end leaves a draft token unchecked), ``default-precision`` (the engine's own precision:
bf16 inference and a u8 KV cache on this CPU; a configuration of its own, whose plain path need not meet the exact
law). Tree search (``tree_depth`` > 0) is EAGLE-3's and greedy-only by the engine's own validation
(docs/findings/openvino.md, "Not covered").
"""

from __future__ import annotations

from typing import Optional

from specverify.adapters.openvino.decoder import OpenvinoDecoder
from specverify.protocol import EngineConfig

__all__ = ["plain", "draft_model", "draft_model_confidence", "prompt_lookup", "cb_plain", "cb_draft_model", "CONFIGS"]

PACKAGE = __name__.rpartition(".")[0]
WHOLE_BATCH = 2**20  # tokens a step: more than CB_CHUNK requests of any scenario's prompt + 1 + γ

CONFIGS = {
    "f32": EngineConfig(
        {"precision": "f32", "prefix_caching": True}, doc="f32 inference and KV cache, prefix cache on"
    ),
    "f32-no-prefix-cache": EngineConfig(
        {"precision": "f32", "prefix_caching": False}, doc="f32, SchedulerConfig.enable_prefix_caching = False"
    ),
    "f32-no-prefix-cache-whole-batch": EngineConfig(
        {"precision": "f32", "prefix_caching": False, "max_num_batched_tokens": WHOLE_BATCH},
        doc="f32, prefix caching off, 2**20 tokens a step: no prompt is cut between steps (finding 3's workaround)",
    ),
    "default-precision": EngineConfig(
        {"precision": "default", "prefix_caching": True}, doc="the engine's own precision (bf16 / u8 KV cache here)"
    ),
}


def _options(precision, prefix_caching, max_num_batched_tokens) -> dict:
    return {"precision": precision, "prefix_caching": prefix_caching, "max_num_batched_tokens": max_num_batched_tokens}


def _named(factory):
    factory.__module__ = PACKAGE
    factory.engine_configs, factory.default_engine_config = CONFIGS, "f32"
    return factory


@_named
def plain(
    target, draft, *, precision: str = "f32", prefix_caching: bool = True, max_num_batched_tokens: Optional[int] = None
) -> OpenvinoDecoder:
    """``LLMPipeline`` on the target alone: the control (``prefix_caching`` has no effect on it)."""
    return OpenvinoDecoder(target, draft, "plain", **_options(precision, prefix_caching, max_num_batched_tokens))


@_named
def draft_model(
    target, draft, *, precision: str = "f32", prefix_caching: bool = True, max_num_batched_tokens: Optional[int] = None
) -> OpenvinoDecoder:
    """``LLMPipeline(draft_model=...)``, γ drafts a round (``num_assistant_tokens``)."""
    return OpenvinoDecoder(target, draft, "draft_model", **_options(precision, prefix_caching, max_num_batched_tokens))


@_named
def draft_model_confidence(
    target, draft, *, precision: str = "f32", prefix_caching: bool = True, max_num_batched_tokens: Optional[int] = None
) -> OpenvinoDecoder:
    """``LLMPipeline(draft_model=...)`` with ``assistant_confidence_threshold`` 0.4."""
    return OpenvinoDecoder(
        target, draft, "draft_model_confidence", **_options(precision, prefix_caching, max_num_batched_tokens)
    )


@_named
def prompt_lookup(
    target, draft, *, precision: str = "f32", prefix_caching: bool = True, max_num_batched_tokens: Optional[int] = None
) -> OpenvinoDecoder:
    """``LLMPipeline(prompt_lookup=True)``, γ drafts a round; ``draft`` is not used."""
    return OpenvinoDecoder(
        target, draft, "prompt_lookup", **_options(precision, prefix_caching, max_num_batched_tokens)
    )


@_named
def cb_plain(
    target, draft, *, precision: str = "f32", prefix_caching: bool = True, max_num_batched_tokens: Optional[int] = None
) -> OpenvinoDecoder:
    """``ContinuousBatchingPipeline`` on the target alone: batches, a seed per request."""
    return OpenvinoDecoder(target, draft, "cb_plain", **_options(precision, prefix_caching, max_num_batched_tokens))


@_named
def cb_draft_model(
    target, draft, *, precision: str = "f32", prefix_caching: bool = True, max_num_batched_tokens: Optional[int] = None
) -> OpenvinoDecoder:
    """``ContinuousBatchingPipeline`` with the draft model: batches, γ drafts a round, a seed per request."""
    return OpenvinoDecoder(
        target, draft, "cb_draft_model", **_options(precision, prefix_caching, max_num_batched_tokens)
    )
