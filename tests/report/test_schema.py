"""One versioned schema for what specverify writes: certificates and shard counts files validate; broken ones
are rejected with the JSON path of the first error; the built-in validator agrees with jsonschema."""

import copy
import dataclasses
import json
import pathlib

import pytest

from specverify.certification import RunConfig
from specverify.certification.results.evidence import ScenarioResult
from specverify.enums import Level, NotRun, ScenarioKind, Verdict
from specverify.errors import InvalidArgument
from specverify.report import (
    SCHEMA_VERSION,
    certificate_from_document,
    json_document,
    load_schema,
    render_json,
    render_text,
    validate_document,
)

OPTIONAL_IN_V2 = {"counters"}  # the counters check (docs/metrics.md): optional keys of schema version 2
OPTIONAL_RUN_IN_V2 = {"control"}  # --control (docs/servers.md): written only when given


DATA = pathlib.Path(__file__).parents[1] / "data"


def _doc(cert):
    return json.loads(render_json(cert))


def _jsonschema_errors(doc):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(load_schema(doc["kind"]))
    return list(validator.iter_errors(doc))


def test_schema_files_are_valid_draft_2020_12_and_match_the_python_types():
    jsonschema = pytest.importorskip("jsonschema")
    for kind in ("specverify-certificate", "specverify-shard", "specverify-parts"):
        schema = load_schema(kind)
        jsonschema.Draft202012Validator.check_schema(schema)
        scenario = schema["$defs"]["scenario"]
        fields = {f.name for f in dataclasses.fields(ScenarioResult)} | {"name"}  # name: scenario[/member]
        # every key is required but those added within version 2, absent from documents written before them
        assert set(scenario["required"]) | OPTIONAL_IN_V2 == fields == set(scenario["properties"])
        assert not OPTIONAL_IN_V2 & set(scenario["required"])
        assert scenario["properties"]["not_run"]["enum"] == [r.value for r in NotRun] + [None]
        assert scenario["properties"]["kind"]["enum"] == [k.value for k in ScenarioKind]
        run = schema["$defs"]["run"]  # a document's run also says its shard (how it executed, kept in version 2)
        assert set(run["properties"]) == set(RunConfig.__dataclass_fields__) | {"shard"}
        optional = OPTIONAL_RUN_IN_V2 | ({"shard"} if kind == "specverify-parts" else set())
        assert set(run["required"]) == set(run["properties"]) - optional
        assert run["properties"]["level"]["enum"] == [v.value for v in Level]
    cert_schema = load_schema("specverify-certificate")
    assert cert_schema["properties"]["level"]["enum"] == [v.value for v in Level]
    assert cert_schema["properties"]["verdict"]["enum"] == [v.value for v in Verdict]


@pytest.mark.parametrize("which", ["reference_cert", "zoo_cert", "odd_cert"])
def test_certificates_of_real_runs_validate(which, request):
    cert = request.getfixturevalue(which)
    doc = _doc(cert)
    assert doc["schema_version"] == SCHEMA_VERSION == 2 and doc["kind"] == "specverify-certificate"
    assert validate_document(doc) == "specverify-certificate"
    assert validate_document(json_document(cert)) == "specverify-certificate"  # in memory too (enums, tuples)
    assert _jsonschema_errors(doc) == []
    back = certificate_from_document(doc)
    assert back == cert and render_text(back) == render_text(cert)


def test_worst_and_impossible_entries_are_labelled_and_a_violation_is_not_covered(odd_cert):
    scenarios = {s["name"]: s for s in _doc(odd_cert)["scenarios"]}
    worst = scenarios["temperature-1"]["worst"][0]
    assert worst["text"] == "aaaa" and worst["tokens"] == [0, 0, 0, 0] and worst["finish_reason"] == "length"
    assert isinstance(worst["observed"], int) and worst["expected"] > 0 and worst["residual"] > 0
    assert scenarios["eos-in-block"]["impossible"] == [
        {"text": "b", "tokens": [1], "finish_reason": "length", "count": 2}
    ]
    assert scenarios["eos-in-block"]["worst"][0]["residual"] == "inf"
    violating = scenarios["max-tokens-not-multiple"]
    assert violating["violation"] and violating["covered"] is False and violating["passed"] is False
    assert violating["n"] == 0


def test_a_shard_counts_file_validates(shard_path):
    doc = json.loads(shard_path.read_text())
    assert validate_document(doc) == "specverify-parts"
    assert _jsonschema_errors(doc) == []
    with pytest.raises(InvalidArgument, match="is not a certificate .a shard's counts file.*specverify merge"):
        certificate_from_document(doc)


def test_the_counts_files_of_older_versions_still_validate():
    for i in (1, 2):
        doc = json.loads((DATA / f"shard_v2_reference_{i}of2.json").read_text())
        assert validate_document(doc) == "specverify-shard" and _jsonschema_errors(doc) == []


