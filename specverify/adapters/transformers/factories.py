"""The transformers adapter's factories, each named as the package names it (``specverify.adapters.transformers:NAME``:
its ``__module__`` is the package, which re-exports it), with its engine configurations (``configs``)."""

from __future__ import annotations

from specverify.adapters.transformers.configs import DEFAULT_ENGINE_CONFIG, ENGINE_CONFIGS, configs_for
from specverify.adapters.transformers.decoder import TransformersDecoder

PACKAGE = __name__.rpartition(".")[0]  # specverify.adapters.transformers: the name the factories are certified under


def _configured(factory):
    factory.engine_configs, factory.default_engine_config = ENGINE_CONFIGS, DEFAULT_ENGINE_CONFIG
    factory.default_level = "standard"  # the pytest plugin's level unless one is given (testing.options)
    factory.__module__ = PACKAGE
    return factory


def _generator(factory):
    """``_configured`` with the configurations that also require the mode's candidate generator (``configs``)."""
    _configured(factory)
    factory.engine_configs = configs_for(factory.__name__)
    return factory


@_configured
def assisted(target, draft, *, workers: int | None = None, cache: str = "dynamic") -> TransformersDecoder:
    """Assisted generation (speculative sampling with ``draft`` as ``assistant_model``; greedy at temperature 0).
    ``workers``: processes for ``sample()`` (None: 2 on two cores or more; 0: in this process). ``cache``: the
    target's cache, ``"dynamic"`` or ``"static"`` (the configurations ``dynamic-cache``, ``static-cache``)."""
    return TransformersDecoder(target, draft, "assisted", workers=workers, cache=cache)


@_configured
def prompt_lookup(target, draft, *, workers: int | None = None, cache: str = "dynamic") -> TransformersDecoder:
    """Prompt-lookup decoding, ``prompt_lookup_num_tokens`` = γ; ``draft`` is ignored. ``workers`` and ``cache``
    as for ``assisted``."""
    return TransformersDecoder(target, draft, "prompt_lookup", workers=workers, cache=cache)


@_configured
def plain(target, draft, *, workers: int | None = None, cache: str = "dynamic") -> TransformersDecoder:
    """Plain ``generate()`` sampling, speculation off: the control for the two others. ``workers`` and ``cache``
    as for ``assisted``."""
    return TransformersDecoder(target, draft, "plain", workers=workers, cache=cache)


@_generator
def early_exit(
    target, draft, *, workers: int | None = None, cache: str = "dynamic", exit_layer: int = 0
) -> TransformersDecoder:
    """``EarlyExitCandidateGenerator``: the target drafts for itself with its first ``exit_layer`` layers
    (``assistant_early_exit``); ``draft`` is ignored, the target must be a checkpoint. ``workers`` and ``cache`` as
    for ``assisted``."""
    return TransformersDecoder(target, draft, "early_exit", workers=workers, cache=cache, exit_layer=exit_layer)


@_generator
def universal(
    target,
    draft,
    *,
    workers: int | None = None,
    cache: str = "dynamic",
    assistant_cache: str = "reuse",
    translator: str = "shipped",
) -> TransformersDecoder:
    """Assisted generation with different tokenizers: ``draft`` rewritten to a second tokenizer over the same strings
    with other ids and one extra string (``generators.universal_draft_dir``); transformers runs
    ``UniversalSpeculativeDecodingGenerator`` at temperature > 0 and ``AssistedCandidateGeneratorDifferentTokenizers``
    at 0. Checkpoint pairs only. ``assistant_cache="fresh"``: the opt-in workaround for the greedy generator's
    assistant cache (``generators._fresh_assistant_cache``); ``translator="id-order"``: the opt-in local patch of
    USD's logit scatter (``generators._id_ordered_translator``); configuration ``dynamic-cache-patched`` sets both.
    ``workers`` and ``cache`` as for ``assisted``."""
    return TransformersDecoder(
        target,
        draft,
        "universal",
        workers=workers,
        cache=cache,
        assistant_cache=assistant_cache,
        translator=translator,
    )


@_generator
def mtp(target, draft, *, workers: int | None = None, cache: str = "dynamic") -> TransformersDecoder:
    """``MTPCandidateGenerator`` (``use_mtp``): the target with one multi-token-prediction layer added
    (``generators.mtp_target_dir``; one draft a round whatever γ); ``draft`` is ignored. Runs with an opt-in
    workaround recorded in ``engine_info`` (``generators.Mtp``). ``workers`` and ``cache`` as for ``assisted``."""
    return TransformersDecoder(target, draft, "mtp", workers=workers, cache=cache)


@_generator
def dflash(target, draft, *, workers: int | None = None, cache: str = "dynamic") -> TransformersDecoder:
    """``DFlashTokenCandidateGenerator`` (``speculation_type="dflash"``): a one-layer DFlash drafter built from the
    target (``generators.dflash_draft``), γ drafts a round; ``draft`` is ignored. ``workers`` and ``cache`` as for
    ``assisted``."""
    return TransformersDecoder(target, draft, "dflash", workers=workers, cache=cache)
