"""The verdict rules (docs/design.md) and the certificate they produce: shared by ``certify`` and the shard merge."""

from __future__ import annotations

import platform
from dataclasses import replace

from specverify.certification.evidence import Certificate
from specverify.certification.scenarios import CORE, matrix
from specverify.enums import ScenarioKind, Verdict

__all__ = ["finish_certificate", "error_certificate", "coverage_phrase", "SAMPLING_KINDS"]

SAMPLING_KINDS = (ScenarioKind.SAMPLING, ScenarioKind.MIXED, ScenarioKind.COLLISION, ScenarioKind.COMPOSITION)
SLOW_RATE = 1000.0  # outcomes per second below which the certificate notes a slow decoder


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


def finish_certificate(
    results, violation, repro, *, level, seed, alpha, factory, command, elapsed_s, drafts="ar"
) -> Certificate:
    """Holm over the sampling scenarios, the verdict rules, the certificate (shared by certify and the merge)."""
    results = _apply_holm(results, alpha)
    verdict, reason = _verdict(results, violation, drafts)
    spec = [r.accepted_observed for r in results if r.accepted_observed]
    from specverify.certification.metrics_check import metrics_summary

    metrics_ok, metrics_note = metrics_summary(results)
    found = versions()
    return Certificate(
        verdict=verdict,
        reason=reason,
        level=level,
        seed=seed,
        alpha=alpha,
        epsilon=level.epsilon,
        elapsed_s=elapsed_s,
        version=found["specverify"],
        factory=factory,
        scenarios=tuple(results),
        reproducible=repro[0],
        reproducibility_note=repro[1],
        speculation_observed=(any(sum(v for m, v in a.items() if m > 0) > 0 for a in spec) if spec else None),
        versions=found,
        command=command,
        metrics_ok=metrics_ok,
        metrics_note=metrics_note,
    )


def error_certificate(message, *, level, seed, alpha, factory, command, elapsed_s) -> Certificate:
    """Rule 1's set-up failure: the factory or adapter could not be built; the verdict says nothing of the decoder."""
    cert = finish_certificate(
        [], None, (None, ""), level=level, seed=seed, alpha=alpha, factory=factory, command=command, elapsed_s=elapsed_s
    )
    return replace(cert, verdict=Verdict.ERROR, reason=f"set-up failed: {message}")


def slow_note(results) -> str:
    """A note when the decoder drew fewer than ``SLOW_RATE`` outcomes per second over its sampling scenarios."""
    timed = [r for r in results if r.covered and r.kind in SAMPLING_KINDS and r.n and r.elapsed_s > 0]
    seconds = sum(r.elapsed_s for r in timed)
    if seconds < 5.0:  # too little time to measure (or to matter)
        return ""
    rate = sum(r.n for r in timed) / seconds
    if rate >= SLOW_RATE:
        return ""
    return (
        f"note: the decoder is slow ({rate:,.0f} outcomes/s < {SLOW_RATE:,.0f}); check thread oversubscription "
        "(--threads) and batching"
    )


def _apply_holm(results, alpha) -> list:
    """Sampling-type scenarios pass or fail by Holm at the family α; impossible outcomes fail outright."""
    import numpy as np

    from specverify.stats import holm

    idx = [
        i
        for i, r in enumerate(results)
        if r.kind in SAMPLING_KINDS and r.covered and r.violation is None and r.pvalue is not None
    ]
    if not idx:
        return results
    passed = holm(np.array([results[i].pvalue for i in idx]), alpha)
    out = list(results)
    for i, ok in zip(idx, passed):
        out[i] = replace(out[i], passed=bool(ok) and not out[i].impossible)
    return out


def _family_of(results, drafts="ar") -> dict:
    if drafts != "ar":
        return matrix("toy", drafts)
    names = {r.name.split("/")[0] for r in results}
    toy = matrix("toy")
    return toy if names <= set(toy) else matrix("checkpoint")


def coverage_phrase(results, drafts: str = "ar") -> str:
    """'on the full matrix' or 'on 4 of 34 scenarios: a, b, c, d' (what the covered scenarios were); a draft
    family's matrix is named (``drafts``)."""
    family = _family_of(results, drafts)
    covered = [n for n in family if n in {r.name.split("/")[0] for r in results if r.covered}]
    named = f" {drafts} draft" if drafts != "ar" else ""
    if len(covered) == len(family):
        return f"on the full{named} matrix"
    shown = ", ".join(covered[:6]) + (f", … ({len(covered) - 6} more)" if len(covered) > 6 else "")
    return f"on {len(covered)} of {len(family)}{named} scenarios" + (f": {shown}" if covered else "")


def _verdict(results, violation, drafts="ar") -> tuple:
    if violation is not None:
        return Verdict.INVALID, violation
    greedy_fail = [r for r in results if r.kind == ScenarioKind.GREEDY and r.passed is False]
    if greedy_fail:
        r = greedy_fail[0]
        return Verdict.APPROXIMATE, (
            f"{r.name}: greedy output differs from the target's: {r.mismatches[0]}. Reproduce: {r.reproduce}"
        )
    sampling_fail = [r for r in results if r.passed is False]
    if sampling_fail:
        r = sampling_fail[0]
        why = r.note or f"law rejected (p = {r.pvalue:.3g})"
        if not any(s.kind == ScenarioKind.GREEDY and s.passed for s in results):
            # greedy-only would claim the greedy path is right: unknown here, so no decoder verdict
            return Verdict.INCONCLUSIVE, f"not exact (greedy not checked): {r.name}: {why}. Reproduce: {r.reproduce}"
        return Verdict.GREEDY_ONLY, f"{r.name}: {why}. Reproduce: {r.reproduce}"
    return _pass_verdict(results, drafts)


def _pass_verdict(results, drafts="ar") -> tuple:
    not_run = [r.name for r in results if not r.covered]
    core_missing = [c for c in CORE if c not in {r.name for r in results if r.covered}]
    if core_missing:
        budget = [r.name for r in results if r.name in core_missing and "budget" in (r.note or "")]
        if budget:
            return Verdict.INCONCLUSIVE, (
                f"core scenarios not covered: {core_missing} (the budget ran out before {budget}: raise --budget "
                "or --max-samples, or add --sequential)"
            )
        return Verdict.INCONCLUSIVE, (
            f"core scenarios not covered: {core_missing} (declare their capabilities, or run "
            "them: `specverify scenarios` lists them)"
        )
    short = [r for r in results if r.covered and r.kind in SAMPLING_KINDS and r.n < r.planned_n]
    if short or any("budget" in r.note for r in results if not r.covered):
        detail = "; ".join(
            f"{r.name}: N = {r.n} of {r.planned_n}, detects TV ≥ {r.detectable_tv:.3f}" for r in short[:4]
        )
        return Verdict.INCONCLUSIVE, (
            "the budget ran out before every scenario reached its planned N" + (f" ({detail})" if detail else "")
        )
    coverage = f" (not covered: {not_run})" if not_run else ""
    return Verdict.EXACT, (
        f"exact {coverage_phrase(results, drafts)}: every covered scenario reached its planned N and passed{coverage}"
    )
