"""Acceptance evidence: the first round's accepted counts beside their exact law, and the certificate's ``metrics``
check — reported all-round acceptance against its exact expectation (docs/metrics.md).

Per sampling scenario where the decoder reports all-round acceptance, the law-free consistency rule
(``specverify.metrics.acceptance``) and every metric against ``acceptance_law`` for the scenario's draft family: the
tree rule for trees; for a chain family the chain rule, or block verification when the chain rule does not fit and
the block rule does (the certifier cannot ask a decoder which rule it runs; a decoder fitting neither fails); on the
slow path, after the tokens an engine emits before its first round (inferred from the counts: vLLM's prefill
token). The check is evidence beside the verdict, never part of it; ``--require-metrics`` makes it binding.
"""

from __future__ import annotations

__all__ = ["acceptance_evidence", "metrics_evidence", "metrics_summary"]

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
        rows=[[m.name, m.measured, m.expected, m.interval[0], m.interval[1], m.inside] for m in report.metrics],
    )
    return out


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
            rows = [row for row in ev["rows"] if row[5] is False][:MAX_FAILED_SHOWN]
            what = "; ".join(f"{n} {m:.4g} outside [{lo:.4g}, {hi:.4g}] (exact {e:.4g})" for n, m, e, lo, hi, _ in rows)
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
