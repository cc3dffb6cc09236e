"""The coverage table: per sampling parameter its status and the TV ruled out, per path what the rounds took; in the
JSON document (schema-valid), the text report, the HTML page and the plugin's summary."""

import pytest

import specverify as sv
from specverify.report import json_document, render_text
from specverify.report.coverage import PARAMETERS, coverage_summary, coverage_table
from specverify.report.html import render_html
from specverify.report.schema import validate_document


def rows(cert) -> dict:
    return {r["field"]: r for r in coverage_table(cert)["parameters"]}


@pytest.fixture(scope="module")
def top_k_cert():
    """The reference on a parameter scenario, the mixed-kinds call and greedy: a mix of covered parameters."""
    return sv.certify(
        "specverify.zoo:reference",
        level="quick",
        seed=0,
        scenarios=["top-k", "mixed-kinds", "greedy"],
        isolation="none",
    )


def test_every_parameter_has_a_row_and_each_status_says_why(top_k_cert):
    table = rows(top_k_cert)
    assert list(table) == [field for _, field in PARAMETERS]
    assert table["top_k"]["status"] == "passed" and table["top_k"]["tv_ruled_out"] == pytest.approx(0.05, abs=0.01)
    assert table["unseeded"]["status"] == "passed"  # the mixed-kinds member unseeded-law
    assert "mixed-kinds/unseeded-law" in table["unseeded"]["scenarios"]
    assert table["top_p"]["status"] == "not covered" and "not selected in this run: top-p" in table["top_p"]["why"]
    assert table["n"]["status"] == "not covered" and "n > 1" in table["n"]["why"]


def test_the_paths_are_the_gammas_run_and_the_round_kinds_reported(top_k_cert):
    paths = coverage_table(top_k_cert)["paths"]
    assert paths["draft_family"] == "ar" and paths["gammas"] == [1, 2, 3, 4]  # greedy 1-4, top-k 3, gamma-1 1
    assert "first round" in paths["round_kinds"] and "full acceptance + bonus" in paths["round_kinds"]
    assert "accepted 0 of γ (rejected at 0)" in paths["round_kinds"]
    assert "fallback" in paths["not_observable"]


def test_a_refused_parameter_names_the_failing_scenario():
    cert = sv.certify(
        "specverify.zoo:repetition_penalty_bonus_row_stale", level="quick", seed=0, scenarios=["greedy-penalties"],
        isolation="none",
    )  # fmt: skip
    row = rows(cert)["repetition_penalty"]
    assert row["status"] == "refused" and "greedy-penalties" in row["why"]


def test_every_surface_shows_the_table(top_k_cert):
    doc = json_document(top_k_cert)
    assert validate_document(doc) == "specverify-certificate" and doc["coverage"]["parameters"][1]["field"] == "top_k"
    assert "coverage by sampling parameter:" in render_text(top_k_cert)
    assert 'id="coverage"' in render_html(top_k_cert, plots=[])
    summary = coverage_summary(coverage_table(top_k_cert))
    assert summary[0].startswith("  coverage (TV ruled out): passed: ") and "not covered: " in summary[0]
    assert "γ 1, 2, 3, 4" in summary[1]


def test_the_table_is_recomputed_when_a_document_is_read(top_k_cert):
    from specverify.report.json_doc import certificate_from_document

    doc = json_document(top_k_cert)
    again = certificate_from_document(doc)
    assert json_document(again)["coverage"] == doc["coverage"]


def test_a_real_engine_s_stored_certificate_gets_its_table():
    """vLLM's draft_model, patched (docs/findings/vllm.md), as stored: parameters it does not declare are not
    covered with that reason, min_tokens is refused by the scenario that found its bug, the paths are its γ."""
    from specverify.report.json_doc import load_certificate

    cert = load_certificate("docs/findings/vllm-certificates/draft_model-patched.json.xz")
    table = rows(cert)
    assert table["top_k"]["status"] == "not covered" and "does not declare" in table["top_k"]["why"]
    assert table["min_tokens"]["status"] == "refused" and "min-tokens-short-gamma" in table["min_tokens"]["why"]
    assert table["top_p"]["status"] == "passed" and table["top_p"]["tv_ruled_out"] > 0
    assert "reproducible: NO" in table["seed"]["why"]
    paths = coverage_table(cert)["paths"]
    assert paths["gammas"] == [1, 2, 3, 4, 5] and "full acceptance + bonus" in paths["round_kinds"]
