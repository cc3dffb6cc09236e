"""The HTML page and the plots: self-contained, every scenario named, the failing scenario's worst outcome and
its plots embedded; matplotlib stays optional for text and JSON; the CLI writes and re-renders reports."""

import base64
import html
import json
import re
import sys

import pytest

import specverify.report as report
import specverify.report.plots as plots_module
from specverify.cli import ExitCode, main
from specverify.report import render_html, render_json, render_text, write_plots

pytest.importorskip("matplotlib", reason="the HTML report needs the report extra: pip install -e '.[report]'")

IMG = re.compile(r'<img\b[^>]*\bsrc="data:image/png;base64,([^"]+)"')


@pytest.fixture(scope="module")
def odd_page(odd_cert, odd_plots):
    return render_html(odd_cert, plots=odd_plots)


def test_the_failing_page_shows_the_worst_outcome_and_embedded_plots(zoo_cert, zoo_plots):
    page = render_html(zoo_cert, plots=zoo_plots)
    worst_text = zoo_cert.scenarios[0].worst[0][0].split(" ")[0]  # "'aaaa'"
    assert "VERDICT: GREEDY-ONLY" in page and html.escape(worst_text) in page
    images = [base64.b64decode(data, validate=True) for data in IMG.findall(page)]
    assert len(images) >= 2 and all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in images)
    for key in ("seed", "α", "detects TV", "Versions", "numpy", zoo_cert.factory, "Reproduce:", "Acceptance metrics"):
        assert key in page, key
    assert not re.search(r"<script|<link|\b(?:src|href)=\"(?!data:|#)|url\(", page)


def test_every_scenario_is_named_and_what_was_not_covered_says_why(odd_cert, odd_page):
    for s in odd_cert.scenarios:
        assert f'id="s-{s.name}"' in odd_page, s.name
    assert "not run: budget exhausted" in odd_page
    assert "protocol violation: tokens after the finishing token" in odd_page
    assert "Impossible outcomes" in odd_page and "&#x27;b&#x27;" in odd_page


def test_plots_cover_pvalues_outcomes_residuals_and_acceptance(odd_plots, tmp_path, zoo_cert, zoo_plots, monkeypatch):
    from specverify.report.plots import all_plots

    names = [p.name for p in odd_plots]
    assert names[0] == "pvalues.png" and "temperature-1.outcomes.png" in names  # the page: one plot per failure
    every = [p.name for p in all_plots(zoo_cert)]  # --plots DIR: all of them
    for part in ("outcomes", "residuals", "accepted"):
        assert f"temperature-1.{part}.png" in every
    assert "max-tokens-not-multiple.outcomes.png" not in names  # a violation has no evidence to draw
    assert "Bonferroni" in odd_plots[0].caption and "Holm" in odd_plots[0].caption
    monkeypatch.setattr(plots_module, "certificate_plots", lambda cert: zoo_plots)  # drawn once per session
    paths = write_plots(zoo_cert, tmp_path / "plots")
    assert {p.name for p in paths} >= {"pvalues.png", "temperature-1.outcomes.png"}
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)


def test_text_and_json_work_without_matplotlib(zoo_cert, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert "VERDICT: GREEDY-ONLY" in render_text(zoo_cert)
    assert json.loads(render_json(zoo_cert))["kind"] == "specverify-certificate"
    with pytest.raises(ImportError, match=r"specverify-toolkit\[report\]"):
        render_html(zoo_cert)


def test_cli_report_re_renders_a_saved_certificate(zoo_cert, zoo_plots, shard_path, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(report, "certificate_plots", lambda cert: zoo_plots)  # drawn once per session
    monkeypatch.setattr(plots_module, "certificate_plots", lambda cert: zoo_plots)
    saved = tmp_path / "cert.json"
    saved.write_text(render_json(zoo_cert))
    page, plots = tmp_path / "out.html", tmp_path / "plots"
    assert main(["report", str(saved), "--html", str(page), "--plots", str(plots)]) == ExitCode.MEETS
    assert "VERDICT: GREEDY-ONLY" in capsys.readouterr().out
    assert len(IMG.findall(page.read_text())) >= 2 and (plots / "pvalues.png").exists()
    assert main(["report", str(shard_path), "--html", str(page)]) == ExitCode.USAGE
    assert "specverify merge" in capsys.readouterr().err
    saved.write_text("{")
    assert main(["report", str(saved)]) == ExitCode.USAGE
    assert "is not JSON" in capsys.readouterr().err


def test_cli_certify_writes_the_report_and_the_plots(tmp_path, capsys):
    page, plots = tmp_path / "r.html", tmp_path / "p"
    args = ["certify", "specverify.reference:make_decoder", "--level", "quick", "--scenario", "temperature-1"]
    code = main([*args, "--isolation", "none", "--report", str(page), "--plots", str(plots)])
    assert code == ExitCode.FALLS_SHORT, capsys.readouterr().err  # inconclusive: the core is not covered
    assert "temperature-1" in page.read_text() and {p.name for p in plots.iterdir()} == {
        "pvalues.png",
        "temperature-1.accepted.png",
    }
