"""Acceptance metrics beside their exact expectation, and the law-free consistency rule (docs/metrics.md)."""

import numpy as np
import pytest

from specverify.errors import InvalidArgument
from specverify.metrics.acceptance import (
    AcceptanceCounts,
    acceptance_metrics,
    completion_violation,
    consistency_violation,
    counts_from_completions,
)
from specverify.oracles.acceptance_rounds import acceptance_law
from specverify.params import SamplingParams
from specverify.protocol import Completion, Request
from specverify.reference import make_block_decoder, make_decoder
from tests.drafts import _families as fam


class _Law:
    """A hand-made law for γ = 1: per request 0.5 rounds accepting 0, 1.0 accepting 1, 2.5 tokens, position 0
    verified 1.5 times and accepted 1.0 times; independent coordinates with variance 0.25 each."""

    gamma = 1
    _mean = np.array([0.5, 1.0, 2.5, 1.5, 1.0])
    _cov = np.eye(5) * 0.25

    def rounds_pvalue(self, observed, n):
        return 1.0


def _metric(report, prefix):
    return next(m for m in report.metrics if m.name.startswith(prefix))


def test_hand_computed_ratios_and_interval():
    n = 1000
    counts = AcceptanceCounts({0: 500, 1: 1000}, ((1500, 1000),), n, 2500)
    report = acceptance_metrics(counts, _Law(), alpha=1e-6)
    tpc = _metric(report, "tokens per target call")
    assert tpc.measured == pytest.approx(2500 / 1500) and tpc.expected == pytest.approx(2.5 / 1.5)
    # delta method by hand: g = (1/1.5 on tokens, -2.5/1.5² on each round count); var = 0.25 (g·g) / n
    g2 = (1 / 1.5) ** 2 + 2 * (2.5 / 1.5**2) ** 2
    import scipy.stats

    z = scipy.stats.norm.isf(1e-6 / (2 * len(report.metrics)))
    half = z * np.sqrt(0.25 * g2 / n)
    assert tpc.interval[1] - tpc.expected == pytest.approx(half, rel=1e-6) and tpc.inside is True
    assert _metric(report, "target calls per output token").expected == pytest.approx(1.5 / 2.5)
    assert _metric(report, "mean acceptance length").expected == pytest.approx(1 + 1.0 / 1.5)
    assert _metric(report, "draft acceptance rate").expected == pytest.approx(1.0 / 1.5)
    assert _metric(report, "rounds accepting 1 of 1").expected == pytest.approx(1.0 / 1.5)
    assert _metric(report, "acceptance at position 0").expected == pytest.approx(1.0 / 1.5)
    assert report.ok
    # an over-count of accepted rounds by a fifth leaves the intervals
    bad = acceptance_metrics(AcceptanceCounts({0: 300, 1: 1200}, ((1500, 1200),), n, 2500), _Law())
    assert not bad.ok and _metric(bad, "acceptance at position 0").inside is False


def test_too_few_counts_are_shown_without_a_verdict():
    report = acceptance_metrics(AcceptanceCounts({0: 1, 1: 2}, None, 2, 5), _Law())
    assert all(m.inside is None for m in report.metrics) and report.ok


@pytest.mark.parametrize(
    "tokens, accepted, gamma, prefill, bad",
    [
        (5, (2, 1), 2, 0, None),  # 3 + 2 tokens: every round complete
        (4, (2, 1), 2, 0, None),  # the finishing round stopped before its last token (EOS accepted as a draft)
        (3, (2, 1), 2, 0, "claims at least 4"),  # a round over-reported
        (6, (2, 1), 2, 1, None),  # one prefill token before the first round (vLLM)
        (7, (2, 1), 2, 1, "at most 6"),  # under-reported beyond the prefill allowance
        (2, (3,), 2, 0, "outside [0, γ=2]"),
        (1, (), 2, 0, None),
    ],
)
def test_consistency_rule_on_crafted_completions(tokens, accepted, gamma, prefill, bad):
    problem = completion_violation(tokens, accepted, gamma, prefill=prefill)
    assert (problem is None) if bad is None else (bad in problem), problem


def test_aggregate_consistency_rule():
    ok = dict(requests=2, tokens=8, gamma=2)
    # two requests: (2, 1) -> 5 tokens and (1,) -> 2..3 tokens
    assert consistency_violation({2: 1, 1: 2}, ((3, 3), (2, 1)), **ok) is None
    assert "claim at least" in consistency_violation({2: 3, 1: 2}, None, **ok)
    assert "positions[0]" in consistency_violation({2: 1, 1: 2}, ((3, 2), (2, 1)), **ok)
    assert "verified" in consistency_violation({2: 1, 1: 2}, ((3, 3), (0, 1)), **ok)
    assert "first-round" in consistency_violation({2: 1, 1: 2}, None, first_round={2: 2}, **ok)
    assert "outside" in consistency_violation({3: 1}, None, **ok)


def test_counts_from_completions_and_bad_arguments():
    comps = [Completion((1, 2, 3), "eos", accepted=(1, 0)), Completion((1,), "length", accepted=None)]
    counts = counts_from_completions(comps)
    assert counts.rounds == {1: 1, 0: 1} and counts.requests == 1 and counts.tokens == 3
    with pytest.raises(InvalidArgument, match="requests"):
        AcceptanceCounts({}, None, 0, 0)
    with pytest.raises(InvalidArgument, match="AcceptanceLaw"):
        acceptance_metrics(counts, object())


PARAMS = SamplingParams(temperature=1.0, max_tokens=4)
FAMILIES = [(name, "chain") for name in fam.CHAINS] + [("mtp", "block"), ("tree-iid", "tree")]


@pytest.mark.parametrize("name, rule", FAMILIES)
def test_reference_of_every_family_is_inside_its_exact_intervals(name, rule):
    target, draft = fam.target(), fam.draft(name)
    gamma = 3
    law = acceptance_law(target, draft, fam.PROMPT, PARAMS, gamma, rule=rule)
    decoder = (make_block_decoder if rule == "block" else make_decoder)(target, draft)
    n = 20_000
    counts = decoder.sample(Request(fam.PROMPT, PARAMS, gamma, seed=11), n)
    tokens = sum(len(t) * c for (t, _), c in counts.outcomes.items())
    assert (
        consistency_violation(
            counts.rounds,
            counts.positions,
            requests=n,
            tokens=tokens,
            gamma=gamma,
            first_round=counts.accepted,
            prefill=0,
        )
        is None
    )
    report = acceptance_metrics(AcceptanceCounts(counts.rounds, counts.positions, n, tokens), law, alpha=1e-6)
    assert report.ok, [m for m in report.metrics if m.inside is False]
    assert sum(m.inside is True for m in report.metrics) >= 6  # most metrics are judged at this n
    assert report.rounds_pvalue is None or report.rounds_pvalue > 1e-7
    comps = decoder([Request(fam.PROMPT, PARAMS, gamma, seed=i) for i in range(300)])
    assert all(completion_violation(len(c.tokens), c.accepted, gamma, prefill=0) is None for c in comps)
