"""The verdict rules (docs/design.md) over typed evidence, and the certificate they produce.

One function decides: :func:`decide` reads the results' fields (kind, covered, ``not_run``, p-values after Holm,
``n`` against ``planned_n``), never their notes. ``certify``, the shard merge, the pytest plugin's ledger (one
decision per decoder) and each of its items (``core`` = the item's own scenario, Holm over the whole matrix's
``num_tests``) all call it, so there is one copy of the rules.
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass, replace
from typing import Optional

from specverify.certification.results.evidence import Certificate
from specverify.enums import NotRun, ScenarioKind, Verdict

__all__ = [
    "Decision",
    "decide",
    "finish_certificate",
    "error_certificate",
    "coverage_phrase",
    "rules_out_phrase",
    "slow_note",
]

SLOW_RATE = 1000.0  # outcomes per second below which the certificate notes a slow decoder


@dataclass(frozen=True)
class Decision:
    """The verdict, its reason, the results after Holm, and the facts the verdict came from (scenario names):
    ``greedy_mismatch``, ``rejected`` (sampling tests, Holm), ``core_missing``, ``budget_cut`` (not run or short
    because of the budget) and ``short`` (covered below their planned N)."""

    verdict: Verdict
    reason: str
    results: tuple
    greedy_mismatch: tuple = ()
    rejected: tuple = ()
    core_missing: tuple = ()
    budget_cut: tuple = ()
    short: tuple = ()


def versions() -> dict:
    import numpy as np
    import scipy
    import torch

    from specverify import __version__

    return {
        "specverify": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
    }


def _tested(r) -> bool:
    return r.kind != ScenarioKind.GREEDY and r.covered and r.violation is None and r.pvalue is not None


def apply_holm(results, alpha: float, num_tests: Optional[int] = None) -> tuple:
    """Tested results pass or fail by Holm at the family ``alpha``; outcomes of exact probability 0 fail outright.
    ``num_tests``: the family's size when only some of its tests are here (the others count as p = 1)."""
    import numpy as np

    from specverify.stats import holm

    idx = [i for i, r in enumerate(results) if _tested(r)]
    out = list(results)
    if idx:
        pvalues = [results[i].pvalue for i in idx]
        pvalues += [1.0] * max(0, (num_tests or 0) - len(pvalues))
        passed = holm(np.array(pvalues), alpha)
        for i, ok in zip(idx, passed):
            out[i] = replace(out[i], passed=bool(ok) and not out[i].impossible)
    return tuple(out)


def decide(results, violation, *, matrix, alpha: float, core=None, num_tests=None, against=None) -> Decision:
    """The verdict rules over ``results`` of ``matrix`` (``core``: the scenarios needed for ``exact``, default the
    matrix's; ``num_tests``: Holm's family size, default the tests present)."""
    results = apply_holm(results, alpha, num_tests)
    if violation is not None:
        return Decision(Verdict.INVALID, violation, results)
    greedy = tuple(r.name for r in results if _greedy_output(r, matrix) and r.passed is False)
    rejected = tuple(r.name for r in results if not _greedy_output(r, matrix) and r.passed is False)
    covered = {r.scenario for r in results if r.covered}
    core = matrix.core if core is None else tuple(core)
    core_missing = tuple(c for c in core if c not in covered)
    budget_cut = tuple(r.name for r in results if r.not_run == NotRun.BUDGET)
    short = tuple(r for r in results if r.covered and r.n < r.planned_n)
    facts = dict(
        results=results, greedy_mismatch=greedy, rejected=rejected, core_missing=core_missing,
        budget_cut=budget_cut + tuple(r.name for r in short), short=tuple(r.name for r in short),
    )  # fmt: skip
    verdict, reason = _rules(results, matrix, core_missing, short, against)
    return Decision(verdict, reason, **facts)


