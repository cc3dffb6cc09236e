"""The llama.cpp adapter's factories, each named as the package names it (``specverify.adapters.llamacpp:NAME``: its
``__module__`` is the package, which re-exports it), with its engine configurations (``configs``).

- ``python_draft_model``: ``llama_cpp.Llama(target.gguf, draft_model=...)`` with a ``LlamaDraftModel`` over a second
  ``Llama`` on the draft GGUF, proposing γ greedy tokens (``num_pred_tokens`` = γ per request).
- ``python_prompt_lookup``: the same with ``LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=γ)``.
- ``plain``: the same ``Llama`` without a draft (the control of the two above).
- ``server_draft_model``: ``llama-server -m target.gguf --spec-type draft-simple --spec-draft-model draft.gguf`` on
  127.0.0.1, one server per γ (``--spec-draft-n-max`` γ, ``--spec-draft-n-min 0``, ``--spec-draft-p-min 0``);
  ``server_plain``: the same server without a draft (its control).
- ``speculative_example``: ``llama-speculative`` (examples/speculative), one process per request, ``-np 1``;
  ``speculative_example_tree``: the same with tree drafts, ``-np 2 --spec-draft-p-split 0.1`` (a branch splits off
  where the draft's second candidate has probability above 0.1).
"""

from __future__ import annotations

from specverify.adapters.llamacpp.bindings import PythonDecoder
from specverify.adapters.llamacpp.configs import PYTHON_CONFIGS, SERVER_CONFIGS
from specverify.adapters.llamacpp.example import ExampleDecoder
from specverify.adapters.llamacpp.server import ServerDecoder

PACKAGE = __name__.rpartition(".")[0]  # specverify.adapters.llamacpp: the name the factories are certified under


def _named(factory):
    """``factory`` named as the package re-exports it (module docstring), at standard by default."""
    factory.default_level = "standard"  # the pytest plugin's level unless one is given (testing.options)
    factory.__module__ = PACKAGE
    return factory


def _configured(presets: dict, default: str):
    def mark(factory):
        factory.engine_configs, factory.default_engine_config = presets, default
        return _named(factory)

    return mark


@_configured(PYTHON_CONFIGS, "cache-prompt")
def python_draft_model(target, draft, *, cache_prompt: bool = True) -> PythonDecoder:
    """llama-cpp-python ``Llama(draft_model=...)`` with the draft GGUF proposing γ greedy tokens."""
    return PythonDecoder(target, draft, "python_draft_model", cache_prompt=cache_prompt)


@_configured(PYTHON_CONFIGS, "cache-prompt")
def python_prompt_lookup(target, draft, *, cache_prompt: bool = True) -> PythonDecoder:
    """llama-cpp-python ``Llama(draft_model=LlamaPromptLookupDecoding(...))``; ``draft`` is not used."""
    return PythonDecoder(target, draft, "python_prompt_lookup", cache_prompt=cache_prompt)


@_configured(PYTHON_CONFIGS, "cache-prompt")
def plain(target, draft, *, cache_prompt: bool = True) -> PythonDecoder:
    """llama-cpp-python ``Llama.generate()`` without a draft: the control of the Python paths."""
    return PythonDecoder(target, draft, "plain", cache_prompt=cache_prompt)


@_configured(SERVER_CONFIGS, "slots")
def server_draft_model(target, draft, *, slots: int = 4, cache_prompt=None) -> ServerDecoder:
    """``llama-server --spec-draft-model`` on 127.0.0.1, γ drafts per round, requests over HTTP; ``slots`` (-np)
    and ``cache_prompt`` (None: not sent, the server's default true) as in the configurations."""
    return ServerDecoder(target, draft, speculative=True, slots=slots, cache_prompt=cache_prompt)


@_configured(SERVER_CONFIGS, "slots")
def server_plain(target, draft, *, slots: int = 4, cache_prompt=None) -> ServerDecoder:
    """``llama-server`` without a draft model: the control of ``server_draft_model``."""
    return ServerDecoder(target, draft, speculative=False, slots=slots, cache_prompt=cache_prompt)


@_named
def speculative_example(target, draft) -> ExampleDecoder:
    """llama.cpp's ``llama-speculative`` example (stochastic acceptance, residual), one process per request."""
    return ExampleDecoder(target, draft)


@_named
def speculative_example_tree(target, draft) -> ExampleDecoder:
    """``llama-speculative`` with tree drafts: two branches (``-np 2``), split at draft probability 0.1."""
    return ExampleDecoder(target, draft, branches=2, p_split=0.1)
