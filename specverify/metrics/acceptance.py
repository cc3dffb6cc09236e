"""Acceptance metrics measured over every round, each beside its exact expectation (docs/metrics.md).

A measurement (:class:`AcceptanceCounts`: the all-round histogram of accepted lengths, per draft position the rounds
in which it was verified and accepted, the requests and the tokens they emitted) is compared with the
:class:`~specverify.oracles.acceptance_rounds.AcceptanceLaw` of the same request shape. Every metric is a ratio of
two linear functions of the per-request vector the law carries (its mean and covariance), so one delta-method
interval serves them all; the family's α is split evenly (Bonferroni) over the metrics judged.

:func:`consistency_violation` is the law-free rule: the accepted counts a decoder reports must add up to the tokens
it emitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from specverify.errors import InvalidArgument, check

__all__ = [
    "AcceptanceCounts",
    "Metric",
    "METRIC_KINDS",
    "MetricsReport",
    "acceptance_metrics",
    "completion_violation",
    "consistency_violation",
    "counts_from_completions",
    "PREFILL_TOKENS",
    "MIN_EXPECTED",
]

#: Tokens an engine may commit before its first verification round when it does not say (``decoder.prefill_tokens``;
#: vLLM's draft models: the prefill's token, measured one); the consistency rule allows up to this many per
#: completion. ``prefill=None`` drops the upper bound: steps without drafts that go unreported (vLLM's n-gram).
PREFILL_TOKENS = 2
#: A metric is judged only where its numerator, denominator and their difference expect at least this many counts
#: (the normal approximation at α ~ 1e-7 per metric needs it); below, it is shown without a verdict.
MIN_EXPECTED = 200.0


@dataclass(frozen=True)
class AcceptanceCounts:
    """All-round acceptance measured over ``requests`` independent requests of one shape.

    ``rounds``: {accepted length: rounds}; ``positions[k]``: (verified, accepted) for draft position k, or None when
    the decoder does not report what it verified; ``tokens``: tokens emitted over all requests."""

    rounds: Mapping[int, int]
    positions: Optional[tuple]
    requests: int
    tokens: int

    def __post_init__(self):
        check(isinstance(self.requests, int) and self.requests >= 1, f"requests={self.requests!r} must be an int >= 1.")
        check(isinstance(self.tokens, int) and self.tokens >= 0, f"tokens={self.tokens!r} must be an int >= 0.")
        bad = {m: c for m, c in dict(self.rounds).items() if not (int(m) >= 0 and int(c) >= 0)}
        check(not bad, f"rounds={dict(self.rounds)!r} must map accepted lengths >= 0 to counts >= 0 ({bad!r}).")

    def vector(self, gamma: int) -> np.ndarray:
        """The summed per-request vector in the law's layout: rounds per length, tokens, verified_k, accepted_k."""
        s = np.zeros(3 * gamma + 2)
        for m, c in self.rounds.items():
            s[min(int(m), gamma)] += c  # a length above γ is a consistency failure, reported separately
        s[gamma + 1] = self.tokens
        for k, (v, a) in enumerate((self.positions or ())[:gamma]):
            s[gamma + 2 + k], s[2 * gamma + 2 + k] = v, a
        if self.positions is None:  # accepted at k: the rounds accepting more than k drafts (verified: unknown)
            s[2 * gamma + 2 :] = np.cumsum(s[gamma:0:-1])[::-1]
        return s


#: What a metric measures (``Metric.kind``); ``rounds_accepting`` is indexed by the drafts accepted in a round,
#: ``accepted_at_position`` and ``acceptance_at_position`` by the draft position (``Metric.index``).
METRIC_KINDS = (
    "tokens_per_call",
    "calls_per_token",
    "mean_acceptance_length",
    "acceptance_rate",
    "rounds_accepting",
    "accepted_at_position",
    "acceptance_at_position",
)


@dataclass(frozen=True)
class Metric:
    """One metric: what it measures (``kind``, one of :data:`METRIC_KINDS`, with its ``index`` where it has one),
    its ``name`` in words, the measured value, its exact expectation and the 1-α interval a correct decoder's
    measurement falls in; ``inside`` is None where too few counts are expected to judge."""

    name: str
    measured: float
    expected: float
    interval: tuple
    inside: Optional[bool]
    kind: str = ""
    index: Optional[int] = None


@dataclass(frozen=True)
class MetricsReport:
    """Every metric of one measurement, the all-round histogram's p-value and the family's α."""

    metrics: tuple
    rounds_pvalue: Optional[float]
    alpha: float

    @property
    def failed(self) -> tuple:
        return tuple(m for m in self.metrics if m.inside is False)

    @property
    def ok(self) -> bool:
        return not self.failed