def _set(doc, path, value):
    *head, last = path
    node = doc
    for key in head:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value


BROKEN = [
    (("verdict",), KeyError, r"\$\.verdict is missing"),
    (("verdict",), "great", r"\$\.verdict='great' expected one of"),
    (("seed",), True, r"\$\.seed=True is a boolean, expected integer"),
    (("alpha",), 0, r"\$\.alpha=0 expected > 0"),
    (("extra",), 1, r"\$\.extra is not a key"),
    (("scenarios", 0, "n"), -1, r"\$\.scenarios\[0\]\.n=-1 expected >= 0"),
    (("scenarios", 0, "worst", 0, "observed"), "x", r"\$\.scenarios\[0\]\.worst\[0\]\.observed='x'"),
    (("scenarios", 0, "worst", 0, "tokens"), KeyError, r"\$\.scenarios\[0\]\.worst\[0\]\.tokens is missing"),
    (("scenarios", 0, "worst", 0), ["aaaa", 1, 2.0, 0.5], r"\$\.scenarios\[0\]\.worst\[0\]=.* expected object"),
    (("scenarios", 0, "tests", 0), ["cressie-read"], r"\$\.scenarios\[0\]\.tests\[0\]=.* at least 2"),
    (("scenarios", 0, "accepted_observed", "x"), 1, r"accepted_observed\.x \(key\)='x' does not match"),
    (("scenarios", 0, "pvalue"), 2.0, r"\$\.scenarios\[0\]\.pvalue=2\.0 expected <= 1"),
    (("scenarios", 1, "n"), 0, r"\$\.scenarios\[1\]\.n=0 expected >= 1 \(a covered scenario has evidence"),
    (("scenarios", 1, "violation"), "boom", r"\$\.scenarios\[1\]\.covered=True expected False \(a protocol"),
]


@pytest.mark.parametrize("path,value,message", BROKEN, ids=[".".join(map(str, b[0])) for b in BROKEN])
def test_broken_certificates_are_rejected_with_the_json_path(zoo_cert, path, value, message):
    doc = copy.deepcopy(_doc(zoo_cert))
    _set(doc, path, value)
    with pytest.raises(InvalidArgument, match=message) as info:
        validate_document(doc)
    assert "specverify certify" in str(info.value)  # says how to get a valid one
    assert _jsonschema_errors(doc), "jsonschema accepts what validate_document rejects"


@pytest.mark.parametrize(
    "doc,message",
    [
        ([], r"doc=\[\] is an array, expected a JSON object"),
        ({"verdict": "exact"}, r"\$\.kind=None is not a specverify document kind"),
        ({"kind": "specverify-certificate", "schema_version": 3}, r"\$\.schema_version=3 is not one of \[1, 2\]"),
        ({"kind": "specverify-shard", "schema_version": 1}, r"\$\.shard is missing \(required\)"),
        ({"kind": "specverify-shard", "schema_version": 2}, r"\$\.shard is missing \(required\)"),
    ],
)
def test_documents_of_no_known_kind_or_version_are_rejected(doc, message):
    with pytest.raises(InvalidArgument, match=message):
        validate_document(doc)


def test_a_broken_shard_file_is_rejected(shard_path):
    doc = json.loads(shard_path.read_text())
    doc["parts"][0]["results"][0]["worst"][0] = {"text": "a"}
    where = r"\$\.parts\[0\]\.results\[0\]\.worst\[0\]=.* expected array.*--counts-out"
    with pytest.raises(InvalidArgument, match=where):
        validate_document(doc)
    assert _jsonschema_errors(doc)


def _as_version_1(doc):
    """A certificate document as schema version 1 wrote it: no run, requirements, engine; scenarios by name."""
    old = {
        k: v
        for k, v in doc.items()
        if k not in ("run", "requirements", "engine", "counters_ok", "counters_note", "coverage")
    }
    drop = ("scenario", "member", "not_run", "counters")
    old["scenarios"] = [{k: v for k, v in s.items() if k not in drop} for s in doc["scenarios"]]
    for s in old["scenarios"]:  # version 1 wrote positional metrics rows
        if s.get("metrics"):
            keys = ("name", "measured", "expected", "low", "high", "inside")
            s["metrics"] = {**s["metrics"], "rows": [[row[k] for k in keys] for row in s["metrics"]["rows"]]}
    return {**old, "schema_version": 1}


@pytest.mark.parametrize("which", ["reference_cert", "odd_cert"])
def test_a_version_1_certificate_reads_as_its_version_2_twin(which, request):
    """Migration: members and typed not-run reasons from v1's names and notes, the configuration from its command."""
    doc = _doc(request.getfixturevalue(which))
    old = _as_version_1(doc)
    assert validate_document(old) == "specverify-certificate"
    back = certificate_from_document(old)
    new = certificate_from_document(doc)
    assert back.scenarios == new.scenarios and back.config == new.config
    assert render_text(back) == render_text(new)
