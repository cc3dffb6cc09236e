"""The zoo's catalogue entry type and the decorator that registers a factory (private)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from specverify.errors import check

VERDICTS = ("exact", "greedy-only", "approximate", "invalid")

_REGISTRY: dict = {}


@dataclass(frozen=True)
class ZooEntry:
    """One known decoder of the zoo.

    Attributes
    ----------
    name : str
        The factory's name: ``specverify certify specverify.zoo:NAME``.
    factory : callable
        ``factory(target, draft) -> decoder``.
    verdict : str
        The verdict DESIGN.md's rules give it (``exact``, ``greedy-only``, ``approximate`` or ``invalid``); the
        factory's docstring derives it.
    bugs : tuple of str
        The real bugs it stands for, as ``"project #number"`` (BUGS.md), or ``"seed: ..."`` for a failure mode of
        the seed document.
    mechanism : str
        The state or processor involved (BUGS.md's last column).
    summary : str
        One line: what the mutation does.
    scenarios : tuple of str
        Names in ``specverify.zoo.SCENARIOS`` where the mechanism shows (used by the benchmark and the tests).
    tv : float or None
        Estimated TV between its output law and the exact law on ``scenarios[0]`` (``benchmarks/zoo_tv.py``, 200k
        seeded draws, bias-corrected; outcomes of probability 0 count); None where that law is exact.
    """

    name: str
    factory: Callable
    verdict: str
    bugs: tuple
    mechanism: str
    summary: str
    scenarios: tuple = field(default=("plain",))
    tv: float | None = None


def zoo_entry(*, verdict: str, bugs: tuple, mechanism: str, scenarios: tuple = ("plain",), tv=None):
    """Register the decorated factory as a zoo entry; its summary is the docstring's first line."""
    check(verdict in VERDICTS, f"verdict={verdict!r} must be one of {VERDICTS!r}.")

    def register(factory):
        summary = (factory.__doc__ or "").strip().splitlines()[0]
        check(factory.__name__ not in _REGISTRY, f"zoo entry {factory.__name__!r} is registered twice.")
        _REGISTRY[factory.__name__] = ZooEntry(factory.__name__, factory, verdict, tuple(bugs), mechanism, summary,
                                               tuple(scenarios), tv)
        return factory

    return register


def registered() -> dict:
    return dict(_REGISTRY)
