"""Render a Certificate as text, JSON, a self-contained HTML page or PNG plots; validate what specverify writes.

Library code never prints: the CLI writes what these return. Text and JSON need nothing beyond the package; the
HTML page and the plots need matplotlib (the ``report`` extra), imported only when a plot is drawn.
``validate_document`` checks a certificate or a shard's counts file against its JSON Schema (``schema/``).
"""

from __future__ import annotations

from specverify.report.html import render_html, write_html
from specverify.report.json_doc import certificate_from_document, json_document, load_certificate, render_json
from specverify.report.plots import MATPLOTLIB_HINT, Plot, certificate_plots, missing_report_extra, write_plots
from specverify.report.schema import DOCUMENT_KINDS, SCHEMA_VERSION, load_schema, validate_document
from specverify.report.text import render_text

__all__ = [
    "DOCUMENT_KINDS",
    "MATPLOTLIB_HINT",
    "Plot",
    "SCHEMA_VERSION",
    "certificate_from_document",
    "certificate_plots",
    "json_document",
    "load_certificate",
    "load_schema",
    "missing_report_extra",
    "render_html",
    "render_json",
    "render_text",
    "validate_document",
    "write_html",
    "write_plots",
]
