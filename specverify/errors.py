"""The exception hierarchy: one root, ``SpecverifyError``; bad arguments raise ``InvalidArgument``."""

from __future__ import annotations

__all__ = ["SpecverifyError", "InvalidArgument", "ProtocolViolation", "check"]


class SpecverifyError(Exception):
    """Root of every exception specverify raises on purpose."""


class InvalidArgument(SpecverifyError, ValueError):
    """An argument has the wrong type, shape or value.

    Messages read ``name=value!r``, then what was expected, then how to fix it.
    """


class ProtocolViolation(SpecverifyError):
    """A decoder under test broke the protocol (docs/adapters.md): a wrong count, a token outside the vocabulary,
    tokens after the finishing one, an exception or a hang during a call, ... The certifier turns it into the
    verdict ``invalid`` (docs/design.md, verdict rule 1)."""


def check(condition: bool, message: str) -> None:
    """Raise ``InvalidArgument(message)`` unless ``condition`` holds (for user input, never ``assert``)."""
    if not condition:
        raise InvalidArgument(message)
