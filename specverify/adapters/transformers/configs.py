"""The transformers adapter's engine configurations (``--engine-config NAME``): ``dynamic-cache`` (the default) and
``static-cache``, the target's cache in ``generate()`` (option ``cache``); the decoder's docstring, "Caches and engine
configurations", says what each runs and the evidence each must show (the class of the cache ``generate()``
returned, counted per call). The factories of the newer candidate generators (``generators``) also require the
generator's own class among the calls (``calls_<class>``, counted per call from the generator ``generate()`` built):
``configs_for(mode)``."""

from __future__ import annotations

from specverify.protocol import EngineConfig

__all__ = ["ENGINE_CONFIGS", "DEFAULT_ENGINE_CONFIG", "GENERATOR_CLASSES", "configs_for"]

# the candidate generator each newer mode must reach (universal: the sampling one; its greedy twin,
# AssistedCandidateGeneratorDifferentTokenizers, is counted too but greedy scenarios are fewer)
GENERATOR_CLASSES = {
    "early_exit": "EarlyExitCandidateGenerator",
    "universal": "UniversalSpeculativeDecodingGenerator",
    "mtp": "MTPCandidateGenerator",
    "dflash": "DFlashTokenCandidateGenerator",
}


def configs_for(mode: "str | None" = None) -> dict:
    """The two configurations; for a mode of ``GENERATOR_CLASSES`` each also requires its generator's calls."""
    extra = {f"calls_{GENERATOR_CLASSES[mode]}": 1} if mode in GENERATOR_CLASSES else {}
    out = {
        "dynamic-cache": EngineConfig(
            {"cache": "dynamic"},
            doc="the target's DynamicCache (cache_implementation unset): the default",
            reaches={"dynamic_cache_calls": 1, **extra},
        ),
        "static-cache": EngineConfig(
            {"cache": "static"},
            doc="the target's StaticCache (cache_implementation='static'; rollback moves its length back)",
            reaches={"static_cache_calls": 1, **extra},
        ),
    }
    if mode in ("universal", "mtp", "dflash"):  # finding 7's workaround: a StaticCache with room for the overshoot
        out["static-cache-headroom"] = EngineConfig(
            {"cache": "static-headroom"},
            doc="the target's StaticCache sized γ + 1 past generate()'s max_length - 1 (max_cache_len): the "
            "workaround for drafts past the length cap (docs/findings/transformers.md, finding 7)",
            reaches={"static_cache_calls": 1, **extra},
        )
    if mode == "universal":  # the opt-in workarounds of generators._fresh_assistant_cache, _id_ordered_translator
        out["dynamic-cache-patched"] = EngineConfig(
            {"cache": "dynamic", "assistant_cache": "fresh", "translator": "id-order"},
            doc="the DynamicCache, with the two opt-in workarounds of docs/findings/transformers.md: the greedy "
            "different-tokenizer assistant's cache dropped every round, USD's logits scattered in the pruned head's "
            "order",
            reaches={"dynamic_cache_calls": 1, **extra},
        )
    return out


ENGINE_CONFIGS = configs_for()
DEFAULT_ENGINE_CONFIG = "dynamic-cache"  # cache_implementation unset: the call made without any configuration
