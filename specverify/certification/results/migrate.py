"""Schema version 1 documents (certificates and shard counts files) read as version 2.

Version 2 added, per scenario, ``scenario`` and ``member`` (v1 had only ``name``, ``scenario/member`` for a
member) and the typed ``not_run`` reason (v1 said why only in ``note``); per document the ``run`` configuration,
the ``requirements`` and the ``engine``. A v1 document gets them from what it holds: the name split once, the
reason read off the note's wording (the only places the note or a command line is parsed), the configuration
from its ``command`` (None when that line cannot be read back). Every v1 key keeps its meaning.
"""

from __future__ import annotations

from specverify.errors import InvalidArgument

__all__ = ["migrate_document", "not_run_of_v1_note"]

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
    scenario, _, member = s["name"].partition("/")  # v1 names members "scenario/member"
    out.update(scenario=scenario, member=member or None, not_run=None)
    if not s.get("covered") and s.get("violation") is None:
        out["not_run"] = not_run_of_v1_note(s.get("note") or "")
    return out


def _run(command: str, **fields) -> dict | None:
    from specverify.certification.config.run_config import RunConfig

    try:
        config = RunConfig.from_command(command)
    except (InvalidArgument, ValueError, SystemExit):
        return None
    from dataclasses import replace

    return replace(config, **fields).to_dict()


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
