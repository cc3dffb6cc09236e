"""The certificate as a plain-text table (library code never prints; the CLI writes what this returns)."""

from __future__ import annotations

import math

from specverify.enums import NotRun
from specverify.errors import InvalidArgument
from specverify.report.coverage import coverage_lines, coverage_table

__all__ = ["render_text", "format_pvalue", "omnibus_pvalue", "speculation_phrase", "contradictions"]

OMNIBUS = "cressie-read"  # the battery's omnibus test, pooled Cressie–Read (specverify.stats.BATTERY_TESTS[0])

LEGEND = (
    "legend:",
    "  result   pass / FAIL (Holm at the family α) / INVALID (protocol violation) / skipped (capability not declared)",
    "  N        outcomes drawn",
    "  p-value  what Holm decides on: 5 × the smallest p of the scenario's five tests (under sequential looks,",
    "           5 × the design's any-time p), capped at 1, so a correct decoder reads 1.00 on most rows; a scenario",
    "           fails only below its Holm level at the family α (about α / tests), never at 0.05",
    "  omnibus  the pooled Cressie–Read test's own p at this N, before that combination: about uniform over",
    "           [0, 1] for a correct decoder: the p-value column's 1.00s are its cap, not a perfect fit",
    "  TV est   total variation between the observed frequencies and the exact law (plug-in estimate)",
    "  TV null  the TV an exact decoder shows at this N (95 % quantile): TV est above it is suspicious",
    "  detect   the smallest TV this N detects with the planned power (the level's ε when the plan was met;",
    "           batch composition's members are planned at their own TV: docs/design.md)",
)


