"""The certificate as a plain-text table (library code never prints; the CLI writes what this returns)."""

from __future__ import annotations

import math

__all__ = ["render_text"]


def _fmt(x, spec=".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return format(x, spec)


def _status(s) -> str:
    if s.violation:
        return "INVALID"
    if not s.covered:
        return "not run" if "not run" in s.note else "skipped"
    return {True: "pass", False: "FAIL", None: "-"}[s.passed]


def render_text(cert) -> str:
    """A table of scenarios with their evidence, the verdict, and how to reproduce each failure."""
    lines = [
        f"specverify {cert.version} · {cert.factory} · level {cert.level} (detects TV ≥ {cert.epsilon}) · "
        f"seed {cert.seed} · family α {cert.alpha:g}",
        "",
    ]
    head = (
        f"{'scenario':34s} {'kind':9s} {'result':8s} {'N':>8s} {'p-value':>9s} {'TV est':>7s} {'TV null':>7s} "
        f"{'detect':>7s}"
    )
    lines += [head, "-" * len(head)]
    for s in cert.scenarios:
        lines.append(
            f"{s.name:34s} {s.kind:9s} {_status(s):8s} {s.n if s.covered else '':>8} {_fmt(s.pvalue):>9s} "
            f"{_fmt(s.tv_estimate, '.4f'):>7s} {_fmt(s.tv_null_quantile, '.4f'):>7s} "
            f"{_fmt(s.detectable_tv, '.4f'):>7s}"
        )
        if s.note:
            lines.append(f"{'':36s}{s.note}")
    lines += [""] + _failures(cert) + _extras(cert)
    lines += ["", f"VERDICT: {cert.verdict.upper()} — {cert.reason}", f"elapsed {cert.elapsed_s:.1f} s"]
    return "\n".join(lines) + "\n"


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


def _extras(cert) -> list:
    out = [
        f"reproducibility (same seed → same output, alone and batched): "
        f"{ {True: 'yes', False: 'NO', None: 'not checked'}[cert.reproducible] } — {cert.reproducibility_note}"
    ]
    if cert.speculation_observed is None:
        out.append("speculation not observed: the decoder does not report accepted drafts")
    else:
        rows = [s for s in cert.scenarios if s.accepted_observed]
        first = rows[0] if rows else None
        if first is not None:
            hist = ", ".join(f"{m}:{c}" for m, c in first.accepted_observed.items())
            exp = ", ".join(f"{e:.2f}" for e in first.accepted_expected)
            out.append(
                f"first-round accepted drafts ({first.name}): observed {{{hist}}}, exact law [{exp}], "
                f"p = {_fmt(first.accepted_pvalue)} (evidence only: a draft may use another law)"
            )
    return out
