"""The certificate as a JSON document (schema version 2) and back; version 1 documents are read too (migrated).

``json_document`` labels what the certificate holds as tuples: a ``worst`` entry becomes ``{"text", "tokens",
"finish_reason", "observed", "expected", "residual"}`` and an ``impossible`` one ``{"text", "tokens",
"finish_reason", "count"}``. A scenario whose decoder broke the protocol gathered no evidence, so it reads
``covered: false`` (with ``passed: false`` and its ``violation``). ``certificate_from_document`` inverts all of it.

>>> split_outcome("'ab' [0, 1] eos")
{'text': 'ab', 'tokens': [0, 1], 'finish_reason': 'eos'}
>>> join_outcome({'text': 'ab', 'tokens': [0, 1], 'finish_reason': 'eos'})
"'ab' [0, 1] eos"
"""

from __future__ import annotations

import ast
import enum
import json
import math
import re
from typing import TYPE_CHECKING

from specverify.errors import InvalidArgument
from specverify.report.coverage import coverage_table
from specverify.report.schema import SCHEMA_VERSION, upgrade_document

if TYPE_CHECKING:
    from specverify.certification.results.evidence import Certificate

__all__ = [
    "json_document",
    "render_json",
    "certificate_from_document",
    "load_certificate",
    "split_outcome",
    "join_outcome",
]

_OUTCOME = re.compile(r"(?P<text>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\") \[(?P<tokens>[0-9, ]*)\] (?P<reason>\w+)")
_REAL_KEYS = ("statistic", "pvalue", "detectable_tv", "tv_estimate", "tv_null_quantile", "accepted_pvalue")


def split_outcome(label: str) -> dict:
    """An outcome label of a scenario result (``repr(text) [tokens] finish_reason``) as labelled parts; a label of
    any other form is kept whole as ``{"text": label}``."""
    match = _OUTCOME.fullmatch(label)
    if match:
        try:
            text = ast.literal_eval(match["text"])
        except (ValueError, SyntaxError):
            text = None
        tokens = [int(t) for t in match["tokens"].split(",") if t.strip()]
        parts = {"text": text, "tokens": tokens, "finish_reason": match["reason"]}
        if isinstance(text, str) and join_outcome(parts) == label:
            return parts
    return {"text": label}


def join_outcome(parts: dict) -> str:
    """The inverse of :func:`split_outcome`."""
    if "tokens" not in parts:
        return parts["text"]
    return f"{parts['text']!r} {list(parts['tokens'])} {parts['finish_reason']}"


def _scenario(s: dict) -> dict:
    out = dict(s)
    out["worst"] = [
        {**split_outcome(label), "observed": obs, "expected": exp, "residual": res}
        for label, obs, exp, res in s["worst"]
    ]
    out["impossible"] = [{**split_outcome(label), "count": count} for label, count in s["impossible"]]
    if s["violation"] is not None:
        out.update(covered=False, passed=False)  # no evidence was gathered (the schema requires this)
    return out


def json_document(cert) -> dict:
    """The certificate as a JSON-ready dict of ``schema_version`` 2, ``kind`` ``"specverify-certificate"``: its
    fields, with the run configuration as ``run`` and the ``requirements`` and whether each held."""
    doc = cert.to_dict()
    bundle = doc.pop("shard_info", None)  # a shard's counts file is written on its own (--counts-out)
    doc["run"] = doc.pop("config")
    if doc["run"] is not None:  # the run's shard, how it executed (schema 2 keeps it beside the options)
        doc["run"]["shard"] = bundle.get("shard") if isinstance(bundle, dict) else None
    doc["requirements"] = cert.requirements() if cert.config is not None else None
    doc = {"schema_version": SCHEMA_VERSION, "kind": "specverify-certificate", **doc}
    doc["scenarios"] = [_scenario(s) for s in doc["scenarios"]]
    doc["coverage"] = coverage_table(cert)  # derived from the rest: read back, it is recomputed (not stored)
    return _clean(doc)


