"""PNG plots of a certificate's evidence (matplotlib, the ``report`` extra, imported only when a plot is drawn).

- ``pvalues``: every scenario's p-value as -log10 p against the Bonferroni line α/m (m = the sampling-type tests
  of the certificate, which Holm's step-down uses as its first and strictest threshold: a p-value beyond the
  line is rejected by Holm too). Scenarios without a p-value are named with the reason.
- per failing scenario: ``outcomes`` (observed frequency with a 95 % Wilson interval beside the exact
  probability of each of its worst outcomes), ``residuals`` (standardized residuals) and ``accepted``
  (first-round accepted drafts against their exact law), each when the scenario holds that evidence.

The HTML page embeds :func:`certificate_plots` (the p-value plot and one plot for each of the first few failing
scenarios); ``--plots DIR`` writes :func:`all_plots`.
"""

from __future__ import annotations

import importlib.util
import io
import math
import pathlib
import re
from dataclasses import dataclass

__all__ = [
    "MATPLOTLIB_HINT",
    "MAX_FAILURE_PLOTS",
    "missing_report_extra",
    "Plot",
    "all_plots",
    "bonferroni_threshold",
    "certificate_plots",
    "require_matplotlib",
    "scenario_plots",
    "wilson",
    "write_plots",
]

MATPLOTLIB_HINT = (
    "the HTML report and plots need matplotlib: pip install 'specverify-toolkit[report]' (the `report` extra)"
)
_SAMPLING_KINDS = ("sampling", "collision", "mixed", "composition")
_FAIL, _PASS, _GREY, _EXACT = "#c0392b", "#2e7d32", "#8a8a8a", "#9bb7d4"
_CAP = 50.0  # -log10 p drawn at most this far (p = 0 reads "p = 0")
_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 1.0}


@dataclass(frozen=True)
class Plot:
    """One PNG: ``name`` (its file name), the ``scenario`` it shows (None for the whole certificate), a
    ``caption`` that says what is drawn, and the ``png`` bytes."""

    name: str
    scenario: str | None
    caption: str
    png: bytes


def missing_report_extra() -> str | None:
    """:data:`MATPLOTLIB_HINT` when matplotlib cannot be found, else None. It looks for the package without importing
    it (milliseconds), so the CLI and the pytest plugin refuse ``--report``, ``--plots`` and ``--specverify-html``
    at start-up instead of after the run."""
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a broken or half-removed installation
        found = False
    return None if found else MATPLOTLIB_HINT