def _greedy_output(r, matrix) -> bool:
    """Whether ``r`` judges greedy outputs: a greedy scenario, or a mixed scenario's member that is one
    (``mixed-kinds``' greedy requests, sent beside sampled ones: their law is the point mass on the target's greedy
    output, so any other output is a greedy mismatch, rule 2, not a sampling rejection)."""
    if r.kind == ScenarioKind.GREEDY:
        return True
    return (
        r.kind == ScenarioKind.MIXED
        and r.member is not None
        and r.member in matrix
        and matrix[r.member].kind == ScenarioKind.GREEDY
    )


def _greedy_mismatch(r) -> str:
    """What a failed greedy result got wrong: its first mismatch, or for a mixed member the outputs it drew that
    are not the target's greedy one (probability 0 under the point mass)."""
    if r.mismatches:
        return f"{r.name}: greedy output differs from the target's: {r.mismatches[0]}"
    if r.impossible:  # (label, count) pairs, the five most frequent
        label, count = r.impossible[0]
        return (
            f"{r.name}: greedy output differs from the target's in calls mixed with sampled requests: "
            f"{sum(c for _, c in r.impossible)} or more of {r.n} greedy requests, e.g. {label} ({count} times)"
        )
    return f"{r.name}: greedy output differs from the target's: {r.note or 'rejected'}"


def _rules(results, matrix, core_missing, short, against) -> tuple:
    by_name = {r.name: r for r in results}
    greedy_fail = [r for r in results if _greedy_output(r, matrix) and r.passed is False]
    if greedy_fail:
        r = greedy_fail[0]
        return Verdict.APPROXIMATE, f"{_greedy_mismatch(r)}. Reproduce: {r.reproduce}"
    sampling_fail = [r for r in results if r.passed is False]
    if sampling_fail:
        r = sampling_fail[0]
        why = r.note or f"law rejected (p = {r.pvalue:.3g})"
        if r.pvalue is not None and not r.impossible and r.note:  # what Holm decided first, then the note (a look's
            why = f"law rejected (p = {r.pvalue:.3g}): {r.note}"  # story: "reached the last look", never a pass)
        if not any(s.kind == ScenarioKind.GREEDY and s.passed for s in results):
            # greedy-only would claim the greedy path is right: unknown here, so no decoder verdict
            return Verdict.INCONCLUSIVE, f"not exact (greedy not checked): {r.name}: {why}. Reproduce: {r.reproduce}"
        return Verdict.GREEDY_ONLY, f"{r.name}: {why}. Reproduce: {r.reproduce}"
    if core_missing:
        cut = [c for c in core_missing if c in by_name and by_name[c].not_run == NotRun.BUDGET]
        if cut:
            return Verdict.INCONCLUSIVE, (
                f"core scenarios not covered: {list(core_missing)} (the budget ran out before {cut}: raise --budget "
                "or --max-samples (sequential looks, the default, stop early; --fixed draws every plan in full))"
            )
        return Verdict.INCONCLUSIVE, (
            f"core scenarios not covered: {list(core_missing)} (declare their capabilities, or run "
            "them: `specverify scenarios` lists them)"
        )
    cut = ""
    if short or any(r.not_run == NotRun.BUDGET for r in results):
        detail = "; ".join(
            f"{r.name}: N = {r.n} of {r.planned_n}, detects TV ≥ {r.detectable_tv:.3f}" for r in short[:4]
        )
        cut = "the budget ran out before every scenario reached its planned N" + (f" ({detail})" if detail else "")
        if matrix.exact_law:
            return Verdict.INCONCLUSIVE, cut
    if not matrix.exact_law:
        agreed = [r.name for r in results if r.covered]
        return Verdict.INCONCLUSIVE, (
            f"no exact law on {matrix.label}s, so never exact: the speculative path agreed with {against} on "
            f"{agreed}; certify the engine on `--models checkpoint` for a verdict against the exact law"
            + (f"; {cut}" if cut else "")
        )
    not_run = [r.name for r in results if not r.covered]
    coverage = f" (not covered: {not_run})" if not_run else ""
    return Verdict.EXACT, (
        f"exact {coverage_phrase(results, matrix)}{rules_out_phrase(results)}: every covered scenario reached its "
        f"planned N and passed{coverage}"
    )


