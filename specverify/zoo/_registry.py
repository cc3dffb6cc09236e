"""The zoo's catalogue entry type and the decorator that registers a factory (private)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from specverify.enums import Verdict
from specverify.errors import check
from specverify.mechanisms import MECHANISMS

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
    verdict : Verdict
        The verdict docs/design.md's rules give it (one of ``Verdict.decoder_verdicts()``); the factory's docstring
        derives it.
    mechanism : str
        Its id in ``specverify.mechanisms.MECHANISMS`` (what goes wrong, the state involved, the engines' issues).
    summary : str
        One line: what the mutation does.
    showcases : tuple of str
        Names in ``specverify.zoo.SHOWCASES`` where the mechanism shows (used by the benchmark and the tests).
    tv : float or None
        Estimated TV between its output law and the exact law on ``showcases[0]`` (``benchmarks/zoo_tv.py``, 200k
        seeded draws, bias-corrected; outcomes of probability 0 count); None where that law is exact or not measured
        there.
    drafts : str
        The draft family whose scenarios it runs on (``certify(..., drafts=...)``; "ar": the AR toy draft and the
        showcases; others: ``specverify.zoo.drafts``).
    checks : tuple of str
        The named checks beside the verdict that it fails (``Certificate.failed_checks``: ``"metrics"``,
        ``"reproducible"``, ``"counters"``); empty for an entry that fails none.
    """

    name: str
    factory: Callable
    verdict: Verdict
    mechanism: str
    summary: str
    showcases: tuple = field(default=("plain",))
    tv: Optional[float] = None
    drafts: str = "ar"
    checks: tuple = ()

    @property
    def bugs(self) -> tuple[str, ...]:
        """The real bugs it stands for (its mechanism's, docs/bugs.md): ``"project #number"``, or ``"seed"`` for a
        failure mode of the seed document."""
        return MECHANISMS[self.mechanism].bugs


def zoo_entry(
    *,
    verdict: str,
    mechanism: str,
    showcases: tuple = ("plain",),
    tv: Optional[float] = None,
    drafts: str = "ar",
    checks: tuple = (),
) -> Callable[[Callable], Callable]:
    """Register the decorated factory as a zoo entry; its summary is the docstring's first line."""
    tag = Verdict.parse(verdict, "verdict")
    check(
        tag in Verdict.decoder_verdicts(),
        f"verdict={verdict!r} must be a decoder verdict, one of {[str(v) for v in Verdict.decoder_verdicts()]!r}.",
    )
    check(
        mechanism in MECHANISMS,
        f"mechanism={mechanism!r} is not in specverify.mechanisms.MECHANISMS: add it "
        "there (with its bugs) or use one of its ids.",
    )

    check(
        set(checks) <= {"metrics", "reproducible", "counters"},
        f"checks={checks!r} must name checks of the certificate: 'metrics', 'reproducible', 'counters'.",
    )

    def register(factory: Callable) -> Callable:
        summary = (factory.__doc__ or "").strip().splitlines()[0]
        known = _REGISTRY.get(factory.__name__)
        # a module run again (a reload, a re-import after pytester restored sys.modules) replaces its own entries;
        # one module defining a name twice is ruff's F811
        check(
            known is None or known.factory.__module__ == factory.__module__,
            f"zoo entry {factory.__name__!r} is registered twice ({known and known.factory.__module__}, "
            f"{factory.__module__}).",
        )
        _REGISTRY[factory.__name__] = ZooEntry(
            factory.__name__, factory, tag, mechanism, summary, tuple(showcases), tv, drafts, tuple(checks)
        )
        factory.draft_family = drafts  # certify runs the entry on its family's matrix unless --drafts says otherwise
        return factory

    return register


def registered() -> dict:
    return dict(_REGISTRY)
