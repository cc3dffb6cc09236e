"""The OpenVINO GenAI adapter's mapping, without the engine: a request's ``GenerationConfig`` fields, its seed, the
engine properties of a precision, the request checks.

**Generation config** (``generation_fields``). ``do_sample`` and ``temperature`` are always set (the engine's default
is greedy; temperature 0 is ``do_sample=False``), ``max_new_tokens`` is ``max_tokens``, ``eos_token_id`` the toy EOS;
``top_k``, ``top_p``, ``min_p`` and ``min_new_tokens`` only when the request set them (the engine's defaults, top_k
off, top_p 1, min_p 0, min_new_tokens 0, are the canonical ones). Speculation: ``num_assistant_tokens`` = γ
(``draft_model``, ``prompt_lookup``, the continuous-batching draft), or ``assistant_confidence_threshold``
(``draft_model_confidence``: the draft proposes until its own probability of a token is below the threshold, up to
the engine's cap, and γ is not used); ``max_ngram_size`` 2 for prompt lookup.

**Seeds** (``engine_seed``). ``rng_seed`` is a size_t; the engine's default is 0 for every request, so unseeded
requests through the engine's default would all draw the same stream (independent requests are the protocol's
minimum): an unseeded request gets a fresh draw of the decoder's own generator instead, and a seeded one its seed
hashed into [0, 2**63).

**Precision** (``properties``): ``"f32"`` sets ``INFERENCE_PRECISION_HINT`` and ``KV_CACHE_PRECISION`` to f32 (the
exact-law configuration); ``"default"`` leaves the engine's choice (on this CPU bf16 inference and a u8 KV cache).

Nothing here imports ``openvino_genai``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["PRECISIONS", "CONFIDENCE_THRESHOLD", "engine_seed", "generation_fields", "properties", "check_request"]

PRECISIONS = ("f32", "default")
CONFIDENCE_THRESHOLD = 0.4  # transformers' default assistant_confidence_threshold, the value OpenVINO's docs show
_SEED_RANGE = 2**63


def engine_seed(seed: Optional[int], rng: np.random.Generator) -> int:
    """``rng_seed`` for a request (module docstring).

    >>> engine_seed(7, None) == engine_seed(7, None), engine_seed(7, None) != engine_seed(8, None)
    (True, True)
    """
    if seed is None:
        return int(rng.integers(0, _SEED_RANGE))
    return int(np.random.SeedSequence(int(seed)).generate_state(1, np.uint64)[0] % _SEED_RANGE)


def generation_fields(request: Request, method: str, eos: int, seed: int) -> dict:
    """The ``GenerationConfig`` attributes for ``request`` under ``method`` (module docstring).

    >>> from specverify.params import SamplingParams
    >>> f = generation_fields(Request((0,), SamplingParams(max_tokens=3, top_k=2), 2), "draft_model", 5, 9)
    >>> [f[k] for k in ("do_sample", "max_new_tokens", "top_k", "num_assistant_tokens", "rng_seed")]
    [True, 3, 2, 2, 9]
    """
    p = request.params
    out = {"max_new_tokens": int(p.max_tokens), "eos_token_id": int(eos), "rng_seed": int(seed)}
    out["do_sample"] = p.temperature > 0
    out["temperature"] = float(p.temperature) if p.temperature > 0 else 1.0
    for name, cast in (("top_k", int), ("top_p", float), ("min_p", float)):
        if p.is_set(name):
            out[name] = cast(getattr(p, name))
    if p.is_set("min_tokens"):
        out["min_new_tokens"] = int(p.min_tokens)
    if method in ("draft_model", "prompt_lookup", "cb_draft_model"):
        out["num_assistant_tokens"] = int(request.num_draft_tokens)
    if method == "draft_model_confidence":
        out["assistant_confidence_threshold"] = CONFIDENCE_THRESHOLD
    if method == "prompt_lookup":
        out["max_ngram_size"] = 2
    return out


def properties(precision: str) -> dict:
    """Engine properties of ``precision`` (module docstring)."""
    if precision not in PRECISIONS:
        raise InvalidArgument(
            f"precision={precision!r} must be one of {PRECISIONS!r} (f32: the exact-law configuration; default: the "
            "engine's own), e.g. --engine-option precision=default."
        )
    return {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"} if precision == "f32" else {}


def check_request(request: Request, capabilities: frozenset, method: str) -> None:
    """Refuse what the decoder does not map exactly (``InvalidArgument``, named in the message)."""
    p = request.params
    extra = sorted(n for n in p.active() if n not in capabilities)
    if extra:
        raise InvalidArgument(
            f"params={p!r} set {extra!r}, which OpenVINO GenAI's {method!r} path does not map exactly (not "
            "declared); drop them or use another factory (docs/findings/openvino.md)."
        )
