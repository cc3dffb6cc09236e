"""The type of one bug mechanism (``specverify.mechanisms`` holds the catalogue; private, so that the data module
stays under the module size limit). Imports nothing from specverify but ``errors``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from specverify.errors import check

__all__ = ["Mechanism", "SEED"]

#: The ``bugs`` tag of a failure mode named by the seed document rather than by an engine's tracker.
SEED = "seed"
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_BUG = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)? (PR )?#\d+$")


@dataclass(frozen=True)
class Mechanism:
    """One bug mechanism.

    Attributes
    ----------
    id : str
        Stable kebab-case id (``penalty-history-not-rolled-back``); zoo entries and mutants refer to it.
    title : str
        One line: what goes wrong.
    state : str
        The state or processor involved (the last column of docs/bugs.md's sources).
    bugs : tuple of str
        Real engine issues, as ``"project #number"`` (``"vLLM PR #41044"`` for a pull request), and ``"seed"``
        where the seed document names the failure mode; empty for the zoo's controls.
    """

    id: str
    title: str
    state: str
    bugs: tuple[str, ...] = ()

    def __post_init__(self):
        check(
            isinstance(self.id, str) and bool(_ID.match(self.id)),
            f"id={self.id!r} must be a kebab-case id (lower-case words joined by '-').",
        )
        bad = [b for b in self.bugs if b != SEED and not _BUG.match(b)]
        check(
            isinstance(self.bugs, tuple) and not bad,
            f"bugs={self.bugs!r} holds {bad!r}: write each as 'project #number' or 'seed'.",
        )
