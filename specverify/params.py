"""``SamplingParams``: the request-level sampling configuration (no torch here, so it is cheap to import)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Optional

from specverify.errors import InvalidArgument, check

if TYPE_CHECKING:  # pragma: no cover
    from specverify.grammar import Grammar

__all__ = ["SamplingParams", "PROCESSOR_FIELDS"]

# Field names a decoder may list in ``capabilities`` (docs/adapters.md, capabilities).
PROCESSOR_FIELDS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "bad_token_ids",
    "min_tokens",
    "max_tokens",
    "stop",
    "ignore_eos",
    "grammar",
    "stop_after_min_tokens",
)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """Sampling configuration of one request; every processor defaults to off.

    Processors run in docs/design.md's canonical order: ``bad_token_ids`` -> ``min_tokens`` (EOS masked) -> grammar mask
    -> ``repetition_penalty`` (CTRL style, prompt + generated) -> ``frequency_penalty`` / ``presence_penalty``
    (OpenAI style, generated only) -> ``temperature`` (0 = greedy) -> ``top_k`` -> ``top_p`` -> ``min_p`` -> softmax.

    Examples
    --------
    >>> SamplingParams(temperature=0.5, top_k=3, max_tokens=4).top_k
    3
    >>> SamplingParams(min_tokens=5, max_tokens=4)
    Traceback (most recent call last):
    ...
    specverify.errors.InvalidArgument: min_tokens=5 exceeds max_tokens=4: ...
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    bad_token_ids: tuple[int, ...] = ()
    min_tokens: int = 0
    max_tokens: int = 4
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    grammar: Optional["Grammar"] = None
    stop_after_min_tokens: bool = False  # vLLM holds stop strings back until min_tokens tokens exist

    def __post_init__(self) -> None:
        _validate(self)
        object.__setattr__(self, "bad_token_ids", tuple(sorted(set(self.bad_token_ids))))
        object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def active(self) -> frozenset[str]:
        """Names of the fields that differ from their default (the processors this request needs)."""
        default = _DEFAULTS
        return frozenset(f.name for f in fields(self) if getattr(self, f.name) != getattr(default, f.name))


def _validate(p: SamplingParams) -> None:
    check(
        _is_real(p.temperature) and p.temperature >= 0,
        f"temperature={p.temperature!r} must be a finite number >= 0 (0 means greedy).",
    )
    check(_is_int(p.top_k) and p.top_k >= 0, f"top_k={p.top_k!r} must be an int >= 0 (0 turns top-k off).")
    check(_is_real(p.top_p) and 0 < p.top_p <= 1, f"top_p={p.top_p!r} must lie in (0, 1] (1.0 turns top-p off).")
    check(_is_real(p.min_p) and 0 <= p.min_p <= 1, f"min_p={p.min_p!r} must lie in [0, 1] (0 turns min-p off).")
    check(
        _is_real(p.repetition_penalty) and p.repetition_penalty > 0,
        f"repetition_penalty={p.repetition_penalty!r} must be a finite number > 0 (1.0 turns it off).",
    )
    for name in ("frequency_penalty", "presence_penalty"):
        value = getattr(p, name)
        check(_is_real(value), f"{name}={value!r} must be a finite number (0.0 turns it off).")
    check(
        isinstance(p.bad_token_ids, (tuple, list, frozenset, set))
        and all(_is_int(t) and t >= 0 for t in p.bad_token_ids),
        f"bad_token_ids={p.bad_token_ids!r} must be a tuple of non-negative token ids.",
    )
    check(_is_int(p.max_tokens) and p.max_tokens >= 1, f"max_tokens={p.max_tokens!r} must be an int >= 1.")
    check(_is_int(p.min_tokens) and p.min_tokens >= 0, f"min_tokens={p.min_tokens!r} must be an int >= 0.")
    if p.min_tokens > p.max_tokens:
        raise InvalidArgument(
            f"min_tokens={p.min_tokens!r} exceeds max_tokens={p.max_tokens!r}: a request cannot be forced to "
            "outlive its length cap. Lower min_tokens or raise max_tokens."
        )
    check(
        isinstance(p.stop, (tuple, list)) and all(isinstance(s, str) and s for s in p.stop),
        f"stop={p.stop!r} must be a tuple of non-empty strings.",
    )
    check(isinstance(p.ignore_eos, bool), f"ignore_eos={p.ignore_eos!r} must be a bool.")
    check(
        isinstance(p.stop_after_min_tokens, bool), f"stop_after_min_tokens={p.stop_after_min_tokens!r} must be a bool."
    )
    if p.grammar is not None:
        check(
            all(hasattr(p.grammar, a) for a in ("initial_state", "allowed", "advance", "accepting")),
            f"grammar={p.grammar!r} does not implement the Grammar protocol (initial_state, allowed, advance, "
            "accepting). Use specverify.grammar.ToyGrammar or an adapter.",
        )
        check(
            not p.ignore_eos,
            f"ignore_eos=True with grammar={p.grammar!r}: a grammar ends generation only "
            "through EOS in an accepting state, so EOS cannot be an ordinary token. Drop one of the two.",
        )


_DEFAULTS = SamplingParams()