def _clean(x):
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def render_json(cert) -> str:
    """:func:`json_document` as indented JSON text."""
    return json.dumps(json_document(cert), indent=2, sort_keys=True) + "\n"


def _real(x):
    return float(x) if x in ("inf", "-inf") else x


def _result(s: dict):
    from specverify.certification.results.evidence import ScenarioResult
    from specverify.certification.results.migrate import typed_metrics

    data = {k: _real(v) if k in _REAL_KEYS else v for k, v in s.items()}
    data["metrics"] = typed_metrics(data.get("metrics"))
    data["elapsed_s"] = _real(s["elapsed_s"])
    if s["tv_interval"] is not None:
        data["tv_interval"] = [_real(v) for v in s["tv_interval"]]
    data["worst"] = [(join_outcome(w), w["observed"], w["expected"], _real(w["residual"])) for w in s["worst"]]
    data["impossible"] = [(join_outcome(w), w["count"]) for w in s["impossible"]]
    if s["violation"] is not None:
        data["covered"] = True  # in memory the certifier marks a violating scenario covered (see json_document)
    return ScenarioResult.from_dict(data)


def _config(cls, run: dict | None):
    """The stored run configuration, or None where this version cannot read it back (a scenario since renamed)."""
    if run is None:
        return None
    try:
        return cls.from_dict(run)
    except InvalidArgument:
        return None


def certificate_from_document(doc: dict) -> Certificate:
    """The :class:`~specverify.certification.results.evidence.Certificate` a :func:`json_document` came from.

    The document is validated first (``InvalidArgument`` with the JSON path of the first error)."""
    from specverify.certification.config.run_config import RunConfig
    from specverify.certification.results.evidence import Certificate
    from specverify.enums import Level, Verdict

    kind = doc.get("kind") if isinstance(doc, dict) else None
    doc = upgrade_document(doc)
    if kind != "specverify-certificate":
        raise InvalidArgument(
            f"$.kind={kind!r} is not a certificate (a shard's counts file?): merge every shard first "
            "(specverify merge PART1.json PART2.json ... --json CERT.json)."
        )
    skip = ("schema_version", "kind", "scenarios", "run", "requirements", "coverage")
    fields = {k: v for k, v in doc.items() if k not in skip}
    fields.update(
        config=_config(RunConfig, doc.get("run")),
        verdict=Verdict(doc["verdict"]),
        level=Level(doc["level"]),
        elapsed_s=_real(doc["elapsed_s"]),
        scenarios=tuple(_result(s) for s in doc["scenarios"]),
    )
    return Certificate(**fields)


def _read_json(path: str) -> object:
    """The JSON document at ``path``; a ``.xz`` or ``.gz`` file is decompressed first (docs/findings stores its
    certificates as ``.json.xz``)."""
    name = str(path)
    if name.endswith(".xz"):
        import lzma

        opener, broken = lzma.open, (lzma.LZMAError, EOFError)
    elif name.endswith(".gz"):
        import gzip

        opener, broken = gzip.open, (gzip.BadGzipFile, EOFError)
    else:
        with open(name) as fh:
            return json.load(fh)
    try:
        with opener(name, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except broken as exc:
        raise InvalidArgument(
            f"path={name!r} is not a readable .{name.rsplit('.', 1)[1]} file ({exc}): give the compressed "
            "certificate as it was written, or the .json inside it."
        ) from None


def load_certificate(path: str) -> Certificate:
    """The certificate saved at ``path`` (``specverify certify ... --json PATH``), or that file compressed
    (``PATH.xz``, ``PATH.gz``)."""
    try:
        doc = _read_json(path)
    except OSError as exc:
        raise InvalidArgument(
            f"path={str(path)!r} cannot be read ({exc.strerror}): give a certificate's path."
        ) from None
    except ValueError as exc:
        raise InvalidArgument(
            f"path={str(path)!r} is not JSON ({exc}): give the file `specverify certify ... --json PATH` wrote."
        ) from None
    return certificate_from_document(doc)
