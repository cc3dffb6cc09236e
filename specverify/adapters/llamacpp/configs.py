"""The llama.cpp adapter's engine configurations (``--engine-config NAME``): the presets of the Python factories and of
the server factories, and the states each must show.

The Python factories (docs/adapters.md, "Engine configurations"): ``cache-prompt`` (``cache_prompt=True``, the default)
is ``generate()``'s own prompt cache: it keeps the KV entries of the longest common prefix of the previous call's tokens
and the new prompt (llama.py:917-968; a prompt met whole is evaluated from its last token, or, when the context holds
exactly it and its logits are live, sampled at once without any evaluation, :929-938); ``no-cache-prompt``
(``cache_prompt=False``) calls ``Llama.reset()`` before each request (``n_tokens`` = 0, :656), so every prompt is
evaluated from its first token. The evidence is read from the engine (``bindings._PromptCacheLog``): ``Llama.n_tokens``
(the tokens its KV cache keeps) at the first ``eval`` of each request, counted in ``engine_info["state"]`` as
``cache_hit_requests``, ``cached_prompt_tokens`` and ``long_prefix_hits`` (requests that kept at least ``LONG_PREFIX`` =
32 tokens). Both prompt-cache presets add the ``long-prompt`` and ``multi-turn`` scenarios to their matrix
(``CACHE_SCENARIOS``: turn 1, then turn 2, its prompt and whole output with EOS, which meets a cache holding turn 1 or
an earlier turn 2 whole and keeps 32 tokens, one of them written by decoding), and ``cache-prompt`` needs a hit and a
long one (``CACHE_REACHES``). The server factories: ``slots`` (``-np 4``, a call's requests sent four at a time: the
default), ``cache-prompt`` (``-np 1``, ``cache_prompt: true`` sent: each request reuses the slot's common prefix with
the last one) and ``no-cache-prompt`` (``-np 1``, ``cache_prompt: false``); their evidence is ``server.ServerEvidence``.
``context-shift`` is listed, never run: no law is defined for what a target continues from once the server has discarded
half of a slot's context, so it is not covered.
"""

from __future__ import annotations

from specverify.protocol import EngineConfig

__all__ = ["PYTHON_CONFIGS", "SERVER_CONFIGS", "CACHE_SCENARIOS", "CACHE_REACHES"]

_UNDEFINED_SHIFT = (
    "no law is defined for context shift: once a slot's context is full the server discards half of it "
    "(--context-shift) and the target continues from a history it was not given, which no oracle here models"
)
#: The scenarios a prompt-cache configuration adds to its matrix (matrix_checkpoint.CONFIGURATION_SCENARIOS): turn 1
#: (31 tokens), then turn 2 (its prompt and whole output, EOS included), which meets a cache holding turn 1.
CACHE_SCENARIOS = ("long-prompt", "multi-turn")
#: What a prompt-cache configuration must show: a hit, and a turn 2 whose reused prefix holds a decoded token.
CACHE_REACHES = {"cache_hit_requests": 1, "long_prefix_hits": 1}
#: The Python factories' configurations: generate()'s prompt cache on (the default) or off.
PYTHON_CONFIGS = {
    "cache-prompt": EngineConfig(
        {"cache_prompt": True},
        doc="generate()'s prompt cache: the KV of the common prefix with the last call kept (the default)",
        reaches=CACHE_REACHES,
        scenarios=CACHE_SCENARIOS,
    ),
    "no-cache-prompt": EngineConfig(
        {"cache_prompt": False},
        doc="Llama.reset() before each request: every prompt evaluated from its start",
        scenarios=CACHE_SCENARIOS,
    ),
}
#: The server factories' configurations (the evidence: server.ServerEvidence).
SERVER_CONFIGS = {
    "slots": EngineConfig(
        {"slots": 4},
        doc="-np 4, a call's requests served four at a time, distinct slots in one llama_decode (the default)",
        reaches={"distinct_slots": 2, "parallel_slot_decodes": 1},
    ),
    "cache-prompt": EngineConfig(
        {"slots": 1, "cache_prompt": True},
        doc="-np 1, cache_prompt: true: each request reuses the slot's common prefix with the last one",
        reaches=CACHE_REACHES,
        scenarios=CACHE_SCENARIOS,
    ),
    "no-cache-prompt": EngineConfig(
        {"slots": 1, "cache_prompt": False},
        doc="-np 1, cache_prompt: false: every prompt evaluated from its start",
        scenarios=CACHE_SCENARIOS,
    ),
    "context-shift": EngineConfig({}, doc="--context-shift past a slot's context", unreachable=_UNDEFINED_SHIFT),
}