def _ratio(spec, a, b, s, law, n, z) -> Metric:
    """(a·S)/(b·S) measured beside (a·μ)/(b·μ), delta-method interval with half-width z·sqrt(gᵀΣg/n); ``spec`` is
    the metric's (name, kind, index)."""
    name, kind, index = spec
    mu, cov = law._mean, law._cov
    num, den = float(a @ mu), float(b @ mu)
    measured = float(a @ s) / float(b @ s) if float(b @ s) > 0 else float("nan")
    if den <= 0:
        nan = float("nan")
        return Metric(name, measured, nan, (nan, nan), None if b @ s == 0 else False, kind, index)
    expected = num / den
    g = a / den - num * b / den**2
    half = z * float(np.sqrt(max(g @ cov @ g, 0.0) / n)) + 1e-9 * max(1.0, abs(expected))
    lo, hi = expected - half, expected + half
    counts = n * np.array([num, den, abs(den - num)])
    judged = counts[:2].min() >= MIN_EXPECTED and (counts[2] >= MIN_EXPECTED or counts[2] == 0)
    inside = (lo <= measured <= hi) if judged else None
    if np.isnan(measured):
        inside = False if judged else None
    return Metric(name, measured, expected, (lo, hi), inside, kind, index)


def acceptance_metrics(counts: AcceptanceCounts, law: object, *, alpha: float = 1e-6) -> MetricsReport:
    """Each metric of docs/metrics.md measured from ``counts`` beside its exact expectation under ``law``.

    Examples
    --------
    >>> from specverify.oracles import draft_near, make_vocab, random_target
    >>> from specverify.oracles.acceptance_rounds import acceptance_law
    >>> from specverify.params import SamplingParams
    >>> target = random_target(make_vocab(4), seed=0)
    >>> law = acceptance_law(target, draft_near(target, distance=0.5, seed=1), (0,), SamplingParams(max_tokens=3), 2)
    >>> n = 1000
    >>> exact = AcceptanceCounts({m: round(n * c) for m, c in enumerate(law.rounds_mean)},
    ...     None, n, round(n * law.expected_tokens))
    >>> report = acceptance_metrics(exact, law)
    >>> report.metrics[0].name, abs(report.metrics[0].measured - law.tokens_per_call) < 0.01
    ('tokens per target call', True)
    """
    check(isinstance(counts, AcceptanceCounts), f"counts={counts!r} must be an AcceptanceCounts.")
    check(hasattr(law, "_mean") and hasattr(law, "gamma"), f"law={law!r} must be an AcceptanceLaw (acceptance_law).")
    check(isinstance(alpha, float) and 0 < alpha < 0.5, f"alpha={alpha!r} must be a float in (0, 0.5).")
    g, n = law.gamma, counts.requests
    s = counts.vector(g)
    size = 3 * g + 2
    unit = np.eye(size)
    rounds = np.zeros(size)
    rounds[: g + 1] = 1.0
    accepted = np.zeros(size)
    accepted[: g + 1] = np.arange(g + 1)
    specs = [
        (("tokens per target call", "tokens_per_call", None), unit[g + 1], rounds),
        (("target calls per output token", "calls_per_token", None), rounds, unit[g + 1]),
        (("mean acceptance length (1 + accepted / rounds)", "mean_acceptance_length", None), rounds + accepted, rounds),
        (("draft acceptance rate (accepted / (γ · rounds))", "acceptance_rate", None), accepted, g * rounds),
    ]
    specs += [((f"rounds accepting {m} of {g}", "rounds_accepting", m), unit[m], rounds) for m in range(g + 1)]
    specs += [
        ((f"accepted at position {k} per round", "accepted_at_position", k), unit[2 * g + 2 + k], rounds)
        for k in range(g)
    ]
    if counts.positions is not None:
        conditional = "acceptance at position {} (accepted / verified)"
        specs += [
            ((conditional.format(k), "acceptance_at_position", k), unit[2 * g + 2 + k], unit[g + 2 + k])
            for k in range(g)
        ]
    import scipy.stats  # lazy: the certifier imports this module to check counts, scipy.stats costs ~1 s

    z = float(scipy.stats.norm.isf(alpha / (2 * len(specs))))
    metrics = tuple(_ratio(spec, a, b, s, law, n, z) for spec, a, b in specs)
    pvalue = None
    observed = {int(m): int(c) for m, c in counts.rounds.items()}
    if all(0 <= m <= g for m in observed):
        pvalue = float(law.rounds_pvalue(observed, n))
    return MetricsReport(metrics, pvalue, alpha)


