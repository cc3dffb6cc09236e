"""llama.cpp as a specverify decoder: llama-cpp-python's speculative ``generate()``, ``llama-server`` with a draft
model, and the stochastic ``llama-speculative`` example, each beside a control without speculation.

Factories (docs/adapters.md; docs/findings/llamacpp.md has the verdicts and the mechanisms):

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

Models are ``CheckpointModel`` s exported by ``llamacpp_gguf.gguf_file`` (token-id paths use the toy pieces, the
example the one-letter pieces). The executables are found in ``$SPECVERIFY_LLAMACPP_BIN``.

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

**Engine configurations** (docs/adapters.md; ``--engine-config NAME``). The Python factories: ``cache-prompt``
(``cache_prompt=True``, the default) is ``generate()``'s own prompt cache: it keeps the KV entries of the longest
common prefix of the previous call's tokens and the new prompt (llama.py:917-968; a prompt met whole is evaluated
from its last token, or, when the context holds exactly it and its logits are live, sampled at once without any
evaluation, :929-938); ``no-cache-prompt`` (``cache_prompt=False``) calls ``Llama.reset()`` before each request
(``n_tokens`` = 0, :656), so every prompt is evaluated from its first token. The evidence is read from the engine:
``Llama.n_tokens`` (the tokens its KV cache keeps) at the first ``eval`` of each request, counted in
``engine_info["state"]`` as ``cache_hit_requests``, ``cached_prompt_tokens`` and ``long_prefix_hits`` (requests that
kept at least ``LONG_PREFIX`` = 32 tokens). Both prompt-cache presets add the ``long-prompt`` and ``multi-turn``
scenarios to their matrix (``CACHE_SCENARIOS``: turn 1, then turn 2, its prompt and whole output with EOS, which
meets a cache holding turn 1 or an earlier turn 2 whole and keeps 32 tokens, one of them written by decoding), and
``cache-prompt`` needs a hit and a long one (``CACHE_REACHES``). The server factories: ``slots``
(``-np 4``, a call's requests sent four at a time: the default), ``cache-prompt`` (``-np 1``, ``cache_prompt: true``
sent: each request reuses the slot's common prefix with the last one) and ``no-cache-prompt`` (``-np 1``,
``cache_prompt: false``); their evidence is in ``_llamacpp_bin`` (``ServerEvidence``). ``context-shift`` is listed,
never run: no law is defined for what a target continues from once the server has discarded half of a slot's
context, so it is not covered.

The server and example mappings are in ``_llamacpp_bin``, the llama-cpp-python loader, draft model and evidence
wrappers in ``_llamacpp_python`` (re-exported). Set-up failures raise from the factory (verdict
``error``); an engine exception, a dead process, a hang or a malformed response in a call raises ``RuntimeError``
with the engine's message (verdict ``invalid``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specverify.adapters._llamacpp_common import check_request, seed32
from specverify.adapters._llamacpp_python import (  # noqa: F401 -- re-exported: this module's API and the tests' seams
    N_CTX,
    _draft_model_class,
    _llama,
    _PromptCacheLog,
    _Rounds,
    accepted_rounds,
    import_llama_cpp,
)
from specverify.adapters.boundary.finish import ENDS, Finisher, finish
from specverify.adapters.llamacpp_gguf import gguf_file
from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, EngineConfig, Request

__all__ = [
    "python_draft_model",
    "python_prompt_lookup",
    "plain",
    "server_draft_model",
    "server_plain",
    "speculative_example",
    "speculative_example_tree",
    "PythonDecoder",
    "METHODS",
    "CAPABILITIES",
    "same_seed_check",
    "N_CTX",
    "PYTHON_CONFIGS",
    "SERVER_CONFIGS",
]

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


_UNDEFINED_SHIFT = (
    "no law is defined for context shift: once a slot's context is full the server discards half of it "
    "(--context-shift) and the target continues from a history it was not given, which no oracle here models"
)
#: The scenarios a prompt-cache configuration adds to its matrix (matrix_checkpoint.CONFIGURATION_SCENARIOS): turn 1
#: (31 tokens), then turn 2 (its prompt and whole output, EOS included), which meets a cache holding turn 1.
CACHE_SCENARIOS = ("long-prompt", "multi-turn")
#: What a prompt-cache configuration must show: a hit, and a turn 2 whose reused prefix holds a decoded token.
CACHE_REACHES = {"cache_hit_requests": 1, "long_prefix_hits": 1}
#: The Python factories' configurations (module docstring): generate()'s prompt cache on (the default) or off.
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
#: The server factories' configurations (module docstring; the evidence: _llamacpp_bin.ServerEvidence).
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


def _configured(presets: dict, default: str):
    def mark(factory):
        factory.engine_configs, factory.default_engine_config = presets, default
        return factory

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
def server_draft_model(target, draft, *, slots: int = 4, cache_prompt=None) -> object:
    """``llama-server --spec-draft-model`` on 127.0.0.1, γ drafts per round, requests over HTTP; ``slots`` (-np)
    and ``cache_prompt`` (None: not sent, the server's default true) as in the configurations."""
    from specverify.adapters._llamacpp_bin import ServerDecoder

    return ServerDecoder(target, draft, speculative=True, slots=slots, cache_prompt=cache_prompt)


@_configured(SERVER_CONFIGS, "slots")
def server_plain(target, draft, *, slots: int = 4, cache_prompt=None) -> object:
    """``llama-server`` without a draft model: the control of ``server_draft_model``."""
    from specverify.adapters._llamacpp_bin import ServerDecoder

    return ServerDecoder(target, draft, speculative=False, slots=slots, cache_prompt=cache_prompt)


def speculative_example(target, draft) -> object:
    """llama.cpp's ``llama-speculative`` example (stochastic acceptance, residual), one process per request."""
    from specverify.adapters._llamacpp_bin import ExampleDecoder

    return ExampleDecoder(target, draft)


def speculative_example_tree(target, draft) -> object:
    """``llama-speculative`` with tree drafts: two branches (``-np 2``), split at draft probability 0.1."""
    from specverify.adapters._llamacpp_bin import ExampleDecoder

    return ExampleDecoder(target, draft, branches=2, p_split=0.1)


def same_seed_check(speculative, control, requests: Sequence[Request]) -> dict:
    """The named check "same seed, with and without draft": both decoders answer the same seeded requests and the
    outputs are compared. A path that draws one uniform per emitted token from one seeded stream (llama-cpp-python's
    generate(), llama-server: sample-and-compare) gives equal outputs up to float rounding of batched vs single-token
    logits; this is evidence about the RNG discipline, not the law (exactness does not need replay)."""
    requests = list(requests)
    if not requests or any(r.seed is None for r in requests):
        raise InvalidArgument("requests must be a non-empty list of seeded Requests (seed=int).")
    a, b = speculative(requests), control(requests)
    diff = [(r.prompt, r.seed, x.tokens, y.tokens) for r, x, y in zip(requests, a, b) if x.tokens != y.tokens]
    return {
        "check": "same-seed-with-and-without-draft",
        "n": len(requests),
        "equal": len(requests) - len(diff),
        "examples": diff[:3],
    }