def require_matplotlib() -> type:
    """matplotlib's ``Figure`` (no pyplot, no global backend); ``ImportError`` naming the extra without it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(MATPLOTLIB_HINT) from exc
    return Figure


def _figure(width: float, height: float):
    return require_matplotlib()(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _short(label: str, limit: int = 44) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (95 % for z = 1.96)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def bonferroni_threshold(cert) -> tuple[float, int]:
    """``(α / m, m)``: m counts the certificate's sampling-type scenarios with a p-value (Holm's first step)."""
    m = sum(1 for s in cert.scenarios if _tested(s))
    return (cert.alpha / m if m else cert.alpha), m


def _tested(s) -> bool:
    return str(s.kind) in _SAMPLING_KINDS and s.covered and s.violation is None and s.pvalue is not None


def _colour(s) -> str:
    return {True: _PASS, False: _FAIL}.get(s.passed, _GREY)


def _why_no_pvalue(s) -> str:
    if s.violation:
        return "protocol violation: no evidence"
    if not s.covered:
        return s.note or "not covered"
    if str(s.kind) == "greedy":
        return f"greedy: exact match ({'pass' if s.passed else 'FAIL'}), no p-value"
    return "no p-value"


def pvalue_plot(cert) -> Plot | None:
    """-log10 p of every scenario against the Bonferroni line α/m; None for a certificate without scenarios."""
    rows = list(cert.scenarios)
    if not rows:
        return None
    threshold, m = bonferroni_threshold(cert)
    line = -math.log10(threshold)
    fig = _figure(9.0, 1.4 + 0.32 * len(rows))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    for y, s in zip(ys, rows):
        if _tested(s):
            x = _CAP if s.pvalue <= 0 else min(_CAP, -math.log10(s.pvalue))
            ax.barh(y, x, color=_colour(s), height=0.6)
            tag = f"p = 0 (drawn at {_CAP:g})" if s.pvalue <= 0 else f"p = {s.pvalue:.2g}"
            ax.text(x, y, f" {tag}", va="center", fontsize=8)
        else:
            note = _short(_why_no_pvalue(s), 70)
            ax.text(0.05, y, note, va="center", fontsize=8, color="#555555", style="italic", zorder=3, bbox=_BOX)
    ax.axvline(line, color="black", linestyle="--", linewidth=1)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(ys, [_short(s.name, 36) for s in rows], fontsize=8)
    ax.set_xlim(0, max(line * 1.3, min(_CAP, max(_pvalue_x(s) for s in rows)) * 1.3, 1.0))
    ax.set_xlabel("-log10 p   (beyond the dashed line: rejected)")
    ax.set_title(f"p-values vs the Bonferroni line α/m = {cert.alpha:g}/{m} = {threshold:.2g} (Holm's first step)")
    caption = (
        f"Every scenario's p-value as -log10 p; the dashed line is the Bonferroni threshold α/m = {threshold:.3g} "
        f"(family α = {cert.alpha:g}, m = {m} sampling-type test{'' if m == 1 else 's'}), the first and strictest "
        "threshold of Holm's step-down."
    )
    return Plot("pvalues.png", None, caption, _png(fig))


def _pvalue_x(s) -> float:
    if not _tested(s):
        return 0.0
    return _CAP if s.pvalue <= 0 else -math.log10(s.pvalue)


def outcome_plot(s) -> Plot | None:
    """Observed frequency (95 % Wilson interval) vs exact probability of the scenario's worst outcomes."""
    if not s.worst or s.n <= 0:
        return None
    rows = list(s.worst)
    fig = _figure(9.0, 1.3 + 0.45 * len(rows))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    exact = [exp / s.n for _, _, exp, _ in rows]
    observed = [obs / s.n for _, obs, _, _ in rows]
    bounds = [wilson(obs, s.n) for _, obs, _, _ in rows]
    ax.barh(ys, exact, height=0.6, color=_EXACT, label="exact probability")
    # clipped at 0: at 0 or n observations the Wilson bound equals the estimate up to rounding (-1e-18 is refused)
    err = [
        [max(0.0, o - lo) for o, (lo, _) in zip(observed, bounds)],
        [max(0.0, hi - o) for o, (_, hi) in zip(observed, bounds)],
    ]
    ax.errorbar(observed, ys, xerr=err, fmt="o", color=_FAIL, capsize=4, label="observed (95 % Wilson interval)")
    ax.set_yticks(ys, [_short(label) for label, *_ in rows], fontsize=8, family="monospace")
    right = min(1.0, max(max(exact), max(hi for _, hi in bounds)))
    for y, o, e, (_, hi) in zip(ys, observed, exact, bounds):
        ax.text(max(hi, e) + right * 0.02, y, f"{o:.3g} vs {e:.3g}", va="center", fontsize=8, bbox=_BOX)
    ax.set_xlim(-right * 0.02, right * 1.25 + 0.01)
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= 1 + 1e-9])  # no tick past probability 1
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel(f"probability   (N = {s.n} draws; labels: observed vs exact)")
    ax.set_title(f"{s.name}: observed vs exact probability of the worst outcomes")
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    caption = f"{s.name}: observed frequency (dot, 95 % Wilson interval) against the exact probability (bar)."
    return Plot(f"{_slug(s.name)}.outcomes.png", s.name, caption, _png(fig))


def residual_plot(s) -> Plot | None:
    """Standardized residuals (observed - expected) / sqrt(expected) of the worst outcomes."""
    if not s.worst:
        return None
    rows = list(s.worst)
    fig = _figure(9.0, 1.3 + 0.45 * len(rows))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    raw = [res for *_, res in rows]
    finite = [abs(z) for z in raw if math.isfinite(z)]
    span = max([4.0] + [z * 1.2 for z in finite])
    zs = [z if math.isfinite(z) else math.copysign(span / 1.2, z) for z in raw]  # ±inf drawn at the edge
    ax.barh(ys, zs, height=0.6, color=[_FAIL if z > 0 else "#2c6fbb" for z in zs])
    for y, z, r in zip(ys, zs, raw):
        ax.text(z, y, f" {r:+.1f} ", va="center", ha="left" if z >= 0 else "right", fontsize=8)
    for edge in (-3, 3):
        ax.axvline(edge, color=_GREY, linestyle=":", linewidth=1)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlim(-span, span)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(ys, [_short(label) for label, *_ in rows], fontsize=8, family="monospace")
    ax.set_xlabel("standardized residual z = (observed - expected) / sqrt(expected)   (dotted: |z| = 3)")
    ax.set_title(f"{s.name}: standardized residuals of the worst outcomes")
    caption = f"{s.name}: standardized residual per outcome (red: seen too often, blue: too rarely)."
    return Plot(f"{_slug(s.name)}.residuals.png", s.name, caption, _png(fig))


