"""The transformers adapter's engine configurations (``--engine-config NAME``): ``dynamic-cache`` (the default) and
``static-cache``, the target's cache in ``generate()`` (option ``cache``); the decoder's docstring, "Caches and engine
configurations", says what each runs and the evidence each must show (the class of the cache ``generate()``
returned, counted per call)."""

from __future__ import annotations

from specverify.protocol import EngineConfig

__all__ = ["ENGINE_CONFIGS", "DEFAULT_ENGINE_CONFIG"]


def _engine_configs() -> dict:
    return {
        "dynamic-cache": EngineConfig(
            {"cache": "dynamic"},
            doc="the target's DynamicCache (cache_implementation unset): the default",
            reaches={"dynamic_cache_calls": 1},
        ),
        "static-cache": EngineConfig(
            {"cache": "static"},
            doc="the target's StaticCache (cache_implementation='static'; rollback moves its length back)",
            reaches={"static_cache_calls": 1},
        ),
    }


ENGINE_CONFIGS = _engine_configs()
DEFAULT_ENGINE_CONFIG = "dynamic-cache"  # cache_implementation unset: the call made without any configuration
