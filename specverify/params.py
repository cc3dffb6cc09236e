"""``SamplingParams``: the request-level sampling configuration (no torch here, so it is cheap to import)."""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from specverify.errors import InvalidArgument, check

if TYPE_CHECKING:  # pragma: no cover
    from specverify.grammar import Grammar

__all__ = ["SamplingParams", "PROCESSOR_FIELDS", "CANONICAL_DEFAULTS", "UNSET"]

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
    "logits_processors",
)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Unset:
    """The default of every field: "not set by the request" (its canonical default applies)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self):
        return (_Unset, ())


UNSET = _Unset()

# the canonical default of each field: what an unset field means (docs/design.md, canonical semantics)
CANONICAL_DEFAULTS = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "bad_token_ids": (),
    "min_tokens": 0,
    "max_tokens": 4,
    "stop": (),
    "ignore_eos": False,
    "grammar": None,
    "stop_after_min_tokens": False,
    "logits_processors": (),
}


@dataclass(frozen=True, kw_only=True, repr=False)
class SamplingParams:
    """Sampling configuration of one request; every field is *unset* unless the request sets it.

    An unset field reads as its canonical default (``CANONICAL_DEFAULTS``: temperature 1, no truncation, no
    penalties, no masks, no processors, ``max_tokens`` 4), so the law is computed the same either way; what differs
    is what an adapter sends: only ``set_fields`` (docs/adapters.md), so that an engine's own handling of a missing
    field is what gets certified. Setting a field to its default value still sets it.

    Processors run in docs/design.md's canonical order: ``bad_token_ids`` -> ``min_tokens`` (EOS masked) -> grammar mask
    -> ``repetition_penalty`` (CTRL style, prompt + generated) -> ``frequency_penalty`` / ``presence_penalty``
    (OpenAI style, generated only) -> ``logits_processors`` (in order) -> ``temperature`` (0 = greedy) -> ``top_k``
    -> ``top_p`` -> ``min_p`` -> softmax.

    ``logits_processors`` are callables ``processor(histories, logits) -> logits``: ``histories`` holds one tuple of
    token ids per row (prompt + generated so far), ``logits`` the float64 ``[B, V]`` tensor after the penalties; each
    row's result may depend on that row's history and logits only. They must be picklable (defined at module level),
    since requests travel to the certifier's worker process.

    ``dataclasses.replace(params, **changes)`` keeps the fields ``params`` set and sets each changed field whose new
    value differs from its canonical default (replacing a field by its default keeps it as it was: the law is the
    same); ``params.unset(*names)`` unsets fields.

    Examples
    --------
    >>> SamplingParams(temperature=0.5, top_k=3, max_tokens=4).top_k
    3
    >>> p = SamplingParams(top_k=2)
    >>> p.temperature, sorted(p.set_fields)
    (1.0, ['top_k'])
    >>> p
    SamplingParams(top_k=2)
    >>> SamplingParams(min_tokens=5, max_tokens=4)
    Traceback (most recent call last):
    ...
    specverify.errors.InvalidArgument: min_tokens=5 exceeds max_tokens=4: ...
    """

    temperature: float = UNSET
    top_k: int = UNSET
    top_p: float = UNSET
    min_p: float = UNSET
    repetition_penalty: float = UNSET
    frequency_penalty: float = UNSET
    presence_penalty: float = UNSET
    bad_token_ids: tuple[int, ...] = UNSET
    min_tokens: int = UNSET
    max_tokens: int = UNSET
    stop: tuple[str, ...] = UNSET
    ignore_eos: bool = UNSET
    grammar: Optional["Grammar"] = UNSET
    stop_after_min_tokens: bool = UNSET  # vLLM holds stop strings back until min_tokens tokens exist
    logits_processors: tuple[Callable, ...] = UNSET
    set_fields: Optional[frozenset] = None  # None: the fields given; dataclasses.replace passes the old set on

    def __post_init__(self) -> None:
        given = self.set_fields
        if given is not None:
            check(
                isinstance(given, (frozenset, set, tuple, list)) and set(given) <= set(PROCESSOR_FIELDS),
                f"set_fields={given!r} must name SamplingParams fields, a subset of {PROCESSOR_FIELDS!r}.",
            )
        chosen = set()
        for name, default in CANONICAL_DEFAULTS.items():
            value = getattr(self, name)
            if value is UNSET:
                object.__setattr__(self, name, default)
            elif given is None or name in given or not _same(value, default):
                chosen.add(name)
        object.__setattr__(self, "set_fields", frozenset(chosen))
        _validate(self)
        object.__setattr__(self, "bad_token_ids", tuple(sorted(set(self.bad_token_ids))))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "logits_processors", tuple(self.logits_processors))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in PROCESSOR_FIELDS if n in self.set_fields)
        return f"SamplingParams({shown})"

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def is_set(self, name: str) -> bool:
        """Whether the request set field ``name`` (else it reads as ``CANONICAL_DEFAULTS[name]``)."""
        check(name in CANONICAL_DEFAULTS, f"name={name!r} is not a SamplingParams field; one of {PROCESSOR_FIELDS!r}.")
        return name in self.set_fields

    def to_dict(self) -> dict:
        """The set fields and their values: what an adapter passes on; ``SamplingParams(**p.to_dict()) == p``."""
        return {name: getattr(self, name) for name in PROCESSOR_FIELDS if name in self.set_fields}

    def unset(self, *names: str) -> "SamplingParams":
        """A copy with ``names`` unset (they read as their canonical defaults again)."""
        for name in names:
            self.is_set(name)  # validates the name
        return SamplingParams(**{k: v for k, v in self.to_dict().items() if k not in names})

    def active(self) -> frozenset[str]:
        """Names of the fields whose value differs from the canonical default (the processors this request needs),
        set or not."""
        return frozenset(n for n, d in CANONICAL_DEFAULTS.items() if not _same(getattr(self, n), d))


def _same(value, default) -> bool:
    """Whether ``value`` is the canonical ``default`` (0 and 0.0 are; a bool never equals a number)."""
    if isinstance(default, tuple):
        return isinstance(value, (tuple, list)) and tuple(value) == default
    if default is None or isinstance(default, bool):
        return value is default
    return not isinstance(value, bool) and value == default


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
    _validate_processors(p.logits_processors)


def _validate_processors(processors) -> None:
    check(
        isinstance(processors, (tuple, list)) and all(callable(f) for f in processors),
        f"logits_processors={processors!r} must be a tuple of callables processor(histories, logits) -> logits.",
    )
    for f in processors:
        try:
            pickle.dumps(f)
        except Exception as exc:  # noqa: BLE001 -- any pickling failure has the same fix
            raise InvalidArgument(
                f"logits_processors holds {f!r}, which cannot be pickled ({type(exc).__name__}: {exc}): requests "
                "travel to the certifier's worker process, so define the processor at module level (no lambda, no "
                "local function)."
            ) from None
