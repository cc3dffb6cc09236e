"""llama-cpp-python's speculative ``Llama.generate()`` as a specverify decoder (``PythonDecoder``: the factories
``python_draft_model``, ``python_prompt_lookup`` and their control ``plain``), with the llama-cpp-python pieces it
needs: the import of ``llama_cpp`` with a set-up error saying how to install it, the ``Llama`` loader (``N_CTX``
tokens, one thread, F32 KV caches), the draft GGUF as a ``LlamaDraftModel``, and the wrappers that read the engine's
evidence: ``_Rounds`` (the draft calls, from which :func:`accepted_rounds` counts each round's accepted drafts) and
``_PromptCacheLog`` (``Llama.n_tokens`` at each request's first ``eval``). ``llama_cpp`` is imported only inside
these functions, when called.

**llama-cpp-python's generate()** (llama_cpp/llama.py, 0.3.36) builds a fresh sampler chain per call: the Python
logits processors (a custom sampler), penalties (over the tokens it *accepted*, i.e. generated ones only: the prompt
is never accepted; last 64), top-k, typical-p, top-p, min-p, temperature, ``dist`` seeded with ``Llama._seed``; at
temperature 0 a greedy sampler replaces the cuts. Every parameter is passed explicitly (its defaults are top_k 40,
top_p 0.95, min_p 0.05, temp 0.8): ``top_k`` (0 = off), ``top_p``, ``min_p``, ``typical_p=1``, ``temp``,
``repeat_penalty=1``, ``frequency_penalty``, ``presence_penalty``, no mirostat, no grammar. ``bad_token_ids`` and
``min_tokens`` are a logits processor writing -inf (first in the chain, as canonically); it counts its own calls,
one per emitted token, because the ``input_ids`` it is handed include unverified drafts (finding 2).

**Where a completion ends** (``specverify.adapters.boundary.finish``, every adapter's finish rule). generate() never
stops by itself (no stopping criteria are passed; its loop, llama.py:976-1025, yields token after token), so this
adapter implements all three ends: it stops reading at the first EOS, stop string (on the toy text) or ``max_tokens``,
and asks the generator for nothing past it. A generator that ends before any of them raises ``EngineStoppedEarly``.
``accepted`` counts the drafts among the tokens read.

**Prefill** (``decoder.prefill_tokens``, docs/adapters.md): 1 with a draft. generate() evaluates the prompt
(llama.py:977) and samples the first token from it (:973, ``sample_idx`` = the prompt's last position) before the
draft model is first called (:1016-1018); each later round verifies the drafts proposed after the last token.
**Unset fields** (docs/adapters.md): generate()'s own defaults for the cuts and the temperature (top_k 40, top_p 0.95,
min_p 0.05, temp 0.8) are another law than the canonical defaults, and llama.cpp has no way to say "not given"
other than those values, so ``top_k``, ``top_p``, ``min_p`` and ``temperature`` are always sent (an unset one as its
canonical default) and a mechanism in how an engine resolves a missing field cannot show through this adapter; the
frequency and presence penalties default to 0.0 there, so an unset one is left out. ``logits_processors`` are not
declared: the ``input_ids`` a Python logits processor is handed include unverified drafts (finding 2), so a
processor reading the history would read the wrong one.

Per request ``Llama.set_seed(seed32(seed))``. Declared: temperature max_tokens top_k top_p min_p frequency_penalty
presence_penalty bad_token_ids min_tokens stop seed (+ ``accepted`` with speculation: rounds are recorded from the
draft calls). Not declared: ``repetition_penalty`` (prompt not penalised), ``ignore_eos``, ``grammar``, ``batch``,
``stream``. top-p / min-p before the temperature are canonical only at temperature 1 (or 0); other temperatures are
refused with ``InvalidArgument``.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from specverify.adapters.boundary.finish import ENDS, Finisher, finish
from specverify.adapters.boundary.gguf_export import gguf_file
from specverify.adapters.llamacpp.common import LONG_PREFIX, N_CTX, check_request, seed32
from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, Request

__all__ = ["PythonDecoder", "METHODS", "CAPABILITIES", "import_llama_cpp", "accepted_rounds"]

METHODS = ("python_draft_model", "python_prompt_lookup", "plain")
_PY = frozenset(
    {
        "temperature",
        "max_tokens",
        "top_k",
        "top_p",
        "min_p",
        "frequency_penalty",
        "presence_penalty",
        "bad_token_ids",
        "min_tokens",
        "stop",
        "seed",
    }
)
CAPABILITIES = {"python_draft_model": _PY | {"accepted"}, "python_prompt_lookup": _PY | {"accepted"}, "plain": _PY}


class PythonDecoder:
    """llama-cpp-python's ``Llama.generate()`` for one model pair and ``method`` in ``METHODS``; ``cache_prompt``
    False resets the context before each request (module docstring, engine configurations)."""

    def __init__(self, target, draft, method: str, *, cache_prompt: bool = True):
        if method not in METHODS:
            raise InvalidArgument(f"method={method!r} must be one of {METHODS!r}.")
        check(
            isinstance(cache_prompt, bool),
            f"cache_prompt={cache_prompt!r} must be a bool (True: generate()'s prompt cache, its default; False: "
            "Llama.reset() before each request), e.g. --engine-option cache_prompt=false.",
        )
        llama_cpp = import_llama_cpp()
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        self.method, self.vocab = method, target.vocab
        if method != "plain" and draft.vocab.size != target.vocab.size:
            raise InvalidArgument(f"draft vocab {draft.vocab.size!r} != target vocab {target.vocab.size!r}.")
        self.capabilities = frozenset(CAPABILITIES[method])
        # what the drafts are (specverify.protocol.draft_law_of): the draft GGUF's greedy tokens on its raw logits,
        # or prompt lookup, which the acceptance oracle does not model
        self.draft_law = "unmodelled" if method == "python_prompt_lookup" else "model-argmax"
        if method != "plain":
            self.prefill_tokens = 1  # the prompt's own token comes before the first draft (module docstring)
        inner = None
        if method == "python_draft_model":
            inner = _draft_model_class(llama_cpp)(gguf_file(draft, "toy"))
        elif method == "python_prompt_lookup":
            inner = LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=3)
        self.drafter = inner
        self.rounds = _Rounds(inner) if inner is not None else None
        self.llm = _llama(llama_cpp, gguf_file(target, "toy"), seed=0, draft_model=self.rounds)
        self.cache_prompt = cache_prompt
        self.prompt_cache = _PromptCacheLog(self.llm)
        self.processor_history: list = []  # (position, len(input_ids) - len(prompt)) per processor call: finding 2
        self.rng = np.random.default_rng()

    def __repr__(self) -> str:
        return f"PythonDecoder(method={self.method!r}, vocab_size={self.vocab.size})"

    def __call__(self, requests: Sequence[Request]) -> list:
        return [self.generate(r) for r in requests]

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: the method, whether the prompt cache was asked for, and what the engine kept."""
        log = self.prompt_cache
        state = {"requests": log.requests, "cache_hit_requests": log.cache_hits}
        state["cached_prompt_tokens"], state["long_prefix_hits"] = log.cached_tokens, log.long_hits
        requested = {"method": self.method, "cache_prompt": self.cache_prompt}
        return {"name": "llama-cpp-python", "requested": requested, "state": state}

    def _processors(self, request: Request, prompt_len: int):
        from llama_cpp import LogitsProcessorList

        p, eos = request.params, int(self.vocab.eos_token_id)
        bad = [t for t in p.bad_token_ids if t < self.vocab.size]
        calls = [0]
        history = self.processor_history

        def mask(input_ids, scores):
            history.append((calls[0], len(input_ids) - prompt_len))
            if bad:
                scores[bad] = -np.inf
            if calls[0] < p.min_tokens:
                scores[eos] = -np.inf
            calls[0] += 1
            return scores

        return LogitsProcessorList([mask]) if (bad or p.min_tokens) else None

    def generate(self, request: Request) -> Completion:
        """One request through ``generate()``: tokens read up to the first finishing one, ``accepted`` per round."""
        check_request(request, self.capabilities, self.method, cut_before_temperature=True)
        p, prompt = request.params, list(request.prompt)
        if len(prompt) + p.max_tokens + request.num_draft_tokens + 1 > N_CTX:
            raise InvalidArgument(f"prompt of {len(prompt)} + max_tokens={p.max_tokens!r} + γ exceed n_ctx={N_CTX}.")
        if self.drafter is not None:
            self.drafter.num_pred_tokens = int(request.num_draft_tokens)
            self.rounds.calls = []
        self.llm.set_seed(seed32(request.seed, self.rng))
        if not self.cache_prompt:
            self.llm.reset()  # n_tokens = 0: generate() finds no prefix to keep
        self.prompt_cache.arm()
        # generate()'s penalty defaults (0.0) are the canonical ones: an unset penalty is left to them; its cut and
        # temperature defaults are not (module docstring, unset fields), so those are always sent
        penalties = {n: float(getattr(p, n)) for n in ("frequency_penalty", "presence_penalty") if p.is_set(n)}
        gen = self.llm.generate(
            prompt,
            top_k=int(p.top_k),
            top_p=float(p.top_p),
            min_p=float(p.min_p),
            typical_p=1.0,
            temp=float(p.temperature),
            repeat_penalty=1.0,
            **penalties,
            tfs_z=1.0,
            mirostat_mode=0,
            logits_processor=self._processors(request, len(prompt)),
            grammar=None,
        )
        finisher, tokens = Finisher(self.vocab, p), []
        try:
            for token in gen:
                tokens.append(int(token))
                if finisher.push(int(token)):
                    break
        finally:
            gen.close()
        done = finish(tokens, self.vocab, p, engine="llama-cpp-python's generate()", cuts=ENDS)
        accepted = None
        if self.rounds is not None:
            accepted = accepted_rounds(self.rounds.calls, len(prompt), done.tokens)
        return Completion(done.tokens, done.finish_reason, accepted=accepted)


# ------------------------------------------------------------------------------------------------- llama_cpp


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