def _fmt(x, spec=".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return format(x, spec)


def format_pvalue(p) -> str:
    """'1.00', '0.35', '0.0038', '2.1e-09', '<1e-300' (never a bare '1' or '0')."""
    if p is None:
        return "-"
    if p <= 1e-300:
        return "<1e-300"
    if p >= 0.01:
        return f"{p:.2f}"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


def omnibus_pvalue(s) -> float | None:
    """The omnibus test's own p-value of a scenario result (None for rows without the battery: greedy, collision,
    not covered). Beside the row's ``pvalue`` (the battery's combined value, capped at 1) it shows the spread a
    correct decoder gives."""
    if not hasattr(s, "tests"):
        raise InvalidArgument(f"s={s!r:.80}: expected a ScenarioResult (an entry of a certificate's scenarios).")
    return dict(s.tests).get(OMNIBUS) if s.tests else None


def _status(s) -> str:
    if s.violation:
        return "INVALID"
    if not s.covered:
        return "not run" if s.not_run is not None and s.not_run.counts_as_run else "skipped"
    return {True: "pass", False: "FAIL", None: "-"}[s.passed]


LAW_OFF = "the law of these requests is itself off the exact law"  # the collision check's note (checks/collision)


def collision_reading(cert, s) -> str:
    """What the certificate's other rows say of a collision row whose own law was off (:data:`LAW_OFF`): a wrong
    law when a sampling scenario failed, one RNG stream per call when they all passed; '' otherwise."""
    if str(s.kind) != "collision" or LAW_OFF not in (s.note or ""):
        return ""
    laws = [r for r in cert.scenarios if str(r.kind) == "sampling" and r.covered and not r.violation]
    if not laws or any(r.passed is None for r in laws):
        return ""
    failed = [r.name for r in laws if r.passed is False]
    if failed:
        return f"the sampling scenarios fail too ({', '.join(failed[:3])}): the law is wrong"
    return "every sampling scenario passes: the requests of a call share one RNG stream"


def _rows(cert) -> list:
    lines, broke = [], [s for s in cert.scenarios if s.not_run == NotRun.BROKE]
    for s in cert.scenarios:
        if s in broke:
            continue
        lines.append(
            f"{s.name:34s} {s.kind:9s} {_status(s):8s} {s.n if s.covered else '':>8} {format_pvalue(s.pvalue):>9s} "
            f"{format_pvalue(omnibus_pvalue(s)):>8s} {_fmt(s.tv_estimate, '.4f'):>7s} "
            f"{_fmt(s.tv_null_quantile, '.4f'):>7s} {_fmt(s.detectable_tv, '.4f'):>7s}"
        )
        if s.note:
            lines.append(f"{'':36s}{s.note}")
        reading = collision_reading(cert, s)
        if reading:
            lines.append(f"{'':36s}{reading}")
    if broke:
        lines.append(f"… the other {len(broke)} scenarios were not run: the decoder already broke the protocol")
    return lines


def render_text(cert, *, legend: bool = True) -> str:
    """A table of scenarios with their evidence, the verdict, how to reproduce each failure, and a legend."""
    lines = [
        f"specverify {cert.version} · {cert.factory} · level {cert.level} (detects TV ≥ {cert.epsilon}) · "
        f"seed {cert.seed} · family α {cert.alpha:g}",
        "",
    ]
    head = (
        f"{'scenario':34s} {'kind':9s} {'result':8s} {'N':>8s} {'p-value':>9s} {'omnibus':>8s} {'TV est':>7s} "
        f"{'TV null':>7s} {'detect':>7s}"
    )
    lines += [head, "-" * len(head)] + _rows(cert)
    lines += [""] + _failures(cert) + _extras(cert)
    if cert.scenarios:
        lines += [""] + coverage_lines(coverage_table(cert))
    reason, *notes = cert.reason.split("\nnote: ")
    verdict = f"VERDICT: {cert.verdict.upper()} — {reason}"
    spec = speculation_phrase(cert)
    if spec and str(cert.verdict) not in ("invalid", "error"):
        verdict += f" — {spec}"
    lines += ["", verdict, *(f"note: {n}" for n in notes), *_requirements_lines(cert)]
    lines.append(f"elapsed {cert.elapsed_s:.1f} s")
    if legend and cert.scenarios:
        lines += [""] + list(LEGEND)
    return "\n".join(lines) + "\n"


def contradictions(cert) -> list:
    """Where ``cert``'s verdict contradicts its own rows (a certificate edited by hand, or written by a bug): a
    protocol violation under any verdict but invalid / error, a failing sampling row under exact, a failing greedy row
    under exact or greedy-only. One line each; ``specverify report`` refuses to render such a certificate."""
    verdict = str(cert.verdict)
    if verdict in ("invalid", "error", "inconclusive"):
        return []
    out = []
    for s in cert.scenarios:
        if s.violation:
            out.append(f"{s.name} holds a protocol violation ({s.violation.splitlines()[0]}) under {verdict.upper()}")
        elif s.passed is False and (verdict == "exact" or (str(s.kind) == "greedy" and verdict == "greedy-only")):
            out.append(f"{s.name} ({s.kind}) FAILED under {verdict.upper()}")
    return out


def _requirements_lines(cert) -> list:
    """What the run required (``--require``, ``--require-reproducible``, ``--require-metrics``,
    ``--require-speculation``), whether each held, and so the exit code's reason: one line, read from the same
    record as the JSON's ``requirements``. None without a run configuration (a certificate built by hand) or for
    verdict ``error`` (exit 4: nothing was said of the decoder)."""
    if getattr(cert, "config", None) is None or str(cert.verdict) == "error":
        return []
    record = cert.requirements()
    parts = [f"verdict {record['require']} or better: {'met' if record['verdict_meets'] else 'NOT met'}"]
    for name in ("reproducible", "metrics", "speculation"):
        if record[name]["required"]:
            held = {True: "held", False: "NOT held", None: "NOT checked"}[record[name]["ok"]]
            parts.append(f"{name} required: {held}")
    counters = record.get("counters")  # required with metrics; no hook is no failure
    if counters and counters["required"] and counters["ok"] is not None:
        parts.append(f"counter identities: {'held' if counters['ok'] else 'NOT held'}")
    outcome = "all met (exit 0)" if record["met"] else "not met (exit 1)"
    return [f"requirements: {'; '.join(parts)} — {outcome}"]


def speculation_phrase(cert) -> str:
    """What the run says about speculation: observed, not observed, or not measured (greedy scenarios only)."""
    ran = [s for s in cert.scenarios if s.covered and not s.violation]
    if not ran:
        return ""
    if cert.speculation_observed:
        return "speculation observed"
    if all(str(s.kind) == "greedy" for s in ran):
        return "speculation not measured: only greedy scenarios ran"
    return "speculation not observed: the decoder never reported an accepted draft"


def _failures(cert) -> list:
    out = []
    for s in cert.failures:
        out.append(f"✗ {s.name} ({s.exercises})")
        if s.violation:
            out.append(f"    protocol violation: {s.violation}")
        for text, count in s.impossible:
            out.append(f"    impossible outcome (exact probability 0) seen {count}×: {text}")
        for m in s.mismatches:
            out.append(f"    {m}")
        if s.worst and not s.violation:
            out.append("    worst outcomes (observed vs expected, standardized residual):")
            for text, obs, exp, res in s.worst[:3]:
                out.append(f"      {text:40s} {obs:>8d} vs {exp:>10.1f}  z={res:+.1f}")
        if s.tv_estimate is not None:
            lo, hi = s.tv_interval
            out.append(
                f"    TV estimate {s.tv_estimate:.4f} [{lo:.4f}, {hi:.4f}]; an exact decoder shows ≤ "
                f"{s.tv_null_quantile:.4f} at this N (95 %)"
            )
        out.append(f"    Reproduce: {s.reproduce}")
    return out


def _reproducibility_line(cert) -> str:
    status = {True: "yes", False: "NO", None: "not checked"}[cert.reproducible]
    note = cert.reproducibility_note or ""
    if cert.reproducible is None:  # the status already says it: no "not checked — not checked: ..."
        note = note.removeprefix("not checked: ").removeprefix("not checked")
    note = f" — {note}" if note else ""
    return f"reproducibility (same seed → same output, alone and batched): {status}{note}"


def _metrics_lines(cert) -> list:
    """The named check ``metrics`` (docs/metrics.md) and, for the first scenario it judged, its headline metrics."""
    status = {True: "yes", False: "NO", None: "not checked"}[getattr(cert, "metrics_ok", None)]
    note = (getattr(cert, "metrics_note", "") or "").removeprefix("not checked: ")
    line = f"metrics (reported acceptance against its exact expectation, evidence only): {status} — {note}"
    out = [line.rstrip(" —")]
    judged = [s for s in cert.scenarios if s.metrics and s.metrics.get("rows")]
    if judged:
        from specverify.certification.results.metrics import metric_rows

        s = judged[0]
        for r in metric_rows(s.metrics)[:3]:
            mark = {True: "inside", False: "OUTSIDE", None: "not judged"}[r.inside]
            out.append(
                f"    {s.name}: {r.name} {r.measured:.4f}, exact {r.expected:.4f} [{r.low:.4f}, {r.high:.4f}] {mark}"
            )
    return out


def _counters_line(cert) -> list:
    """The named check ``counters`` (the engine's own counters' identities), when the decoder has the hook."""
    ok = getattr(cert, "counters_ok", None)
    note = getattr(cert, "counters_note", "") or ""
    if ok is None and not any(getattr(s, "counters", None) for s in cert.scenarios):
        return []  # no reported_metrics() hook: nothing to say
    status = {True: "yes", False: "NO", None: "not checked"}[ok]
    return [f"counters (the engine's own acceptance counters, law-free identities, evidence only): {status} — {note}"]


def _extras(cert) -> list:
    out = [_reproducibility_line(cert), *_metrics_lines(cert), *_counters_line(cert)]
    rows = [s for s in cert.scenarios if s.accepted_observed]
    first = rows[0] if rows else None
    if first is None:
        spec = speculation_phrase(cert)
        if spec:
            out.append(spec)
        return out
    hist = ", ".join(f"{m}:{c}" for m, c in first.accepted_observed.items())
    if first.accepted_expected is None:  # decoder.draft_law = "unmodelled"
        out.append(
            f"first-round accepted drafts ({first.name}): observed {{{hist}}}; no exact law to compare with (the "
            "decoder's drafts are not modelled: decoder.draft_law = 'unmodelled')"
        )
        return out
    exp = ", ".join(f"{e:.2f}" for e in first.accepted_expected)
    p = first.accepted_pvalue
    judged = "" if p is None else (" ≥ α: consistent with the exact law" if p >= cert.alpha else " < α: differs")
    rule = (first.metrics or {}).get("rule") or "chain"
    out.append(
        f"first-round accepted drafts ({first.name}): observed {{{hist}}}, exact law [{exp}] ({rule} rule), "
        f"p = {format_pvalue(p)}{judged} (tested at the family α = {cert.alpha:g}; evidence only, not part of the "
        "verdict: a draft may use another law)"
    )
    return out
