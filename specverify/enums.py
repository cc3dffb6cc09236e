"""The string-valued enumerations every layer shares: verdicts, levels, scenario kinds.

Each member is a ``str`` (``Verdict.EXACT == "exact"``), so JSON keeps the plain value and old callers that pass
strings keep working; ``Verdict("greedy-only")`` parses one back.
"""

from __future__ import annotations

import enum

from specverify.errors import InvalidArgument

__all__ = ["Verdict", "Level", "ScenarioKind"]


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object, name: str) -> _StrEnum:
        """``value`` as a member, or ``InvalidArgument`` naming ``name`` and the choices."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise InvalidArgument(f"{name}={value!r} must be one of {choices}.") from None


class Verdict(_StrEnum):
    """The certifier's verdicts (docs/design.md, verdict rules). ``rank`` orders the decoder verdicts."""

    EXACT = "exact"
    GREEDY_ONLY = "greedy-only"
    APPROXIMATE = "approximate"
    INVALID = "invalid"
    INCONCLUSIVE = "inconclusive"  # the evidence is not enough: never a pass
    ERROR = "error"  # the factory or adapter could not be set up: not a verdict on the decoder

    @property
    def rank(self) -> int:
        """3 exact, 2 greedy-only, 1 approximate, 0 invalid, -1 for inconclusive and error (they meet nothing)."""
        return _RANK[self]

    @classmethod
    def decoder_verdicts(cls) -> tuple[Verdict, ...]:
        """The verdicts a decoder can be tagged with (the zoo's tags): exact, greedy-only, approximate, invalid."""
        return (cls.EXACT, cls.GREEDY_ONLY, cls.APPROXIMATE, cls.INVALID)


_RANK = {
    Verdict.EXACT: 3,
    Verdict.GREEDY_ONLY: 2,
    Verdict.APPROXIMATE: 1,
    Verdict.INVALID: 0,
    Verdict.INCONCLUSIVE: -1,
    Verdict.ERROR: -1,
}


class Level(_StrEnum):
    """Certification levels; ``epsilon`` is the smallest TV each sampling scenario detects with the planned power."""

    QUICK = "quick"
    STANDARD = "standard"
    THOROUGH = "thorough"

    @property
    def epsilon(self) -> float:
        return _EPSILON[self]


_EPSILON = {Level.QUICK: 0.05, Level.STANDARD: 0.02, Level.THOROUGH: 0.01}


class ScenarioKind(_StrEnum):
    """``sampling``: law vs exact law; ``greedy``: exact comparison on many prompts; ``collision``: disjoint pairs of
    identical unseeded requests; ``mixed``: several sampling configurations interleaved in one call;
    ``composition``: one request shape alone, in pairs and in large batches, each law against the exact law."""

    SAMPLING = "sampling"
    GREEDY = "greedy"
    COLLISION = "collision"
    MIXED = "mixed"
    COMPOSITION = "composition"
