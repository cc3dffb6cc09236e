"""Acceptance evidence: the first round's accepted counts beside their exact law, and the certificate's ``metrics``
check — reported all-round acceptance against its exact expectation (docs/metrics.md).

Per sampling scenario where the decoder reports all-round acceptance, the law-free consistency rule
(``specverify.metrics.acceptance``) and every metric against ``acceptance_law`` for the scenario's draft family: the
tree rule for trees; for a chain family the chain rule, or block verification when the chain rule does not fit and
the block rule does (the certifier cannot ask a decoder which rule it runs; a decoder fitting neither fails); on the
slow path, after the tokens an engine emits before its first round (inferred from the counts: vLLM's prefill
token). The check is evidence beside the verdict, never part of it; ``--require-metrics`` makes it binding.

The evidence is JSON-ready (a scenario's ``metrics``); its ``rows`` are typed: one object per metric with what it
measures (``metric``, one of ``metrics.acceptance.METRIC_KINDS``, and its ``index``), its ``name`` in words and its
figures (:class:`MetricRow`, which also reads the positional rows of certificates written before them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

__all__ = ["acceptance_evidence", "metrics_evidence", "metrics_summary", "MetricRow", "metric_rows"]

MAX_FAILED_SHOWN = 3


_LAWS: dict = {}


def _law(pair_spec, models, prompt, params, gamma, rule, prefill, draft_law):
    """``acceptance_law`` for one request shape (after ``prefill`` plain tokens), cached (a scenario's sequential
    looks and reruns share it)."""
    from specverify.oracles.acceptance_first import acceptance_law_after, draft_for_law

    key = (pair_spec, prompt, params, gamma, rule, prefill, draft_law)
    if key not in _LAWS:
        if len(_LAWS) >= 64:
            _LAWS.pop(next(iter(_LAWS)))
        draft = draft_for_law(models.draft, draft_law, params)
        _LAWS[key] = acceptance_law_after(models.target, draft, prompt, params, gamma, rule=rule, prefill=prefill)
    return _LAWS[key]


def _cut_by_grammar(params, draft_law: str) -> bool:
    """Whether the drafts ignore the request's grammar (``model-temperature``: unprocessed) while it has one. Engines
    then cut the drafts the grammar forbids before verifying (vLLM's ``validate_tokens``), which neither the chain
    nor the block rule models, so the acceptance counts have no exact expectation; the law check is unaffected."""
    return params.grammar is not None and draft_law == "model-temperature"


def acceptance_evidence(scenario, accepted, law, draft_law: str, prefill: int = 0, rule=None) -> dict:
    """The first round's accepted counts beside their exact law — from the prompt, or after the ``prefill`` plain
    tokens an engine emits before its first round (``decoder.prefill_tokens``, else inferred from the counts) —
    for the drafts the decoder makes (``draft_law``) under the verification ``rule`` the metrics check found it runs
    (``"block"``; None or ``"chain"``: the chain rule; a tree family has its own): JSON-ready fields of
    ``ScenarioResult``. Evidence that the rejection paths were exercised, never the verdict."""
    import numpy as np

    from specverify.oracles.acceptance_first import draft_for_law, first_round_acceptance_law
    from specverify.stats import goodness_of_fit

    pair = scenario.models()
    gamma = scenario.num_draft_tokens
    observed = np.array([accepted.get(m, 0) for m in range(gamma + 1)])
    out = dict(accepted_observed={int(m): int(c) for m, c in enumerate(observed)})
    draft = draft_for_law(pair.draft, draft_law, law.params)
    if draft is None or _cut_by_grammar(law.params, draft_law):  # the counts shown, nothing to compare them with
        return out
    if prefill or rule == "block":
        expected = _law(scenario.pair, pair, law.prompt, law.params, gamma, rule, prefill, draft_law).first_round
    else:
        expected = first_round_acceptance_law(pair.target, draft, law.prompt, law.params, gamma)
    support = expected > 0
    pvalue = None
    if observed[~support].sum() == 0 and support.sum() > 1:
        pvalue = float(goodness_of_fit(observed[support], expected[support]).pvalue)
    out.update(accepted_expected=tuple(float(e) for e in expected), accepted_pvalue=pvalue)
    return out


def metrics_evidence(scenario, draws, law, *, alpha: float, draft_law: str = "model") -> dict:
    """The ``metrics`` evidence of one scenario's draws: JSON-ready (rule, ok, violation, rows, p-value).

    ``draft_law`` (``decoder.draft_law``): ``"unmodelled"`` drafts get the law-free consistency rule only (``ok``
    None unless the counts break it)."""
    gamma = scenario.num_draft_tokens
    out = dict(rule=None, ok=False, violation=draws.violation, requests=draws.n, rounds_pvalue=None, rows=[])
    out.update(prefill=draws.prefill, draft_law=draft_law)
    if draws.violation:
        return out
    if draft_law == "unmodelled" or _cut_by_grammar(law.params, draft_law):  # no exact expectation to hold them to
        out.update(ok=None)
        return out
    from specverify.metrics.acceptance import AcceptanceCounts, acceptance_metrics

    pair = scenario.models()
    tokens = sum(len(t) * c for (t, _), c in draws.outcomes.items())
    counts = AcceptanceCounts(dict(draws.rounds), draws.positions, draws.n, tokens)
    family = getattr(pair.draft, "family", "ar")
    rules = ("tree",) if family == "tree" else ("chain", "block")
    for rule in rules:
        exact = _law(scenario.pair, pair, law.prompt, law.params, gamma, rule, draws.prefill, draft_law)
        report = acceptance_metrics(counts, exact, alpha=float(alpha))
        if report.ok or rule == rules[-1]:
            break
        first = report  # shown when no rule fits
    if not report.ok and len(rules) > 1:
        report, rule = first, rules[0]
    judged = [m for m in report.metrics if m.inside is not None]
    out.update(
        rule=rule,
        ok=(None if not judged else report.ok),
        rounds_pvalue=report.rounds_pvalue,
        rows=[MetricRow.of(m).to_dict() for m in report.metrics],
    )
    return out


@dataclass(frozen=True)
class MetricRow:
    """One metric of a scenario's ``metrics`` evidence: ``metric`` (its kind) and ``index`` (the drafts accepted in a
    round, or the draft position; None for the others), ``name`` in words, ``measured`` beside its ``expected``
    value and the interval [``low``, ``high``] a correct decoder's measurement falls in; ``inside`` None where too
    few counts were expected to judge."""

    metric: str
    index: Optional[int]
    name: str
    measured: float
    expected: float
    low: float
    high: float
    inside: Optional[bool]

    @classmethod
    def of(cls, m) -> MetricRow:
        """The row of a ``metrics.acceptance.Metric``."""
        return cls(m.kind, m.index, m.name, m.measured, m.expected, m.interval[0], m.interval[1], m.inside)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, row: object) -> MetricRow:
        """A stored row: an object of this version, or the positional row of a certificate written before typed
        rows (``results.migrate.metric_row_of_list`` reads its kind off its name)."""
        if isinstance(row, dict):
            return cls(**row)
        from specverify.certification.results.migrate import metric_row_of_list

        return cls(**metric_row_of_list(row))


def metric_rows(evidence: Optional[dict]) -> list:
    """The :class:`MetricRow` s of a scenario's ``metrics`` evidence (none without it)."""
    return [MetricRow.from_json(row) for row in (evidence or {}).get("rows") or ()]


