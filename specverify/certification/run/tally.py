"""Counts of one request shape's draws: ``Draws`` (what a check judges), the slow path's ``Tally``, their JSON forms.

The JSON forms (:func:`draws_to_dict`, :func:`tally_to_dict` and their inverses) carry counts between processes and
runs: the part documents of a split run (``parts.py``) and the resume file (``resume.py``). A round trip gives back
equal counts (tokens as tuples, count keys as ints).
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional

from specverify.certification.run.bulk import gc_paused
from specverify.metrics.acceptance import PREFILL_TOKENS
from specverify.metrics.acceptance import completion_violation as accepted_violation
from specverify.protocol import Completion

__all__ = ["Draws", "Tally", "merge_draws", "draws_to_dict", "draws_from_dict", "tally_to_dict", "tally_from_dict"]

_OUTCOME = operator.attrgetter("tokens", "finish_reason")
_TOKENS, _ACCEPTED = operator.attrgetter("tokens"), operator.attrgetter("accepted")


def _slack(prefill: Optional[int], draft_law: str) -> Optional[int]:
    """Tokens a completion may emit beyond its reported rounds: what the decoder declares it emits before its first
    round, else ``PREFILL_TOKENS``; no bound for unmodelled drafts (an engine may take steps without a draft and not
    report them: vLLM's n-gram, docs/findings/vllm.md finding 7)."""
    if prefill is not None:
        return prefill
    return None if draft_law == "unmodelled" else PREFILL_TOKENS


@dataclass(frozen=True)
class Draws:
    """``n`` outcomes of one request shape: counts per (tokens, finish_reason) and of the first round's accepted
    drafts (None when the decoder does not report them)."""

    outcomes: Counter
    accepted: Optional[Counter]
    n: int
    rounds: Optional[Counter] = None  # all-round histogram (docs/metrics.md), None when not reported
    positions: Optional[tuple] = None  # per draft position (verified, accepted); the fast path only
    violation: Optional[str] = None  # the first breach of the law-free acceptance consistency rule
    prefill: int = 0  # tokens before the first round: declared (decoder.prefill_tokens) or inferred from the counts


class Tally:
    """Slow-path counts of one request shape: outcomes, first-round and all-round accepted counts, and the first
    completion whose ``accepted`` breaks the consistency rule (``specverify.metrics.acceptance``).

    Completions are counted per (tokens emitted, ``accepted``) shape, and each shape is checked once: a tally sees
    hundreds of thousands of completions and a few dozen shapes. ``prefill``: the tokens the decoder declares it
    emits before its first round (None: inferred from the counts, at most ``PREFILL_TOKENS``).

    ``accepted=None`` means "not reported" (``()``: no round). When some completions of the shape report and others
    do not, the shape's acceptance is not reported at all: the reporting ones are a subset chosen by how they ended
    (vLLM drops the counts of stop-ended requests), so their rounds beside every completion's tokens would bias every
    metric. Their breaches of the consistency rule are still kept."""

    def __init__(self, gamma: int, prefill: Optional[int] = None, draft_law: str = "model"):
        self.gamma, self.outcomes, self.prefill, self.draft_law = gamma, Counter(), prefill, draft_law
        self.shapes = Counter()  # (len(tokens), accepted) -> completions
        self.violation = None
        self.slack = 0  # the most tokens a completion emitted beyond Σ(accepted + 1) - 1
        self.unreported = 0  # completions with accepted=None

    def add(self, comp: Completion) -> None:
        self.outcomes[(comp.tokens, comp.finish_reason)] += 1
        self._count_shape((len(comp.tokens), comp.accepted), 1, lambda: comp.tokens)

    def add_all(self, completions: Iterable[Completion]) -> None:
        """:meth:`add` for each completion, in order, counted in bulk: the same counts, slack and violation (new
        shapes are met in the order of their first completion, as :meth:`add` meets them)."""
        completions = list(completions)
        with gc_paused():
            self.outcomes.update(map(_OUTCOME, completions))
            shapes = list(zip(map(len, map(_TOKENS, completions)), map(_ACCEPTED, completions)))
        for shape, count in Counter(shapes).items():  # a Counter keeps first-appearance order
            self._count_shape(shape, count, lambda: completions[shapes.index(shape)].tokens)  # noqa: B023

    def _count_shape(self, shape: tuple, count: int, tokens_of) -> None:
        """Count ``count`` completions of ``shape`` (tokens emitted, accepted); a new shape is checked against the
        consistency rule, and ``tokens_of()`` (its first completion's tokens) names a breach."""
        emitted, accepted = shape
        if accepted is None:
            self.unreported += count
            return
        if not accepted:
            return
        if shape not in self.shapes:
            self.slack = max(self.slack, emitted - sum(accepted) - len(accepted) + 1)
            if self.violation is None:
                problem = accepted_violation(emitted, accepted, self.gamma, prefill=self.slack_allowed())
                self.violation = f"{problem} (tokens {list(tokens_of())})" if problem else None
        self.shapes[shape] += count

    def slack_allowed(self) -> Optional[int]:
        return _slack(self.prefill, self.draft_law)

    def draws(self, n: int) -> Draws:
        prefill = self.prefill
        if prefill is None:  # inferred: the finishing round may account for one token of the slack
            prefill = min(max(self.slack - 1, 0), PREFILL_TOKENS)
        first, rounds = Counter(), Counter()
        if not self.unreported:  # partly reported: not reported (class docstring)
            for (_, accepted), count in self.shapes.items():
                first[accepted[0]] += count
                for a in accepted:
                    rounds[a] += count
        return Draws(self.outcomes, first or None, n, rounds=rounds or None, violation=self.violation, prefill=prefill)


def merge_draws(first: Optional[Draws], second: Draws) -> Draws:
    """Two batches of draws of one request shape as one (sequential looks)."""
    if first is None:
        return second

    def add(a, b):
        return None if a is None and b is None else Counter(a or {}) + Counter(b or {})

    positions = None
    if first.positions is not None and second.positions is not None:
        positions = tuple((v1 + v2, a1 + a2) for (v1, a1), (v2, a2) in zip(first.positions, second.positions))
    return Draws(
        first.outcomes + second.outcomes,
        add(first.accepted, second.accepted),
        first.n + second.n,
        rounds=add(first.rounds, second.rounds),
        positions=positions,
        violation=first.violation or second.violation,
        prefill=max(first.prefill, second.prefill),
    )


def _counter_rows(counter: Optional[Counter]) -> Optional[list]:
    return None if counter is None else [[k, v] for k, v in counter.items()]


def _counter_of(rows: Optional[list], key=int) -> Optional[Counter]:
    return None if rows is None else Counter({key(k): int(v) for k, v in rows})


def _outcome(row) -> tuple:
    return tuple(int(t) for t in row[0]), str(row[1])


def draws_to_dict(draws: Draws) -> dict:
    """``draws`` as plain JSON values (outcomes as ``[tokens, finish_reason, count]`` rows, in the counter's order)."""
    return {
        "n": draws.n,
        "outcomes": [[list(tokens), reason, count] for (tokens, reason), count in draws.outcomes.items()],
        "accepted": _counter_rows(draws.accepted),
        "rounds": _counter_rows(draws.rounds),
        "positions": None if draws.positions is None else [list(p) for p in draws.positions],
        "violation": draws.violation,
        "prefill": draws.prefill,
    }


def draws_from_dict(data: dict) -> Draws:
    """The inverse of :func:`draws_to_dict`."""
    return Draws(
        Counter({_outcome(row): int(row[2]) for row in data["outcomes"]}),
        _counter_of(data["accepted"]),
        int(data["n"]),
        rounds=_counter_of(data["rounds"]),
        positions=None if data["positions"] is None else tuple((int(v), int(a)) for v, a in data["positions"]),
        violation=data["violation"],
        prefill=int(data["prefill"]),
    )


def tally_to_dict(tally: Tally) -> dict:
    """A slow-path tally in the middle of a draw, as plain JSON values (what :func:`tally_from_dict` continues)."""
    return {
        "gamma": tally.gamma,
        "prefill": tally.prefill,
        "draft_law": tally.draft_law,
        "outcomes": [[list(tokens), reason, count] for (tokens, reason), count in tally.outcomes.items()],
        "shapes": [
            [emitted, None if acc is None else list(acc), count] for (emitted, acc), count in tally.shapes.items()
        ],
        "violation": tally.violation,
        "slack": tally.slack,
        "unreported": tally.unreported,
    }


def tally_from_dict(data: dict) -> Tally:
    """The inverse of :func:`tally_to_dict`: the same counts, slack and first violation."""
    tally = Tally(int(data["gamma"]), data["prefill"], data["draft_law"])
    tally.outcomes = Counter({_outcome(row): int(row[2]) for row in data["outcomes"]})
    tally.shapes = Counter(
        {(int(e), None if a is None else tuple(int(x) for x in a)): int(c) for e, a, c in data["shapes"]}
    )
    tally.violation, tally.slack, tally.unreported = data["violation"], int(data["slack"]), int(data["unreported"])
    return tally
