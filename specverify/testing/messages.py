"""Failure messages of the assertion helpers and marker items: complete, readable, never a ``Certificate`` repr.

Each failing scenario shows what it exercises, N against its plan, the p-value against the level it is judged at,
the TV estimate beside what an exact decoder shows at that N, the worst outcomes as text, outcomes of exact
probability 0, greedy mismatches or the protocol violation, the known bug when the decoder is a zoo entry, and the
commands that reproduce it.

>>> fmt_p(3.2e-9), fmt_p(0.41), fmt_p(None)
('3.2e-09', '0.41', '-')
"""

from __future__ import annotations

import math

__all__ = ["explain", "scenario_lines", "known_bug", "fmt_p"]


def fmt_p(p) -> str:
    """A p-value as text: two digits, '<1e-300' where it underflows, '-' when there is none."""
    if p is None:
        return "-"
    if p <= 1e-300:
        return "<1e-300"
    return f"{p:.2f}" if p >= 0.01 else f"{p:.2g}"


def _tv_line(s) -> str | None:
    if s.tv_estimate is None:
        return None
    interval = f" [{s.tv_interval[0]:.4f}, {s.tv_interval[1]:.4f}]" if s.tv_interval else ""
    null = (
        "" if s.tv_null_quantile is None else f"; an exact decoder shows <= {s.tv_null_quantile:.4f} at this N (95 %)"
    )
    return f"TV estimate {s.tv_estimate:.4f}{interval}{null}"


def _pvalue_text(s, alpha_test) -> str:
    if s.pvalue is None:
        return ""
    from specverify.report.text import omnibus_pvalue

    omnibus = omnibus_pvalue(s)
    own = "" if omnibus is None else f"; the omnibus test's own p {fmt_p(omnibus)}"
    if alpha_test is None:
        return f"; p-value {fmt_p(s.pvalue)} (Holm at the family α decides){own}"
    side = "<" if s.pvalue < alpha_test else ">="
    return f"; p-value {fmt_p(s.pvalue)} {side} {alpha_test:.2g} (its planned per-test α){own}"


def _evidence_lines(s, alpha_test) -> list:
    lines = [f"protocol violation: {s.violation}"] if s.violation else []
    if s.n or s.planned_n:
        lines.append(f"N = {s.n} of {s.planned_n} planned{_pvalue_text(s, alpha_test)}")
    tv = _tv_line(s)
    if tv:
        lines.append(tv)
    for text, count in s.impossible[:3]:
        lines.append(f"impossible outcome (exact probability 0) seen {count}x: {text}")
    lines += [str(m) for m in s.mismatches[:3]]
    if s.worst and not s.violation:
        lines.append("worst outcomes (observed vs expected under the exact law, standardized residual):")
        for text, observed, expected, residual in s.worst[:3]:
            z = "inf" if math.isinf(residual) else f"{residual:+.1f}"
            lines.append(f"  {text:36s} {observed:>8d} vs {expected:>10.1f}  z={z}")
    return lines


def scenario_lines(s, *, alpha_test: float | None = None, why: str = "") -> list:
    """The lines that explain one scenario result ``s`` (a ``ScenarioResult``), indented under its name."""
    head = f"✗ {s.name} ({s.exercises})" + (f": {why}" if why else "")
    body = _evidence_lines(s, alpha_test)
    if s.note and s.note not in why:
        body.append(f"note: {s.note}")
    return [head] + [f"    {line}" for line in body]


def known_bug(factory: str) -> str:
    """'known bug: NAME — summary [mechanism, bugs, zoo verdict]' when ``factory`` names a zoo entry
    (``specverify.zoo:NAME``), else ''."""
    if not isinstance(factory, str) or not factory.startswith("specverify.zoo:"):
        return ""
    from specverify.zoo import ZOO

    entry = ZOO.get(factory.split(":", 1)[1])
    if entry is None:
        return ""
    bugs = [b for b in entry.bugs if b not in entry.summary]
    where = f"; {', '.join(bugs)}" if bugs else ""
    return (
        f"known bug: {entry.name} — {entry.summary} [mechanism {entry.mechanism}{where}; zoo verdict {entry.verdict}]"
    )


def _failing(cert, alpha_test) -> list:
    out = []
    for s in cert.scenarios:
        rejected = s.passed is False or (alpha_test is not None and s.pvalue is not None and s.pvalue < alpha_test)
        if rejected or s.violation:
            out.append(s)
    return out


def explain(
    cert, *, require: str = "exact", alpha_test: float | None = None, reproduce: tuple = (), headline: str = ""
) -> str:
    """Why ``cert`` (a ``Certificate``) does not meet ``require``: the verdict, every failing scenario with its
    evidence, what was not covered, the known bug (zoo entries) and the commands in ``reproduce`` (default: the
    certificate's own command). Plain text, one item per line."""
    verdict = str(cert.verdict)
    lines = [
        headline
        or f"specverify: {cert.factory} is {verdict.upper()}, required {require} (level {cert.level}, seed "
        f"{cert.seed}, family α {cert.alpha:g})",
        f"reason: {cert.reason.splitlines()[0] if cert.reason else '-'}",
    ]
    for s in _failing(cert, alpha_test):
        lines += scenario_lines(s, alpha_test=alpha_test)
    missing = [s for s in cert.scenarios if not s.covered and not s.violation]
    if missing:
        lines.append(f"not covered ({len(missing)}): " + "; ".join(f"{s.name}: {s.note}" for s in missing[:4]))
    bug = known_bug(cert.factory)
    if bug:
        lines.append(bug)
    commands = list(reproduce) or [cert.command]
    lines.append("Reproduce: " + commands[0])
    lines += [f"           {c}" for c in commands[1:]]
    return "\n".join(lines)