def metrics_summary(results) -> tuple:
    """(ok, note) over the scenarios' ``metrics`` evidence: None when no scenario reported all-round acceptance."""
    checked = [r for r in results if getattr(r, "metrics", None)]
    if not checked:
        return None, "not checked: the decoder reports no all-round acceptance (SampleCounts.rounds / accepted)"
    bad = []
    for r in checked:
        ev = r.metrics
        if ev["violation"]:
            bad.append(f"{r.name}: inconsistent accepted counts: {ev['violation']}")
        elif ev["ok"] is False:
            rows = [row for row in metric_rows(ev) if row.inside is False][:MAX_FAILED_SHOWN]
            what = "; ".join(
                f"{r.name} {r.measured:.4g} outside [{r.low:.4g}, {r.high:.4g}] (exact {r.expected:.4g})" for r in rows
            )
            bad.append(f"{r.name} ({ev['rule']} rule): {what}")
    if bad:
        return False, f"{len(bad)} of {len(checked)} scenarios: " + " | ".join(bad[:MAX_FAILED_SHOWN])
    judged = [r for r in checked if r.metrics["ok"] is not None]
    if not judged:
        if all(r.metrics.get("draft_law") == "unmodelled" for r in checked):
            return None, (
                f"not judged: the decoder's drafts are not modelled (decoder.draft_law = 'unmodelled'), so there is "
                f"no exact expectation; its reported acceptance is consistent with the tokens emitted in "
                f"{len(checked)} scenarios"
            )
        return None, f"not judged: too few rounds in {len(checked)} scenarios for the intervals"
    rules = sorted({r.metrics["rule"] for r in judged})
    return True, (
        f"{len(judged)} scenarios: reported acceptance consistent with the tokens emitted and inside its exact "
        f"expectation's interval ({'/'.join(rules)} rule)"
    )
