"""The string-valued enumerations every layer shares: verdicts, levels, scenario kinds, model and draft families,
isolation modes and why a scenario was not run.

Each member is a ``str`` (``Verdict.EXACT == "exact"``), so JSON keeps the plain value and old callers that pass
strings keep working; ``Verdict("greedy-only")`` parses one back.
"""

from __future__ import annotations

import enum

from specverify.errors import InvalidArgument

__all__ = ["Verdict", "Level", "ScenarioKind", "ModelFamily", "DraftFamily", "Isolation", "NotRun"]


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object, name: str) -> _StrEnum:
        """``value`` as a member, or ``InvalidArgument`` naming ``name`` and the choices."""
        try:
            return cls(value)
        except ValueError:
            import difflib

            choices = ", ".join(repr(m.value) for m in cls)
            close = difflib.get_close_matches(str(value), [m.value for m in cls], n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InvalidArgument(f"{name}={value!r} must be one of {choices}.{hint}") from None


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


class ModelFamily(_StrEnum):
    """The model families of docs/design.md: ``toy`` tables (default) and tiny ``checkpoint`` transformers an engine
    loads. (A user's own checkpoints, ``--target DIR --draft DIR``, are a pair of family ``user``: no exact law.)"""

    TOY = "toy"
    CHECKPOINT = "checkpoint"


class DraftFamily(_StrEnum):
    """The draft families whose scenario matrices certify (``--drafts``; ``specverify.oracles.drafts``): the AR toy
    draft and the heads (Medusa-like), markov (DSpark-like), mtp, ngram and tree families."""

    AR = "ar"
    HEADS = "heads"
    MARKOV = "markov"
    MTP = "mtp"
    NGRAM = "ngram"
    TREE = "tree"


class Isolation(_StrEnum):
    """Where the decoder runs: a worker ``process`` with a per-call timeout (default), or ``none`` (in-process)."""

    PROCESS = "process"
    NONE = "none"


class NotRun(_StrEnum):
    """Why a scenario gathered no evidence (``ScenarioResult.not_run``; the verdict reads this, never the note).

    ``undeclared``: the decoder does not declare a capability the scenario needs; ``unfit``: the scenario comes too
    close to a processor boundary on a float32 family (a bug in the matrix); ``budget``: the budget ran out (or left
    a share too small to detect anything); ``broke``: an earlier scenario broke the protocol, so nothing more ran."""

    UNDECLARED = "undeclared"
    UNFIT = "unfit"
    BUDGET = "budget"
    BROKE = "broke"

    @property
    def counts_as_run(self) -> bool:
        """Whether the scenario was meant to run and was cut (budget, broke) rather than skipped by design."""
        return self in (NotRun.BUDGET, NotRun.BROKE)