def rules_out_phrase(results) -> str:
    """' — rules out TV ≥ 0.02 per scenario': the largest TV a covered sampling or mixed scenario could have missed
    (its ``detectable_tv``, rounded up to three decimals so the line never claims more), then batch composition's,
    planned at coarser TVs, named apart ('; batch composition: 0.04 in calls of one or two, …'); '' when none."""
    level = _largest_tv(r for r in results if r.kind in (ScenarioKind.SAMPLING, ScenarioKind.MIXED))
    if level is None:
        return ""
    composition = [r for r in results if r.kind == ScenarioKind.COMPOSITION and r.covered and r.detectable_tv]
    parts = [f"{r.member or r.name} {_up(r.detectable_tv)}" for r in composition if math.isfinite(r.detectable_tv)]
    more = f"; batch composition: {', '.join(parts)}" if parts else ""
    return f" — rules out TV ≥ {level} per scenario{more}"


def _up(tv: float) -> str:
    return f"{math.ceil(tv * 1000 - 1e-9) / 1000:g}"


def _largest_tv(results) -> Optional[str]:
    tvs = [r.detectable_tv for r in results if r.covered and r.detectable_tv]
    if not tvs or not all(math.isfinite(tv) for tv in tvs):
        return None
    return _up(max(tvs))


def coverage_phrase(results, matrix) -> str:
    """'on the full matrix' or 'on 4 of 34 scenarios: a, b, c, d' (what the covered scenarios were); a draft
    family's matrix is named by its label."""
    ran = {r.scenario for r in results if r.covered}
    covered = [n for n in matrix if n in ran]
    named = f" {matrix.label}" if matrix.label else ""
    if len(covered) == len(matrix):
        return f"on the full{named} matrix"
    shown = ", ".join(covered[:6]) + (f", … ({len(covered) - 6} more)" if len(covered) > 6 else "")
    return f"on {len(covered)} of {len(matrix)}{named} scenarios" + (f": {shown}" if covered else "")


def _cost_split(timed) -> tuple:
    """``(per_scenario_s, per_outcome_s)``: least squares of each scenario's time on its N, both kept >= 0 (one
    scenario, or scenarios of one N, cannot separate them: all of it is then per outcome)."""
    ns, ts = [r.n for r in timed], [r.elapsed_s for r in timed]
    k, mean_n, mean_t = len(ns), sum(ns) / len(ns), sum(ts) / len(ts)
    spread = sum((n - mean_n) ** 2 for n in ns)
    if k < 2 or spread == 0:
        return 0.0, sum(ts) / sum(ns)
    slope = sum((n - mean_n) * (t - mean_t) for n, t in zip(ns, ts)) / spread
    fixed = mean_t - slope * mean_n
    if slope < 0:
        return mean_t, 0.0
    if fixed < 0:  # through the origin
        return 0.0, sum(n * t for n, t in zip(ns, ts)) / sum(n * n for n in ns)
    return fixed, slope


