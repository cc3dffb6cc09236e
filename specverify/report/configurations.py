"""A set of engine configurations' certificates (``--engine-config NAME ...``) as text and as one JSON document
(``"kind": "specverify-configurations"``, schema version 2: one certificate document per configuration)."""

from __future__ import annotations

import json

from specverify.report.json_doc import _clean, json_document
from specverify.report.schema import SCHEMA_VERSION
from specverify.report.text import render_text

__all__ = ["configurations_document", "render_configurations_json", "render_configurations_text"]


def _outcomes(cert) -> int:
    return sum(s.n or 0 for s in cert.scenarios)


def configurations_document(cs) -> dict:
    """The set as a JSON-ready dict: the factory, the default configuration's name, the worst verdict, ``met`` (the
    exit code's answer) and per configuration its options, its evidence rule, whether its state was reached and
    its certificate document (null when it did not run)."""
    entries = []
    for r in cs.results:
        entries.append(
            dict(
                name=r.name,
                doc=r.preset.doc,
                options=dict(r.preset.options),
                reaches=dict(r.preset.reaches),
                unreachable=r.preset.unreachable,
                default=r.name == cs.default,
                covered=r.covered,
                met=r.met,
                note=r.note,
                certificate=None if r.certificate is None else json_document(r.certificate),
            )
        )
    doc = dict(schema_version=SCHEMA_VERSION, kind="specverify-configurations", factory=cs.factory,
               default_engine_config=cs.default, verdict=str(cs.verdict), met=cs.met,
               configurations=entries)  # fmt: skip
    return _clean(doc)


def render_configurations_json(cs) -> str:
    """:func:`configurations_document` as indented JSON text."""
    return json.dumps(configurations_document(cs), indent=2, sort_keys=True) + "\n"


def render_configurations_text(cs, *, certificates: bool = True) -> str:
    """Each configuration's certificate (its scenario table and verdict; ``certificates=False``: left out), then
    the configuration × verdict table with elapsed time, outcomes drawn and the state evidence."""
    parts = []
    for r in cs.results:
        if certificates and r.certificate is not None:
            parts.append(f"== configuration {r.name} ==\n" + render_text(r.certificate, legend=False))
    head = f"{'configuration':24s} {'verdict':13s} {'covered':8s} {'met':4s} {'elapsed':>8s} {'outcomes':>9s}  evidence"
    lines = [f"configurations of {cs.factory}", head, "-" * len(head)]
    for r in cs.results:
        cert = r.certificate
        name = r.name + (" (default)" if r.name == cs.default else "")
        covered = {True: "yes", False: "NO", None: "-"}[r.covered]
        verdict = str(cert.verdict) if cert is not None else "not run"
        elapsed = f"{cert.elapsed_s:7.1f}s" if cert is not None else f"{'-':>8s}"
        outcomes = f"{_outcomes(cert):9d}" if cert is not None else f"{'-':>9s}"
        lines.append(f"{name:24s} {verdict:13s} {covered:8s} {'yes' if r.met else 'NO':4s} {elapsed} {outcomes}  "
                     f"{r.note}")  # fmt: skip
    if cs.default is None:
        lines.append("(the factory names no default configuration: none of these is known to equal a run without "
                     "--engine-config)")  # fmt: skip
    lines.append(f"worst verdict: {cs.verdict}; {'every configuration meets' if cs.met else 'NOT met by every'} "
                 "the run's requirements (exit code 0 needs every configuration run to meet them and its state "
                 "reached)")  # fmt: skip
    return "\n".join(parts + ["\n".join(lines)]) + "\n"
