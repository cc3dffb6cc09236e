"""The HTML page of a failing run: summary and index first, passing scenarios folded, a bounded number of plots
(a failing full-matrix run was 3.5 MB with 73 PNGs), and scenarios counted as the CLI counts them."""

import dataclasses
import re

import pytest

from specverify.report import certificate_plots, render_html
from specverify.report.plots import MAX_FAILURE_PLOTS, all_plots

pytest.importorskip("matplotlib", reason="the HTML report needs the report extra: pip install -e '.[report]'")

IMG = re.compile(r'<img\b[^>]*\bsrc="data:image/png;base64,')


@pytest.fixture(scope="module")
def many_failures(zoo_cert):
    """The zoo certificate with 24 failing scenarios (copies of its failing one) and a scenario of two members:
    30 results of 27 scenarios."""
    failing, greedy = zoo_cert.scenarios[0], zoo_cert.scenarios[1]
    copies = [dataclasses.replace(failing, scenario=f"broken-{i:02d}") for i in range(24)]
    members = [dataclasses.replace(greedy, scenario="mixed-batch", member=m) for m in ("a", "b", "c", "d")]
    return dataclasses.replace(zoo_cert, scenarios=(*copies, greedy, failing, *members))


@pytest.fixture(scope="module")
def many_page(many_failures):
    return render_html(many_failures, plots=certificate_plots(many_failures))


def test_a_page_of_many_failures_embeds_a_bounded_number_of_plots(many_failures, many_page):
    assert len(many_failures.failures) == 25
    assert len(IMG.findall(many_page)) == 1 + MAX_FAILURE_PLOTS  # the p-values, then the first failures' one each
    assert len(many_page) < 1_000_000, len(many_page)  # 25 failures drew 76 PNGs before
    assert f"Plots are drawn for the first {MAX_FAILURE_PLOTS} failing scenarios" in many_page
    for s in many_failures.failures:  # every failure keeps its section, table and reproduce line
        assert f'id="f-{s.name}"' in many_page and f'href="#f-{s.name}"' in many_page


def test_the_summary_and_index_come_first_and_passing_scenarios_are_folded(many_page):
    summary, first_failure = many_page.index('<nav class="summary">'), many_page.index('id="f-broken-00"')
    table, first_image = many_page.index('<h2 id="scenarios">'), IMG.search(many_page).start()
    assert summary < first_failure < table and summary < first_image
    details = many_page.index("<details>")
    assert many_page.index('id="s-broken-00"') < details < many_page.index('id="s-greedy"')  # passing: folded
    assert "<summary>2 passing scenarios (5 results)</summary>" in many_page


def test_scenarios_are_counted_as_the_cli_counts_them(many_page):
    # 30 results of 27 scenarios: the four members of mixed-batch are one scenario, as in the verdict line
    assert "27 scenarios (30 results): 25 failed, 0 not covered, 2 passed" in many_page
    assert "over 27 of 27 scenarios covered" in many_page and "of 30 scenarios" not in many_page


def test_plots_dir_still_draws_every_plot_of_every_failure(zoo_cert):
    names = [p.name for p in all_plots(zoo_cert)]
    assert names[0] == "pvalues.png"
    assert {"temperature-1.outcomes.png", "temperature-1.residuals.png", "temperature-1.accepted.png"} <= set(names)
