"""Counter identities: law-free checks of the aggregate acceptance counters an engine reports about itself.

An engine keeps its own tallies of speculation (vLLM's ``spec_decode_num_drafts`` / ``num_draft_tokens`` /
``num_accepted_tokens`` / ``num_accepted_tokens_per_pos``, llama.cpp's ``draft_n`` / ``draft_n_accepted``) and prints
rates derived from them. A decoder hands them to the certifier through the optional ``decoder.reported_metrics()``
hook (docs/adapters.md) as a :class:`ReportedMetrics`: cumulative counts since the decoder was made, ``None`` for what
the engine does not report. Whatever the laws, correct counters satisfy identities among themselves and agree with
what the engine's completions say (``Completion.accepted``, ``SampleCounts.rounds``); :func:`counter_identities`
checks them (docs/metrics.md, "Counter identities"). Pure Python: no numpy, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Mapping, Optional, Sequence

from specverify.errors import InvalidArgument, check

__all__ = [
    "ReportedMetrics",
    "CounterTally",
    "Identity",
    "as_reported_metrics",
    "counter_identities",
    "RATE_TOLERANCE",
]

#: Rates an engine prints are rounded (vLLM, llama.cpp: 2 decimals for the mean length, 3 for rates), and a sum of
#: γ rounded rates errs by up to 0.005 + γ · 0.0005: a printed rate agrees with its definition within this absolute
#: tolerance (plus 1e-9 relative) for γ <= 10. The counter bugs this catches move a rate by far more (a data-parallel
#: size of 2 halves it; a denominator of γ + 1 for γ = 3 takes a quarter).
RATE_TOLERANCE = 1e-2

_COUNTS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
_RATES = ("mean_acceptance_length", "acceptance_rate")


def _count(name, value) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # Prometheus counters are floats
    check(
        isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        f"{name}={value!r} must be a count (an int >= 0) or None when the engine does not report it.",
    )
    return int(value)


def _rate(name, value) -> Optional[float]:
    if value is None:
        return None
    check(
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0,
        f"{name}={value!r} must be a finite number >= 0 (the rate as the engine computes it) or None.",
    )
    return float(value)


@dataclass(frozen=True)
class ReportedMetrics:
    """An engine's own aggregate speculation counters, cumulative since the decoder was made; None: not reported.

    Attributes
    ----------
    num_drafts : int or None
        Verification rounds that carried drafts (vLLM ``num_drafts``).
    num_draft_tokens : int or None
        Drafted tokens the target judged over those rounds (the acceptance rate's denominator).
    num_accepted_tokens : int or None
        Drafts accepted.
    accepted_per_position : tuple of int, or None
        Drafts accepted at draft position k = 0, 1, ... (0-based).
    mean_acceptance_length, acceptance_rate : float or None
        The rates the engine derives from its counts over the same window (``1 + accepted / drafts``,
        ``accepted / draft tokens``), as it prints them.
    acceptance_rate_per_position : tuple of float, or None
        Accepted at position k per round with drafts (vLLM's per-position acceptance rate), as printed.
    """

    num_drafts: Optional[int] = None
    num_draft_tokens: Optional[int] = None
    num_accepted_tokens: Optional[int] = None
    accepted_per_position: Optional[tuple] = None
    mean_acceptance_length: Optional[float] = None
    acceptance_rate: Optional[float] = None
    acceptance_rate_per_position: Optional[tuple] = None

    def __post_init__(self):
        for name in _COUNTS:
            object.__setattr__(self, name, _count(name, getattr(self, name)))
        for name in _RATES:
            object.__setattr__(self, name, _rate(name, getattr(self, name)))
        for name, one in (("accepted_per_position", _count), ("acceptance_rate_per_position", _rate)):
            value = getattr(self, name)
            if value is not None:
                check(
                    isinstance(value, (list, tuple)) and not isinstance(value, str),
                    f"{name}={value!r} must be a sequence (one entry per draft position) or None.",
                )
                object.__setattr__(self, name, tuple(one(f"{name}[{k}]", v) for k, v in enumerate(value)))

    def to_dict(self) -> dict:
        """JSON-ready: only the fields the engine reports."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def minus(self, before: ReportedMetrics) -> tuple:
        """(the counts accumulated since ``before``, None per field not reported, and the first counter that went
        down as (name, now, before), or None): rates are not differences of anything, so they are left out."""
        delta, down = {}, None
        for name in _COUNTS + ("accepted_per_position",):
            now, then = getattr(self, name), getattr(before, name)
            if now is None:
                continue
            if name == "accepted_per_position":
                width = max(len(now), len(then or ()))
                now = now + (0,) * (width - len(now))
                then = tuple(then or ()) + (0,) * (width - len(then or ()))
                diff = tuple(a - b for a, b in zip(now, then))
                bad = [k for k, d in enumerate(diff) if d < 0]
                if bad and down is None:
                    down = (f"accepted_per_position[{bad[0]}]", now[bad[0]], then[bad[0]])
                delta[name] = tuple(max(d, 0) for d in diff)
                continue
            diff = now - (then or 0)
            if diff < 0 and down is None:
                down = (name, now, then)
            delta[name] = max(diff, 0)
        return ReportedMetrics(**delta), down


def as_reported_metrics(value: object, where: str = "decoder.reported_metrics()") -> Optional[ReportedMetrics]:
    """``value`` as a :class:`ReportedMetrics`: one already, a mapping of its field names, or None (nothing
    reported). Raises ``InvalidArgument`` naming ``where`` for anything else."""
    if value is None or isinstance(value, ReportedMetrics):
        return value
    if not isinstance(value, Mapping):
        raise InvalidArgument(
            f"{where} returned {type(value).__name__}: expected a ReportedMetrics, a dict of its fields or None "
            "(docs/adapters.md, 'Engine counters')."
        )
    known = {f.name for f in fields(ReportedMetrics)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidArgument(f"{where} returned keys {unknown!r}: expected keys among {sorted(known)}.")
    try:
        return ReportedMetrics(**value)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None


@dataclass
class CounterTally:
    """What the completions themselves say over a window: the certifier's own tallies.

    ``rounds`` and ``accepted`` over completions that report acceptance (``Completion.accepted`` or the fast path's
    ``SampleCounts.rounds``), ``per_position[k]`` the rounds that accepted more than k drafts, ``draft_capacity``
    Σ γ · rounds (no round drafts more than its request's γ), ``unreported`` the completions that did not say."""

    completions: int = 0
    unreported: int = 0
    rounds: int = 0
    accepted: int = 0
    draft_capacity: int = 0
    max_gamma: int = 0
    per_position: list = field(default_factory=list)

    def _positions(self, gamma: int) -> None:
        self.max_gamma = max(self.max_gamma, gamma)
        self.per_position += [0] * (gamma - len(self.per_position))

    def add_completion(self, accepted: Optional[Sequence[int]], gamma: int) -> None:
        """One completion of a request with ``gamma`` drafts per round (``accepted``: its per-round counts)."""
        self.completions += 1
        self._positions(gamma)
        if accepted is None:
            self.unreported += 1
            return
        self.rounds += len(accepted)
        self.accepted += sum(accepted)
        self.draft_capacity += gamma * len(accepted)
        for a in accepted:
            for k in range(min(int(a), gamma)):
                self.per_position[k] += 1

    def add_counts(self, rounds: Optional[Mapping[int, int]], n: int, gamma: int) -> None:
        """``n`` draws of the fast path with all-round histogram ``rounds`` (None: not reported)."""
        self.completions += n
        self._positions(gamma)
        if rounds is None:
            self.unreported += n
            return
        for m, c in rounds.items():
            self.rounds += c
            self.accepted += m * c
            self.draft_capacity += gamma * c
            for k in range(min(int(m), gamma)):
                self.per_position[k] += c

    def to_dict(self) -> dict:
        return {
            "completions": self.completions,
            "unreported": self.unreported,
            "rounds": self.rounds,
            "accepted": self.accepted,
            "draft_capacity": self.draft_capacity,
            "per_position": list(self.per_position),
        }


@dataclass(frozen=True)
class Identity:
    """One identity: ``left relation right`` (relation ``=``, ``<=``, ``>=`` or ``≈`` within ``RATE_TOLERANCE``)
    and whether it held."""

    name: str
    left: float
    relation: str
    right: float
    held: bool

    def row(self) -> list:
        return [self.name, self.left, self.relation, self.right, self.held]


def _holds(left, relation, right) -> bool:
    if relation == "=":
        return left == right
    if relation == "<=":
        return left <= right
    if relation == ">=":
        return left >= right
    return abs(left - right) <= RATE_TOLERANCE + 1e-9 * abs(right)


def _identity(name, left, relation, right) -> Identity:
    return Identity(name, left, relation, right, _holds(left, relation, right))


def internal_identities(m: ReportedMetrics, *, counts_only: bool = False) -> list:
    """Identities among the counters themselves (law-free); ``counts_only``: leave the printed rates out (a
    difference of cumulative counters has no rates)."""
    out = []
    acc, drafts, tokens, per = m.num_accepted_tokens, m.num_drafts, m.num_draft_tokens, m.accepted_per_position
    if per is not None and acc is not None:
        out.append(_identity("Σ_k accepted_per_position[k] = num_accepted_tokens", sum(per), "=", acc))
    if acc is not None and tokens is not None:
        out.append(_identity("num_accepted_tokens <= num_draft_tokens", acc, "<=", tokens))
    if tokens is not None and drafts is not None:
        out.append(_identity("num_draft_tokens >= num_drafts (a draft has at least one token)", tokens, ">=", drafts))
    if per:
        rises = [k for k in range(1, len(per)) if per[k] > per[k - 1]]
        k = rises[0] if rises else len(per) - 1
        name = f"accepted_per_position[{k}] <= accepted_per_position[{max(k - 1, 0)}] (accepted drafts: a prefix)"
        out.append(_identity(name, per[k], "<=", per[max(k - 1, 0)]))
        if drafts is not None:
            out.append(_identity("accepted_per_position[0] <= num_drafts", per[0], "<=", drafts))
    if counts_only:
        return out
    if m.mean_acceptance_length is not None and acc is not None and drafts:
        out.append(_identity("mean_acceptance_length = 1 + num_accepted_tokens / num_drafts",
                             m.mean_acceptance_length, "≈", 1 + acc / drafts))  # fmt: skip
    rates = m.acceptance_rate_per_position
    if m.mean_acceptance_length is not None and rates is not None:
        out.append(_identity("mean_acceptance_length = 1 + Σ_k acceptance_rate_per_position[k]",
                             m.mean_acceptance_length, "≈", 1 + sum(rates)))  # fmt: skip
    if m.acceptance_rate is not None and acc is not None and tokens:
        out.append(_identity("acceptance_rate = num_accepted_tokens / num_draft_tokens", m.acceptance_rate, "≈",
                             acc / tokens))  # fmt: skip
    if rates is not None and per is not None and drafts:
        worst = max(range(min(len(rates), len(per))), key=lambda k: abs(rates[k] - per[k] / drafts), default=None)
        if worst is not None:
            out.append(_identity(f"acceptance_rate_per_position[{worst}] = accepted_per_position[{worst}] / "
                                 "num_drafts", rates[worst], "≈", per[worst] / drafts))  # fmt: skip
    return out


def tally_identities(delta: ReportedMetrics, tally: CounterTally) -> list:
    """The counts the engine accumulated over a window against what its completions say over it (law-free).

    Rounds and accepted drafts must be equal (nothing counted past the stop, nothing lost); per position, the
    rounds that accepted more than k drafts; drafted tokens at most Σ γ · rounds. Compared only when every
    completion of the window reported its acceptance (else the counts cannot add up)."""
    if tally.completions == 0 or tally.unreported:
        return []
    out = []
    if delta.num_drafts is not None:
        out.append(_identity("num_drafts = rounds the completions report", delta.num_drafts, "=", tally.rounds))
    if delta.num_accepted_tokens is not None:
        out.append(_identity("num_accepted_tokens = accepted drafts the completions report",
                             delta.num_accepted_tokens, "=", tally.accepted))  # fmt: skip
    if delta.accepted_per_position is not None:
        width = max(len(delta.accepted_per_position), len(tally.per_position))
        engine = tuple(delta.accepted_per_position) + (0,) * (width - len(delta.accepted_per_position))
        mine = tuple(tally.per_position) + (0,) * (width - len(tally.per_position))
        bad = [k for k in range(width) if engine[k] != mine[k]]
        k = bad[0] if bad else 0
        if width:
            name = f"accepted_per_position[{k}] = the completions' rounds accepting more than {k} drafts"
            out.append(_identity(name, engine[k], "=", mine[k]))
    if delta.num_draft_tokens is not None:
        out.append(_identity("num_draft_tokens <= Σ γ · the completions' rounds (no round drafts more than γ)",
                             delta.num_draft_tokens, "<=", tally.draft_capacity))  # fmt: skip
    return out


def counter_identities(
    before: Optional[ReportedMetrics], after: ReportedMetrics, tally: Optional[CounterTally] = None
) -> list:
    """Every identity that the reported fields allow, as :class:`Identity` rows (law-free: any correct counter
    satisfies them, whatever the law): among the cumulative counters and rates ``after``; among the counts
    accumulated since ``before`` (None: since the decoder was made); and, given the certifier's ``tally`` of the
    same window, between those counts and what the completions say.

    >>> before = ReportedMetrics(num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0, accepted_per_position=(0, 0))
    >>> after = ReportedMetrics(num_drafts=4, num_draft_tokens=8, num_accepted_tokens=5, accepted_per_position=(3, 2))
    >>> tally = CounterTally()
    >>> for accepted in [(2, 1), (0, 2)]:
    ...     tally.add_completion(accepted, gamma=2)
    >>> rows = counter_identities(before, after, tally)
    >>> len(rows), all(i.held for i in rows)
    (14, True)
    >>> wrong = ReportedMetrics(num_drafts=4, num_draft_tokens=12, num_accepted_tokens=5, accepted_per_position=(2, 1))
    >>> [i.name for i in counter_identities(before, wrong, tally) if not i.held][:2]
    ['Σ_k accepted_per_position[k] = num_accepted_tokens', 'window: Σ_k accepted_per_position[k] = num_accepted_tokens']
    """
    check(isinstance(after, ReportedMetrics), f"after={after!r} must be a ReportedMetrics.")
    check(before is None or isinstance(before, ReportedMetrics), f"before={before!r} must be a ReportedMetrics.")
    check(tally is None or isinstance(tally, CounterTally), f"tally={tally!r} must be a CounterTally or None.")
    out = internal_identities(after)
    delta, down = after.minus(before or ReportedMetrics())
    if down is not None:
        name, now, then = down
        out.append(Identity(f"{name} is cumulative (never decreases)", now, ">=", then, False))
    if before is not None:
        out += [replace_name(i, "window: ") for i in internal_identities(delta, counts_only=True)]
    if tally is not None:
        out += tally_identities(delta, tally)
    return out


def replace_name(identity: Identity, prefix: str) -> Identity:
    return Identity(prefix + identity.name, identity.left, identity.relation, identity.right, identity.held)
