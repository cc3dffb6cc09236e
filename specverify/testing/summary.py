"""What the plugin reports: the header line, the terminal summary (a table and a verdict per decoder), and the
JUnit properties of items and fixture calls. Lines are returned; the plugin writes them.

>>> from specverify.testing.options import Options
>>> line = header_line(Options(run=(("seed", 7),)))
>>> line.startswith("specverify: level=quick seed=7"), line.endswith("quick --specverify-sequential)")
(True, True)
"""

from __future__ import annotations

from specverify.report.text import omnibus_pvalue
from specverify.testing.messages import fmt_p

__all__ = [
    "header_line",
    "summary_lines",
    "decoder_lines",
    "decision_lines",
    "item_properties",
    "call_properties",
    "pytest_command",
]


def header_line(options) -> str:
    """The report header: seed and level always, with the option that reproduces them."""
    extra = (
        f" baseline={options.baseline}" + (" (updating)" if options.update_baseline else "") if options.baseline else ""
    )
    return (
        f"specverify: level={options.level} seed={options.seed} alpha={options.alpha:g} models={options.models} "
        f"isolation={options.isolation}{extra} (reproduce: {options.reproduce_flags()})"
    )


PVALUE_LEGEND = (
    "p-value: what Holm decides on, 5 × the smallest p of the scenario's five tests, capped at 1 (so 1.00 on most "
    "rows of a correct decoder); omnibus: the pooled Cressie–Read test's own p, spread over [0, 1] for a correct "
    "decoder"
)
_OWN_FLAGS = ("--specverify-seed", "--specverify-level", "--specverify-alpha", "--specverify-models",
              "--specverify-fixed", "--specverify-sequential")  # fmt: skip


def pytest_command(nodeid: str, options, spec=None) -> str:
    """``pytest 'NODEID' --specverify-seed=S --specverify-level=L``, the look rule (``--specverify-sequential`` or
    ``--specverify-fixed``; the marker's own values where it sets them), the session's other run options
    (``--specverify-timeout``, ``--specverify-require-*``, …) and its ``--specverify-scenario`` flags, without which
    the marked test would expand into another set of items."""
    session = options.reproduce_flags().split(" ")
    flags = session
    if spec is not None:
        flags = [f"--specverify-seed={spec.seed}", f"--specverify-level={spec.level}"]
        flags += [f"--specverify-alpha={spec.alpha:g}"] if spec.alpha != 1e-6 else []
        flags += [f"--specverify-models={spec.models}"] if spec.models != "toy" else []
        flags += ["--specverify-sequential" if spec.sequential else "--specverify-fixed"]
        flags += [f for f in session if f.split("=")[0] not in _OWN_FLAGS]
    flags += [f"--specverify-scenario={name}" for name in options.scenario]
    return f"pytest '{nodeid}' {' '.join(flags)}"


