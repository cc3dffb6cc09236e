"""The llama-cpp-python pieces of ``specverify.adapters.llamacpp``'s ``PythonDecoder`` (its docstring has the
mapping): the import of ``llama_cpp`` with a set-up error saying how to install it, the ``Llama`` loader (``N_CTX``
tokens, one thread, F32 KV caches), the draft GGUF as a ``LlamaDraftModel``, and the wrappers that read the engine's
evidence: ``_Rounds`` (the draft calls, from which ``accepted_rounds`` counts each round's accepted drafts) and
``_PromptCacheLog`` (``Llama.n_tokens`` at each request's first ``eval``). Kept apart so that ``llamacpp.py`` holds
the decoder, its factories and configurations; ``llama_cpp`` is imported only inside these functions, when called.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from specverify.adapters._llamacpp_common import LONG_PREFIX

__all__ = ["N_CTX", "import_llama_cpp", "accepted_rounds"]

N_CTX = 64


def import_llama_cpp() -> object:
    """``llama_cpp``, or a ``RuntimeError`` saying how to install it (a set-up failure)."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise RuntimeError(
            f"llama_cpp cannot be imported ({exc}): pip install llama-cpp-python==0.3.36 (a source build, ~11 min "
            "on 2 cores), or install it on top of a llama.cpp CMake build as .ci/llamacpp and the README do."
        ) from exc
    except OSError as exc:  # installed without its own library (LLAMA_BUILD=OFF) and LLAMA_CPP_LIB_PATH unset
        raise RuntimeError(
            f"llama_cpp is installed but cannot load libllama ({exc}): set LLAMA_CPP_LIB_PATH to the llama.cpp "
            "build's bin directory (the one holding libllama.so), as .ci/llamacpp does."
        ) from exc
    return llama_cpp


def _llama(llama_cpp, path, **extra) -> object:
    try:
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=N_CTX,
            n_batch=N_CTX,
            n_ubatch=N_CTX,
            n_threads=1,
            n_threads_batch=1,
            type_k=0,  # GGML_TYPE_F32: the default F16 KV cache moves logits by up to 5e-3 (findings, set-up)
            type_v=0,
            verbose=False,
            **extra,
        )
    except Exception as exc:
        raise RuntimeError(f"llama_cpp.Llama could not load {str(path)!r}: {exc}") from exc


def _draft_model_class(llama_cpp) -> type:
    from llama_cpp.llama_speculative import LlamaDraftModel

    class GgufDraftModel(LlamaDraftModel):
        """γ greedy tokens of a second ``Llama`` (the draft GGUF) after the history it is handed."""

        def __init__(self, path):
            self.llm = _llama(llama_cpp, path, seed=0)
            self.num_pred_tokens = 3

        def __call__(self, input_ids, /, **kwargs):
            ids = [int(t) for t in input_ids]
            room = N_CTX - len(ids) - 1
            gen = self.llm.generate(ids, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, temp=0.0)
            out = list(itertools.islice(gen, max(0, min(self.num_pred_tokens, room))))
            gen.close()
            return np.array(out, dtype=np.intc)

    return GgufDraftModel


class _Rounds:
    """Wraps a draft model: records (history length, drafts) of every call, one per verification round."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __call__(self, input_ids, /, **kwargs):
        drafts = self.inner(input_ids, **kwargs)
        self.calls.append((len(input_ids), [int(t) for t in drafts]))
        return drafts


def accepted_rounds(calls: Sequence, prompt_len: int, tokens: Sequence[int]) -> tuple[int, ...]:
    """Accepted drafts per round from the recorded draft calls: round r drafted ``d`` after ``k`` emitted tokens and
    accepted the longest prefix of ``d`` that the emitted tokens repeat (clipped at the finishing token).

    >>> accepted_rounds([(3, [1, 1]), (6, [0, 0])], 2, (3, 1, 1, 0, 4))  # the first draft follows token 1
    (2, 0)
    >>> accepted_rounds([(3, [1, 1]), (6, [0])], 2, (3, 1, 1))
    (2,)
    """
    out = []
    for hist, drafts in calls:
        k = hist - prompt_len
        if k >= len(tokens):
            break
        m = 0
        while m < len(drafts) and k + m < len(tokens) and tokens[k + m] == drafts[m]:
            m += 1
        out.append(m)
    return tuple(out)


class _PromptCacheLog:
    """Wraps ``Llama.eval`` on the instance: records ``Llama.n_tokens`` (the KV entries kept from the last call)
    at the first ``eval`` of each request, the engine's own count of prompt tokens served from its cache; requests
    that kept at least ``LONG_PREFIX`` tokens are counted apart (``long_hits``)."""

    def __init__(self, llm):
        self.llm, self.inner = llm, llm.eval
        self.armed, self.requests, self.cache_hits, self.cached_tokens, self.long_hits = False, 0, 0, 0, 0
        llm.eval = self

    def arm(self) -> None:
        self.armed = True

    def __call__(self, tokens):
        if self.armed:
            self.armed = False
            kept = int(self.llm.n_tokens)
            self.requests += 1
            self.cache_hits += kept > 0
            self.cached_tokens += kept
            self.long_hits += kept >= LONG_PREFIX
        return self.inner(tokens)
