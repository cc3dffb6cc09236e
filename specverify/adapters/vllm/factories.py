"""The vLLM adapter's factories, one per method of its table (``methods.METHODS``), made from the table.

Each is named as the package names it, ``specverify.adapters.vllm:NAME`` (its ``__module__`` is the package, which
re-exports it), so it is picklable by that name for the certifier's worker process and certificates name it so.
"""

from __future__ import annotations

from typing import Callable

from specverify.adapters.vllm.configs import DEFAULT_ENGINE_CONFIG, ENGINE_CONFIGS
from specverify.adapters.vllm.decoder import VllmDecoder
from specverify.adapters.vllm.methods import COMMON_OPTIONS, METHODS

PACKAGE = __name__.rpartition(".")[0]  # specverify.adapters.vllm: the name the factories are certified under


def _factory(name: str) -> Callable:
    """The module-level factory of ``METHODS[name]``, picklable by name (``specverify.adapters.vllm:NAME``)."""

    def factory(target, draft, **options) -> VllmDecoder:
        return VllmDecoder(target, draft, name, **options)

    spec = METHODS[name]
    accepted = {**COMMON_OPTIONS, **spec.options}
    factory.__name__ = factory.__qualname__ = name
    factory.__module__ = PACKAGE
    factory.__doc__ = f"{spec.summary} Engine options (defaults): {accepted!r}."
    factory.engine_options = dict(accepted)  # checked before any work: a wrong key is a usage error at once
    factory.draft_family = "ar"  # the checkpoint AR matrix only (engine.check_draft_family)
    factory.checkpoint_pairs = spec.checkpoint_pairs  # its pair set: the Llama pairs, or the MiMo pair for mtp
    factory.engine_configs = dict(ENGINE_CONFIGS)  # --engine-config NAME (configs)
    factory.default_engine_config = DEFAULT_ENGINE_CONFIG
    factory.default_level = "standard"  # the pytest plugin's level unless one is given (testing.options)
    return factory


draft_model = _factory("draft_model")
draft_model_greedy = _factory("draft_model_greedy")
ngram = _factory("ngram")
plain = _factory("plain")
eagle = _factory("eagle")
eagle3 = _factory("eagle3")
medusa = _factory("medusa")
dflash = _factory("dflash")
mtp = _factory("mtp")
suffix = _factory("suffix")