def slow_note(results) -> str:
    """A note when the decoder drew fewer than ``SLOW_RATE`` outcomes per second over its sampling scenarios, with
    the cause it measured: each scenario's time fitted as a fixed part plus a part per outcome drawn. A cost per
    outcome (a decoder that generates one request at a time: one call per draw without ``batch``) is what the fast
    path ``decoder.sample(request, n)`` removes; a fixed cost per scenario is start-up or per-call overhead."""
    timed = [r for r in results if r.covered and r.kind != ScenarioKind.GREEDY and r.n and r.elapsed_s > 0]
    seconds = sum(r.elapsed_s for r in timed)
    if seconds < 5.0:  # too little time to measure (or to matter)
        return ""
    total = sum(r.n for r in timed)
    rate = total / seconds
    if rate >= SLOW_RATE:
        return ""
    fixed, per_outcome = _cost_split(timed)
    fit = (
        f"measured over {len(timed)} sampling scenario(s): {fixed:.2g} s per scenario + {per_outcome * 1e3:.2g} ms "
        f"per outcome"
    )
    head = f"note: the decoder is slow ({rate:,.0f} outcomes/s < {SLOW_RATE:,.0f}); {fit}"
    fast_path = "decoder.sample(request, n) (docs/adapters.md), which returns the counts of n draws of one request"
    if per_outcome * total >= 0.5 * seconds:
        return (
            f"{head}: the cost is per outcome drawn (one request generated at a time; one call per draw without the "
            f"'batch' capability). The lever is the fast path {fast_path} from one call, so they can be drawn together"
        )
    return (
        f"{head}: the cost is a fixed one per scenario (start-up or per-call overhead), not the draws. Fewer, larger "
        f"calls help: the fast path {fast_path} in one call; an engine built per pytest item pays its start-up per "
        "scenario"
    )


def finish_certificate(
    results, violation, repro, *, config, matrix, elapsed_s: float, timings=None, engine=None
) -> Certificate:
    """Holm over the tested scenarios, the verdict rules, the certificate (certify, the shard merge, the plugin)."""
    from specverify.certification.results.counters import counters_summary
    from specverify.certification.results.metrics import metrics_summary

    decision = decide(results, violation, matrix=matrix, alpha=config.alpha, against=config.against)
    spec = [r.accepted_observed for r in decision.results if r.accepted_observed]
    metrics_ok, metrics_note = metrics_summary(decision.results)
    counters_ok, counters_note = counters_summary(decision.results)
    reason = decision.reason
    note = slow_note(decision.results)
    if note and decision.verdict != Verdict.INVALID:
        reason = f"{reason}\n{note}"
    found = versions()
    return Certificate(
        verdict=decision.verdict,
        reason=reason,
        level=config.level,
        seed=config.seed,
        alpha=config.alpha,
        epsilon=config.level.epsilon,
        elapsed_s=elapsed_s,
        version=found["specverify"],
        factory=config.factory_name,
        scenarios=decision.results,
        reproducible=repro[0],
        reproducibility_note=repro[1],
        speculation_observed=speculation_observed(decision.results, spec),
        versions=found,
        command=config.reproduce(),
        metrics_ok=metrics_ok,
        metrics_note=metrics_note,
        counters_ok=counters_ok,
        counters_note=counters_note,
        timings=timings,
        config=config,
        engine=engine,
    )


def speculation_observed(results, spec: list) -> Optional[bool]:
    """Whether a draft was accepted: from the per-round accepted counts the completions report, else from the
    engine's own counters (``reported_metrics()``: a server reports no rounds but its ``/metrics`` counts accepted
    draft tokens); None when neither was reported."""
    if spec:
        return any(sum(v for m, v in a.items() if m > 0) > 0 for a in spec)
    windows = [r.counters["window"] for r in results if getattr(r, "counters", None) and r.counters.get("window")]
    accepted = [w.get("num_accepted_tokens") for w in windows if w.get("num_accepted_tokens") is not None]
    return sum(accepted) > 0 if accepted else None


def error_certificate(message: str, *, config, elapsed_s: float) -> Certificate:
    """Rule 1's set-up failure: the factory or adapter could not be set up; the verdict says nothing of the decoder."""
    from specverify.certification.matrix.scenarios import Matrix

    cert = finish_certificate([], None, (None, ""), config=config, matrix=Matrix({}), elapsed_s=elapsed_s)
    return replace(cert, verdict=Verdict.ERROR, reason=f"set-up failed: {message}")
