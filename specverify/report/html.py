"""The certificate as one self-contained HTML page: inline CSS, plots embedded as base64 PNG, no scripts, nothing
fetched. First a banner with the verdict and the run's identity, a summary (scenarios failed, not covered, passed,
counted as the CLI counts them: by scenario, a scenario's member results together) and an index of the failing
scenarios; then per failing scenario its evidence, one plot (the first few) and reproduction; then every scenario in
one table, the passing ones folded (``<details>``: no script), the p-values against the family threshold, and what
was not covered with why."""

from __future__ import annotations

import base64
import html
import pathlib

from specverify.report.coverage import coverage_table
from specverify.report.json_doc import split_outcome
from specverify.report.plots import MAX_FAILURE_PLOTS, bonferroni_threshold, certificate_plots
from specverify.report.text import _fmt, _status, collision_reading, omnibus_pvalue

__all__ = ["render_html", "write_html"]

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:0 24px 40px}
header.banner{padding:20px 24px;color:#fff;margin-bottom:18px}
.v-exact{background:#2e7d32}.v-greedy-only,.v-approximate{background:#b23b2e}.v-invalid{background:#6d1a36}
.v-inconclusive,.v-error{background:#6b6f76}
header h1{margin:0 0 4px;font-size:28px;letter-spacing:.5px}
header .reason{white-space:pre-wrap;margin:0 0 12px;font-size:15px}
header dl{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:3px 14px;margin:0;font-size:14px}
header dt{font-weight:600;opacity:.85}header dd{margin:0}
h2{margin:28px 0 8px;font-size:21px}h3{margin:22px 0 6px;font-size:18px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #d9dde2;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#eef0f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.st-FAIL,.st-INVALID{color:#b23b2e;font-weight:700}.st-pass{color:#2e7d32;font-weight:600}
.st-skipped,.st-not-run{color:#6b6f76;font-style:italic}
td.mono{white-space:nowrap}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:13px}
pre{background:#fff;border:1px solid #d9dde2;padding:8px;white-space:pre-wrap;margin:6px 0}
section.failure{background:#fff;border-left:5px solid #b23b2e;padding:4px 16px 12px;margin:16px 0}
figure{margin:12px 0}figure img{max-width:100%;border:1px solid #d9dde2;background:#fff}
figcaption{font-size:13px;color:#4a5058}
nav.summary{background:#fff;border:1px solid #d9dde2;padding:8px 16px;margin:0 0 12px}
nav.summary ul{margin:4px 0;padding-left:22px}details{margin:8px 0}summary{cursor:pointer;font-weight:600}
footer{margin-top:32px;font-size:12px;color:#6b6f76}
"""


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _img(plot) -> str:
    data = base64.b64encode(plot.png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(plot.caption)}">'
        f"<figcaption>{_e(plot.caption)}</figcaption></figure>"
    )


def _scenario_names(results) -> list:
    """The scenarios of ``results`` in order, each once: a scenario with member results (mixed-batch,
    batch-composition) counts once, as the CLI's verdict line counts it."""
    return list(dict.fromkeys(s.scenario for s in results))


def _draws(cert) -> str:
    counted = [s for s in cert.scenarios if s.covered and s.violation is None]
    draws = sum(s.n for s in counted if str(s.kind) != "greedy")
    prompts = sum(s.n for s in counted if str(s.kind) == "greedy")
    greedy = f" + {prompts} greedy prompts" if prompts else ""
    covered, total = len(_scenario_names(counted)), len(_scenario_names(cert.scenarios))
    return f"{draws} sampled outcomes{greedy} over {covered} of {total} scenarios covered"


def _banner(cert) -> str:
    detect = [s.detectable_tv for s in cert.scenarios if s.covered and s.detectable_tv is not None]
    achieved = f"; the least sensitive scenario detects TV ≥ {max(detect):.4f} at the N reached" if detect else ""
    repro = {True: "yes", False: "NO", None: "not checked"}[cert.reproducible]
    spec = {None: "not reported", True: "yes", False: "no (every accepted count is 0)"}[cert.speculation_observed]
    metrics = {True: "yes", False: "NO", None: "not checked"}[getattr(cert, "metrics_ok", None)]
    counters = {True: "yes", False: "NO", None: "not checked"}[getattr(cert, "counters_ok", None)]
    versions = " · ".join(f"{k} {v}" for k, v in cert.versions.items()) or cert.version
    items = [
        ("Decoder", f"<code>{_e(cert.factory)}</code>"),
        ("Level", f"{_e(cert.level)} (detects TV ≥ {cert.epsilon:g} per scenario{achieved})"),
        ("Seed", _e(cert.seed)),
        ("Family α", f"{cert.alpha:g} (Holm over the sampling-type tests)"),
        ("N", _draws(cert)),
        ("Reproducible", f"{repro} — {_e(cert.reproducibility_note)}"),
        ("Speculation observed", spec),
        ("Acceptance metrics", f"{metrics} — {_e(getattr(cert, 'metrics_note', '') or '')} (docs/metrics.md)"),
        ("Engine counters", f"{counters} — {_e(getattr(cert, 'counters_note', '') or '')} (docs/metrics.md)"),
        ("Elapsed", f"{cert.elapsed_s:.1f} s"),
        ("Versions", _e(versions)),
        ("Command", f"<code>{_e(cert.command)}</code>"),
    ]
    cells = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items)
    verdict = str(cert.verdict)
    return (
        f'<header class="banner v-{_e(verdict)}"><h1>VERDICT: {_e(verdict.upper())}</h1>'
        f'<p class="reason">{_e(cert.reason)}</p><dl>{cells}</dl></header>'
    )


def _why(s, cert=None) -> str:
    if s.violation:
        return f"protocol violation: {s.violation}"
    reading = collision_reading(cert, s) if cert is not None else ""
    return f"{s.note}; {reading}" if reading else s.note


_HEAD = (
    "<tr><th>scenario</th><th>kind</th><th>result</th><th>N / planned</th>"
    '<th title="5 × the smallest p of its five tests, capped at 1: what Holm decides on">p-value</th>'
    '<th title="the pooled Cressie–Read test’s own p: spread over [0, 1] for a correct decoder">omnibus p</th>'
    "<th>TV estimate [95 %]</th><th>TV null 95 %</th><th>detectable TV</th><th>note / why not covered</th></tr>"
)


def _row(s, cert=None) -> str:
    status = _status(s)
    tv = _fmt(s.tv_estimate, ".4f")
    if s.tv_interval is not None:
        tv += f" [{_fmt(s.tv_interval[0], '.4f')}, {_fmt(s.tv_interval[1], '.4f')}]"
    n = f"{s.n} / {s.planned_n}" if s.covered and not s.violation else "-"
    return (
        f'<tr id="s-{_e(s.name)}"><td class="mono">{_e(s.name)}</td><td>{_e(s.kind)}</td>'
        f'<td class="st-{_e(status.replace(" ", "-"))}">{_e(status)}</td><td class="num">{n}</td>'
        f'<td class="num">{_e(_fmt(s.pvalue))}</td><td class="num">{_e(_fmt(omnibus_pvalue(s)))}</td>'
        f'<td class="num">{_e(tv)}</td>'
        f'<td class="num">{_e(_fmt(s.tv_null_quantile, ".4f"))}</td>'
        f'<td class="num">{_e(_fmt(s.detectable_tv, ".4f"))}</td><td>{_e(_why(s, cert))}</td></tr>'
    )


def _passing(s) -> bool:
    return s.covered and not s.violation and s.passed is not False


def _scenario_table(cert) -> str:
    """The rows that need a look (failed, invalid, not covered) open; the passing ones folded below them."""
    shown = [s for s in cert.scenarios if not _passing(s)]
    folded = [s for s in cert.scenarios if _passing(s)]
    out = f"<table>{_HEAD}{''.join(_row(s, cert) for s in shown)}</table>" if shown else ""
    if folded:
        count = len(_scenario_names(folded))
        out += (
            f"<details><summary>{count} passing scenario{'' if count == 1 else 's'} ({len(folded)} results)"
            f"</summary><table>{_HEAD}{''.join(_row(s) for s in folded)}</table></details>"
        )
    return out


def _summary(cert) -> str:
    """Counts by scenario (as the CLI counts), then an index: each failing scenario and the page's sections."""
    names = _scenario_names(cert.scenarios)
    failed = _scenario_names(cert.failures)
    missing = [n for n in _scenario_names([s for s in cert.scenarios if not s.covered]) if n not in failed]
    passed = len(names) - len(failed) - len(missing)
    counts = (
        f"{len(names)} scenarios ({len(cert.scenarios)} results): {len(failed)} failed, {len(missing)} not "
        f"covered, {passed} passed"
    )
    links = "".join(
        f'<li><a href="#f-{_e(s.name)}">✗ <span class="mono">{_e(s.name)}</span></a> — {_e(s.exercises)}</li>'
        for s in cert.failures
    )
    sections = " · ".join(
        f'<a href="#{k}">{v}</a>'
        for k, v in (("scenarios", "all scenarios"), ("pvalues", "p-values"), ("not-covered", "not covered"))
    )
    index = f"<p>Failing scenarios:</p><ul>{links}</ul>" if links else "<p>No scenario failed.</p>"
    return f'<nav class="summary"><h2>Summary</h2><p>{counts}</p>{index}<p>{sections}</p></nav>'


def _outcome_cells(label: str) -> str:
    parts = split_outcome(label)
    tokens = " ".join(str(t) for t in parts.get("tokens", ())) or "-"
    return (
        f'<td class="mono">{_e(repr(parts["text"]) if "tokens" in parts else parts["text"])}</td>'
        f'<td class="mono">{_e(tokens)}</td><td>{_e(parts.get("finish_reason", "-"))}</td>'
    )


def _worst_table(s) -> str:
    head = (
        "<tr><th>outcome text</th><th>tokens</th><th>finish</th><th>observed</th><th>expected</th>"
        "<th>observed / exact prob.</th><th>z</th></tr>"
    )
    rows = [
        f"<tr>{_outcome_cells(label)}<td class='num'>{obs}</td><td class='num'>{exp:.1f}</td>"
        f"<td class='num'>{obs / max(s.n, 1):.4f} / {exp / max(s.n, 1):.4f}</td><td class='num'>{res:+.1f}</td></tr>"
        for label, obs, exp, res in s.worst
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def _failure(s, plots) -> str:
    out = [
        f'<section class="failure" id="f-{_e(s.name)}"><h3>✗ <span class="mono">{_e(s.name)}</span> — '
        f"{_e(s.exercises)}</h3>"
    ]
    if s.violation:
        out.append(f"<p><b>Protocol violation</b> (no evidence gathered):</p><pre>{_e(s.violation)}</pre>")
    if s.impossible:
        rows = "".join(f"<tr>{_outcome_cells(label)}<td class='num'>{count}</td></tr>" for label, count in s.impossible)
        out.append(
            "<p><b>Impossible outcomes</b> (exact probability 0) seen:</p><table><tr><th>outcome text</th>"
            f"<th>tokens</th><th>finish</th><th>seen</th></tr>{rows}</table>"
        )
    if s.mismatches:
        out.append("<p><b>Greedy mismatches</b>:</p><pre>" + _e("\n".join(s.mismatches)) + "</pre>")
    if s.worst and not s.violation:
        out.append("<p><b>Worst outcomes</b> (most over- and under-represented against the exact law):</p>")
        out.append(_worst_table(s))
    if s.tv_estimate is not None:
        lo, hi = s.tv_interval
        out.append(
            f"<p>TV estimate {s.tv_estimate:.4f} [{lo:.4f}, {hi:.4f}]; an exact decoder shows ≤ "
            f"{_fmt(s.tv_null_quantile, '.4f')} at this N (95 %). p = {_e(_fmt(s.pvalue))}.</p>"
        )
    out += [_img(p) for p in plots]
    out.append(f"<p>Reproduce: <code>{_e(s.reproduce)}</code></p></section>")
    return "".join(out)


def _not_covered(cert) -> str:
    rows = [s for s in cert.scenarios if not s.covered or s.violation]
    if not rows:
        return "<p>Every scenario was covered.</p>"
    items = "".join(f'<li><span class="mono">{_e(s.name)}</span>: {_e(_why(s))}</li>' for s in rows)
    return f"<ul>{items}</ul>"


def _coverage(cert) -> str:
    """The coverage table (``report.coverage``): a row per sampling parameter, then the paths the rounds took."""
    table = coverage_table(cert)
    rows = "".join(
        f"<tr><td>{_e(r['parameter'])}</td><td>{_e(r['status'])}</td><td>{_fmt(r['tv_ruled_out'])}</td>"
        f"<td>{_e(r['why'])}</td></tr>"
        for r in table["parameters"]
    )
    paths = table["paths"]
    kinds = "".join(f"<li>{_e(k)}: {_e(', '.join(v))}</li>" for k, v in paths["round_kinds"].items())
    shapes = "; ".join(str(tuple(s)) for s in paths["tree_shapes"])
    return (
        "<table><tr><th>parameter</th><th>status</th><th>TV ruled out</th><th>why</th></tr>" + rows + "</table>"
        f"<p>Draft family {_e(paths['draft_family'])}; γ {_e(', '.join(map(str, paths['gammas'])) or 'none')}"
        f"{'; tree shapes ' + _e(shapes) if shapes else ''}. Round kinds in the decoder's reported rounds:</p>"
        f"<ul>{kinds or '<li>none reported (the decoder does not report accepted)</li>'}</ul>"
        f"<p>Not observable: {_e(paths['not_observable'])}.</p>"
    )


def render_html(cert, *, plots: list | None = None) -> str:
    """The page (a str). ``plots``: the :class:`~specverify.report.plots.Plot` list to embed (default
    :func:`~specverify.report.plots.certificate_plots`, which needs matplotlib: ``ImportError`` naming the
    ``report`` extra without it)."""
    plots = certificate_plots(cert) if plots is None else plots
    by_scenario: dict = {}
    for p in plots:
        by_scenario.setdefault(p.scenario, []).append(p)
    threshold, m = bonferroni_threshold(cert)
    failures = "".join(_failure(s, by_scenario.pop(s.name, [])) for s in cert.failures) or "<p>No scenario failed.</p>"
    general = by_scenario.pop(None, [])
    other = [p for rest in by_scenario.values() for p in rest]
    drawn = "" if len(cert.failures) <= MAX_FAILURE_PLOTS else (
        f"<p>Plots are drawn for the first {MAX_FAILURE_PLOTS} failing scenarios; the others have their tables "
        "(<code>specverify report CERT.json --plots DIR</code> draws every one).</p>"
    )  # fmt: skip
    body = [
        _banner(cert),
        "<main>",
        _summary(cert),
        '<h2 id="failures">Failures</h2>',
        drawn,
        failures,
        '<h2 id="scenarios">Scenarios</h2>',
        _scenario_table(cert),
        '<h2 id="pvalues">p-values against the family threshold</h2>',
        f"<p>Scenarios pass or fail by Holm's step-down at family α = {cert.alpha:g}. The dashed line is the "
        f"Bonferroni threshold α/m = {threshold:.3g} (m = {m} sampling-type test{'' if m == 1 else 's'}), "
        "Holm's first and strictest step: a p-value beyond it is rejected under Holm as well.</p>",
        *(_img(p) for p in general),
        *(["<h2>Acceptance evidence</h2>"] + [_img(p) for p in other] if other else []),
        '<h2 id="not-covered">Not covered</h2>',
        _not_covered(cert),
        '<h2 id="coverage">Coverage by sampling parameter and path</h2>',
        _coverage(cert),
        f"<footer>specverify {_e(cert.version)} · self-contained page: no scripts, styles or images are fetched."
        "</footer></main>",
    ]
    title = f"specverify: {cert.factory} is {cert.verdict}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_html(cert, path, *, plots: list | None = None) -> pathlib.Path:
    """Write :func:`render_html` to ``path`` (UTF-8); the path written."""
    out = pathlib.Path(path)
    out.write_text(render_html(cert, plots=plots), encoding="utf-8")
    return out