def accepted_plot(s) -> Plot | None:
    """First-round accepted drafts: observed share (95 % Wilson interval) vs the exact law."""
    if not s.accepted_observed or not s.accepted_expected:
        return None
    total = sum(s.accepted_observed.values())
    ks = list(range(max(len(s.accepted_expected), max(s.accepted_observed) + 1)))
    expected = [s.accepted_expected[k] if k < len(s.accepted_expected) else 0.0 for k in ks]
    counts = [s.accepted_observed.get(k, 0) for k in ks]
    observed = [c / total for c in counts]
    bounds = [wilson(c, total) for c in counts]
    fig = _figure(9.0, 3.6)
    ax = fig.add_subplot()
    width = 0.38
    ax.bar([k - width / 2 for k in ks], expected, width, color=_EXACT, label="exact law")
    # clipped at 0: at 0 or n observations the Wilson bound equals the estimate up to rounding (-1e-18 is refused)
    err = [
        [max(0.0, o - lo) for o, (lo, _) in zip(observed, bounds)],
        [max(0.0, hi - o) for o, (_, hi) in zip(observed, bounds)],
    ]
    ax.bar([k + width / 2 for k in ks], observed, width, color=_colour(s), yerr=err, capsize=4, label="observed")
    ax.set_xticks(ks)
    ax.set_xlabel("drafts accepted in the first round")
    ax.set_ylabel(f"share of {total} first rounds")
    pvalue = "-" if s.accepted_pvalue is None else f"{s.accepted_pvalue:.2g}"
    ax.set_title(f"{s.name}: accepted length vs its exact law (p = {pvalue}; evidence only)")
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    caption = (
        f"{s.name}: first-round accepted drafts, observed (95 % Wilson interval) against the exact law of the "
        "reference draft (evidence only: a decoder may draft from another law)."
    )
    return Plot(f"{_slug(s.name)}.accepted.png", s.name, caption, _png(fig))


def scenario_plots(s) -> list:
    """The plots of one scenario's evidence (outcomes, residuals, accepted length), each when it has the data."""
    return [p for p in (outcome_plot(s), residual_plot(s), accepted_plot(s)) if p is not None]


MAX_FAILURE_PLOTS = 6  # failing scenarios drawn on the page; the rest have their tables (--plots DIR draws all)


def _headline_plot(s) -> Plot | None:
    """A failing scenario's one plot on the page: its worst outcomes against the exact law (else its accepted
    length); the residuals are the worst-outcome table's z column, so the page does not draw them again."""
    return outcome_plot(s) or accepted_plot(s)


def certificate_plots(cert) -> list:
    """The plots the HTML page embeds: the p-value plot, then one plot per failing scenario for the first
    :data:`MAX_FAILURE_PLOTS` of them; a certificate without failures shows the acceptance evidence of its first
    scenario that has some. (A failing run of the whole matrix drew 73 PNGs, 3.5 MB.) Raises ``ImportError`` naming
    the extra without matplotlib."""
    require_matplotlib()  # fail early, with the hint, before any work
    plots = [p for p in (pvalue_plot(cert),) if p is not None]
    drawn = 0
    for s in cert.failures:
        plot = _headline_plot(s) if drawn < MAX_FAILURE_PLOTS else None
        if plot is not None:
            plots.append(plot)
            drawn += 1
    if not cert.failures:
        first = next((s for s in cert.scenarios if s.accepted_observed and s.accepted_expected), None)
        if first is not None:
            plots.append(accepted_plot(first))
    return plots


def all_plots(cert) -> list:
    """Every plot: the p-value plot and each failing scenario's :func:`scenario_plots` (what ``--plots DIR``
    writes), or the page's acceptance plot when nothing failed."""
    require_matplotlib()
    plots = [p for p in (pvalue_plot(cert),) if p is not None]
    for s in cert.failures:
        plots += scenario_plots(s)
    if not cert.failures:
        plots += certificate_plots(cert)[1:]
    return plots


def write_plots(cert, directory) -> list:
    """Write :func:`all_plots` as PNG files into ``directory`` (created if missing); their paths."""
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for plot in all_plots(cert):
        path = out / plot.name
        path.write_bytes(plot.png)
        paths.append(path)
    return paths