def completion_violation(
    tokens: int, accepted: Sequence[int], gamma: int, *, prefill: Optional[int] = PREFILL_TOKENS
) -> Optional[str]:
    """Why one completion's per-round ``accepted`` cannot be right for ``tokens`` emitted, or None.

    Every round commits its accepted drafts and one more token; only the finishing round may stop short of that one
    (its accepted drafts, up to the finishing token, are all emitted); up to ``prefill`` tokens may come before the
    first round. So ``Σ (accepted + 1) - 1 <= tokens <= Σ (accepted + 1) + prefill`` and ``0 <= accepted <= γ``.

    >>> completion_violation(5, (2, 1), 2), completion_violation(3, (2, 1), 2, prefill=0)
    (None, 'accepted=(2, 1) claims at least 4 tokens (Σ(accepted + 1) - 1), 3 were emitted')
    """
    check(isinstance(tokens, int) and tokens >= 0, f"tokens={tokens!r} must be an int >= 0.")
    check(isinstance(gamma, int) and gamma >= 1, f"gamma={gamma!r} must be an int >= 1.")
    accepted = tuple(int(a) for a in accepted)
    bad = [a for a in accepted if not 0 <= a <= gamma]
    if bad:
        return f"accepted={accepted!r} holds {bad!r} outside [0, γ={gamma}] (drafts accepted per round)"
    if not accepted:
        return None
    full = sum(a + 1 for a in accepted)
    if tokens < full - 1:
        return f"accepted={accepted!r} claims at least {full - 1} tokens (Σ(accepted + 1) - 1), {tokens} were emitted"
    if prefill is not None and tokens > full + prefill:
        return (
            f"accepted={accepted!r} accounts for at most {full + prefill} tokens (Σ(accepted + 1) + {prefill} before "
            f"the first round), {tokens} were emitted"
        )
    return None


def consistency_violation(
    rounds: Mapping[int, int],
    positions: Optional[tuple],
    *,
    requests: int,
    tokens: int,
    gamma: int,
    first_round: Optional[Mapping[int, int]] = None,
    prefill: Optional[int] = PREFILL_TOKENS,
) -> Optional[str]:
    """The aggregate rule over ``requests`` (the fast path's ``SampleCounts``), or None when it holds.

    With R rounds accepting A drafts in all: ``A + R - requests <= tokens <= A + R + prefill · requests``; every
    length in [0, γ]; ``positions[k]`` accepted equals the rounds that accepted more than k drafts and lies within
    [0, verified], verified within [0, R]; the first rounds' histogram is part of the all-round one.

    >>> consistency_violation({1: 2, 0: 1}, ((3, 2),), requests=1, tokens=4, gamma=1) is None
    True
    """
    check(isinstance(requests, int) and requests >= 1, f"requests={requests!r} must be an int >= 1.")
    check(isinstance(gamma, int) and gamma >= 1, f"gamma={gamma!r} must be an int >= 1.")
    hist = {int(m): int(c) for m, c in rounds.items() if int(c)}
    bad = sorted(m for m in hist if not 0 <= m <= gamma)
    if bad or any(c < 0 for c in hist.values()):
        return f"rounds={hist!r} holds accepted lengths {bad!r} outside [0, γ={gamma}] (or negative counts)"
    total_rounds = sum(hist.values())
    total_accepted = sum(m * c for m, c in hist.items())
    if tokens < total_accepted + total_rounds - requests:
        return (
            f"rounds={hist!r} claim at least {total_accepted + total_rounds - requests} tokens over {requests} "
            f"requests (Σ(accepted + 1) less one finishing token each), {tokens} were emitted"
        )
    if prefill is not None and tokens > total_accepted + total_rounds + prefill * requests:
        most = total_accepted + total_rounds + prefill * requests
        return f"rounds={hist!r} account for at most {most} tokens over {requests} requests, {tokens} were emitted"
    if first_round is not None:
        over = {m: c for m, c in first_round.items() if c > hist.get(int(m), 0)}
        if over:
            return f"first-round counts {dict(first_round)!r} exceed the all-round ones {hist!r} at {sorted(over)!r}"
    for k, (verified, acc) in enumerate(positions or ()):
        want = sum(c for m, c in hist.items() if m > k)
        if acc != want:
            return f"positions[{k}] reports {acc} accepted, the rounds histogram {hist!r} says {want} (rounds > {k})"
        if not 0 <= acc <= verified <= total_rounds:
            return f"positions[{k}] = ({verified}, {acc}): needs 0 <= accepted <= verified <= rounds ({total_rounds})"
    return None


def counts_from_completions(completions: Sequence[object]) -> Optional[AcceptanceCounts]:
    """The all-round histogram of completions that report ``accepted`` (no positions: the slow path does not say what
    was verified), or None when none report it."""
    if not isinstance(completions, (list, tuple)):
        raise InvalidArgument(f"completions={type(completions).__name__} must be a list of Completion.")
    hist: dict = {}
    tokens = reported = 0
    for comp in completions:
        if comp.accepted:
            reported += 1
            tokens += len(comp.tokens)
            for a in comp.accepted:
                hist[int(a)] = hist.get(int(a), 0) + 1
    return AcceptanceCounts(hist, None, reported, tokens) if reported else None