def _num(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _status(s, regressed=()) -> str:
    if s.scenario in regressed and s.covered and not s.violation:
        return "regressed"
    if s.violation:
        return "INVALID"
    if not s.covered:
        return "not run" if s.not_run is not None and s.not_run.counts_as_run else "not covered"
    return {True: "pass", False: "FAIL", None: "-"}[s.passed]


def _table(cert, regressed=()) -> list:
    head = (
        f"  {'scenario':34s} {'kind':11s} {'result':11s} {'N':>7s} {'p-value':>8s} {'omnibus':>8s} {'TV est':>7s} "
        f"{'TV null':>7s}"
    )
    rows = [head]
    for s in cert.scenarios:
        status = _status(s, regressed)
        rows.append(
            f"  {s.name:34s} {str(s.kind):11s} {status:11s} {s.n if s.covered else '':>7} {fmt_p(s.pvalue):>8s} "
            f"{fmt_p(omnibus_pvalue(s)):>8s} {_num(s.tv_estimate, '.4f'):>7s} {_num(s.tv_null_quantile, '.4f'):>7s}"
        )
        if not s.covered and s.note:
            rows.append(f"  {'':34s} {s.note}")
    return rows


def _configuration(group) -> str:
    name = group.config.get("engine_config")
    return f" · engine config {name}" if name else ""


def _header(cert, group, d) -> str:
    return (
        f"{cert.factory}{_configuration(group)} — {group.nodeid} · level {cert.level} · seed {cert.seed} · "
        f"family α {cert.alpha:g} (per-test α/m = {d.alpha_test:.2g}, m = {d.num_tests})"
    )


def _call_line(d) -> str:
    """A ``specverify_certify`` call of a decoder that has a marked test: its scenarios' results, no verdict (the
    call's test asserts on its certificate)."""
    rows = [f"{s.name} {_status(s)}" for s in d.certificate.scenarios]
    shown = ", ".join(rows[:6]) + (f", … ({len(rows) - 6} more)" if len(rows) > 6 else "")
    return f"  specverify_certify in {d.group.nodeid} (its test asserts on it): {shown or 'no scenario'}"


def decision_lines(d, options, *, calls: tuple = ()) -> list:
    """The block of one marked test's decision (or of one fixture call), with ``calls``: the decoder's fixture calls
    (their scenarios, no verdict of their own) and their notes, each note once."""
    cert, group = d.certificate, d.group
    lines = [_header(cert, group, d)]
    lines += _table(cert, {r.scenario for r in group.records if r.status == "regressed"})
    if d.not_run:
        lines.append(f"  not run in this session (deselected or interrupted): {', '.join(d.not_run)}")
    if d.holm_only:
        lines.append(f"  rejected by Holm over the session although each item passed its per-test α: {d.holm_only}")
    reason = cert.reason.splitlines()[0] if cert.reason else ""
    if group.kind == "marker":
        lines.append(f"  VERDICT: {str(cert.verdict).upper()} — {reason}")
    else:
        lines.append(f"  certificate: {str(cert.verdict).upper()} — {reason} (its test asserts on it)")
    if d.meets is not None:
        lines.append(f"  {'meets' if d.meets else 'FAILS'}: {d.why}")
    if cert.scenarios:
        from specverify.report.coverage import coverage_summary, coverage_table

        lines += coverage_summary(coverage_table(cert))
    lines += [_call_line(c) for c in calls]
    lines += [f"  {n}" for n in dict.fromkeys(d.notes + tuple(n for c in calls for n in c.notes))]
    if group.kind == "marker":
        lines.append(f"  reproduce: {pytest_command(group.nodeid, options, _Spec(group))}")
        lines.append(f"             {cert.command}")
    else:
        lines.append(f"  reproduce: {cert.command}")
    return lines


class _Spec:
    def __init__(self, group):
        self.seed, self.level, self.alpha, self.models = group.seed, group.level, group.alpha, group.models
        self.sequential = group.sequential


def decoder_lines(view, options) -> list:
    """One decoder's block (``decoders.DecoderView``): each marked test's decision, the fixture's calls listed in
    the first; a decoder only the fixture certified shows each call's table and certificate instead."""
    if view.marked:
        blocks = [decision_lines(view.marked[0], options, calls=view.calls)]
        blocks += [decision_lines(d, options) for d in view.marked[1:]]
    else:
        blocks = [decision_lines(d, options) for d in view.calls]
    return [line for i, block in enumerate(blocks) for line in ([""] if i else []) + block]


def summary_lines(decisions: list, options) -> list:
    """The terminal summary: a block per decoder (its table, its verdict, its fixture calls, the reproduce
    commands), then one closing line."""
    from specverify.testing.decoders import by_decoder

    lines = []
    for view in by_decoder(decisions):
        lines += decoder_lines(view, options) + [""]
    if any(s.tests for d in decisions for s in d.certificate.scenarios):
        lines += [PVALUE_LEGEND, ""]
    judged = [d for d in decisions if d.meets is not None]
    failing = [d for d in judged if not d.meets]
    if judged:
        lines.append(
            f"specverify: {len(judged) - len(failing)} of {len(judged)} decoder certification(s) meet their "
            f"requirement"
            + (
                f"; failing: {', '.join(d.certificate.factory + _configuration(d.group) for d in failing)}"
                if failing
                else ""
            )
        )
    return lines


def _pvalues(results) -> str:
    return "; ".join(f"{r.name}={fmt_p(r.pvalue)}" for r in results if r.pvalue is not None)


def item_properties(record, *, alpha_test: float, spec) -> list:
    """JUnit properties of one marker item: its scenario's result, N, p-values, TV, seed and reproduce command."""
    results = record.results
    tv = [r.tv_estimate for r in results if r.tv_estimate is not None]
    null = [r.tv_null_quantile for r in results if r.tv_null_quantile is not None]
    return [
        ("specverify_factory", spec.factory_name),
        ("specverify_scenario", record.scenario),
        ("specverify_verdict", record.status),
        ("specverify_n", sum(r.n for r in results)),
        ("specverify_pvalue", _pvalues(results) or "-"),
        ("specverify_alpha_test", f"{alpha_test:.3g}"),
        ("specverify_tv_estimate", f"{max(tv):.4f}" if tv else "-"),
        ("specverify_tv_null", f"{max(null):.4f}" if null else "-"),
        ("specverify_seed", spec.seed),
        ("specverify_level", spec.level),
        ("specverify_reproduce", next((r.reproduce for r in results if r.reproduce), record.command)),
    ]


def call_properties(cert) -> list:
    """JUnit properties of one ``specverify_certify`` call: verdict, total N, p-values, the largest TV."""
    tv = [s.tv_estimate for s in cert.scenarios if s.tv_estimate is not None]
    return [
        ("specverify_factory", cert.factory),
        ("specverify_verdict", str(cert.verdict)),
        ("specverify_n", sum(s.n for s in cert.scenarios)),
        ("specverify_pvalues", _pvalues(cert.scenarios) or "-"),
        ("specverify_tv_max", f"{max(tv):.4f}" if tv else "-"),
        ("specverify_seed", cert.seed),
        ("specverify_level", str(cert.level)),
        ("specverify_reproduce", cert.command),
    ]
