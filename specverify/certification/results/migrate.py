"""Documents of older versions read as this version's: schema 1 certificates and shard counts files as schema 2,
and the shard counts files of runs before every run was a plan of parts as bundles of part documents.

Version 2 added, per scenario, ``scenario`` and ``member`` (v1 had only ``name``, ``scenario/member`` for a
member) and the typed ``not_run`` reason (v1 said why only in ``note``); per document the ``run`` configuration,
the ``requirements`` and the ``engine``. A v1 document gets them from what it holds: the name split once, the
reason read off the note's wording (the only places the note or a command line is parsed), the configuration
from its ``command`` (None when that line cannot be read back). Every v1 key keeps its meaning.
"""

from __future__ import annotations

from specverify.errors import InvalidArgument

__all__ = [
    "PART_SCHEMA_VERSION",
    "migrate_document",
    "not_run_of_v1_note",
    "parts_of_shard_files",
    "metric_row_of_list",
    "typed_metrics",
]

PART_SCHEMA_VERSION = 2  # part documents and their bundles (a part's configuration and error are optional keys)
_REPRODUCIBILITY = "(reproducibility)"

_V1_NOT_RUN = (  # v1 notes of scenarios that gathered no evidence -> the v2 reason
    ("budget", "budget"),
    ("already broke the protocol", "broke"),
    ("processor boundary", "unfit"),
    ("does not declare", "undeclared"),
)


def not_run_of_v1_note(note: str) -> str | None:
    """The v2 ``not_run`` of a v1 scenario that was not covered, from its note."""
    return next((reason for words, reason in _V1_NOT_RUN if words in note), None)


def _scenario(s: dict) -> dict:
    out = {"metrics": None, **s}  # v1 documents written before the metrics check have no "metrics"
    out["metrics"] = typed_metrics(out["metrics"])
    scenario, _, member = s["name"].partition("/")  # v1 names members "scenario/member"
    out.update(scenario=scenario, member=member or None, not_run=None)
    if not s.get("covered") and s.get("violation") is None:
        out["not_run"] = not_run_of_v1_note(s.get("note") or "")
    return out


def _run(command: str, shard: tuple | None = None, **fields) -> dict | None:
    from specverify.certification.config.execution import run_from_command

    try:
        config, _ = run_from_command(command)
    except (InvalidArgument, ValueError, SystemExit):
        return None
    from dataclasses import replace

    return dict(replace(config, **fields).to_dict(), shard=list(shard) if shard else None)


def migrate_document(doc: dict) -> dict:
    """``doc`` as a version 2 document (unchanged when it already is one; anything else is left to the schema)."""
    if not isinstance(doc, dict) or doc.get("schema_version") != 1:
        return doc
    out = {**doc, "schema_version": 2}
    out["scenarios"] = [_scenario(s) for s in doc.get("scenarios", [])]
    if doc.get("kind") == "specverify-shard":
        shard = tuple(doc["shard"])
        scenarios = tuple(doc.get("scenarios_requested") or ())
        run = _run(doc.get("command", ""), shard=shard, power=doc.get("power", 0.9), scenarios=scenarios)
        if run is None:
            raise InvalidArgument(
                f"shard counts file of schema version 1 with command={doc.get('command')!r}: that line cannot be read "
                "back as a run configuration; rerun the shards with this version."
            )
        for key in ("factory", "level", "seed", "alpha", "power", "models", "num_shards", "scenarios_requested"):
            out.pop(key, None)
        out["run"] = run
        return out
    out.update(run=_run(doc.get("command", "")), requirements=None, engine=None)
    return {"metrics_ok": None, "metrics_note": "", "timings": None, **out}


def _part(scenario: str, doc: dict, **fields) -> dict:
    part = dict(scenario=scenario, block=0, start=0, count=None, look=None, pair=None, configuration=None)
    part["id"] = f"{scenario}#0"
    run = {k: v for k, v in doc["run"].items() if k != "shard"}
    return {"schema_version": PART_SCHEMA_VERSION, "kind": "specverify-part", "part": part, "block_draws": None,
            "run": run, "command": doc.get("command", ""), "violation": None, "error": None, **fields}  # fmt: skip


def _shard_as_bundle(doc: dict) -> dict:
    """A version 2 shard counts file as a bundle of whole-scenario part documents (``pair`` None: the merge takes
    it from its plan)."""
    by_scenario: dict = {}
    for s in doc["scenarios"]:
        by_scenario.setdefault(s["scenario"], []).append(s)
    parts = []
    for name, results in by_scenario.items():
        broke = doc.get("violation") if any(r.get("violation") for r in results) else None
        elapsed = sum(r.get("elapsed_s") or 0.0 for r in results)
        parts.append(_part(name, doc, violation=broke, results=results, elapsed_s=elapsed))
    if doc["shard"][0] == 1 and not doc.get("violation"):  # shard 1 ran the reproducibility check
        repro = [doc.get("reproducible"), doc.get("reproducibility_note", "")]
        parts.append(_part(_REPRODUCIBILITY, doc, reproducible=repro, timings=None, engine=None, elapsed_s=0.0))
    return {"schema_version": PART_SCHEMA_VERSION, "kind": "specverify-parts", "shard": list(doc["shard"]),
            "block_draws": None, "engine_configs": [], "run": doc["run"], "parts": parts}  # fmt: skip


def parts_of_shard_files(docs: list) -> list:
    """Each shard's document (a bundle of part documents, of this version or an older one; or an older shard counts
    file) as a bundle of this version's part documents."""
    out = []
    for doc in docs:
        kind, version = doc.get("kind"), doc.get("schema_version")
        if kind == "specverify-shard" and version in (1, 2):
            out.append(_shard_as_bundle(migrate_document(doc)))
        elif kind == "specverify-parts" and version == PART_SCHEMA_VERSION:
            out.append(doc)
        else:
            raise InvalidArgument(
                f"{kind!r} (schema_version {version!r}) is not a specverify shard counts file: write it with "
                "`specverify certify ... --shard I/N --counts-out PATH`."
            )
    return out


_V2_METRIC_NAMES = (  # the words a positional metrics row named its metric with -> (kind, where its index is)
    ("tokens per target call", "tokens_per_call"),
    ("target calls per output token", "calls_per_token"),
    ("mean acceptance length", "mean_acceptance_length"),
    ("draft acceptance rate", "acceptance_rate"),
    ("rounds accepting ", "rounds_accepting"),
    ("accepted at position ", "accepted_at_position"),
    ("acceptance at position ", "acceptance_at_position"),
)


def metric_row_of_list(row: list) -> dict:
    """A metrics row as certificates wrote it before rows were typed (``[name, measured, expected, low, high,
    inside]``) as a typed row's fields: its kind and index read off its name (the one place the name is parsed)."""
    name, measured, expected, low, high, inside = row
    kind = next((k for words, k in _V2_METRIC_NAMES if name.startswith(words)), "")
    index = None
    if kind in ("rounds_accepting", "accepted_at_position", "acceptance_at_position"):
        index = int(name.split()[2 if kind == "rounds_accepting" else 3])
    return dict(metric=kind, index=index, name=name, measured=measured, expected=expected, low=low, high=high,
                inside=inside)  # fmt: skip


def typed_metrics(evidence: dict | None) -> dict | None:
    """A scenario's ``metrics`` evidence with its positional rows (written before rows were typed) as typed rows."""
    if not isinstance(evidence, dict) or not any(isinstance(row, list) for row in evidence.get("rows") or ()):
        return evidence
    rows = [metric_row_of_list(row) if isinstance(row, list) else row for row in evidence["rows"]]
    return {**evidence, "rows": rows}
