"""Sharded certification: shards run fixed parts of the matrix, ``merge_shards`` decides one certificate.

Shards split the matrix **by scenario** (no protocol change): scenario k of the family's matrix, in matrix order,
runs on shard ``k % N + 1``; shard 1 also runs the reproducibility check. Greedy and collision scenarios are
scenarios like the others. Every scenario keeps the seeds and the α share of the unsharded run (m counts the whole
matrix), so N shards merged give exactly the unsharded certificate. A shard never decides a verdict on its own
evidence: its counts file holds every scenario result; the merge applies Holm and the verdict rules once.

The counts file (``--counts-out``) is JSON with ``schema_version`` and ``kind: "specverify-shard"``.
"""

from __future__ import annotations

import json
from typing import Sequence

from specverify.certification.evidence import Certificate, ScenarioResult
from specverify.enums import Level
from specverify.errors import InvalidArgument, check

__all__ = ["SHARD_SCHEMA_VERSION", "parse_shard", "shard_of", "shard_document", "merge_shards"]

SHARD_SCHEMA_VERSION = 1
_SAME = ("factory", "level", "seed", "alpha", "power", "models", "num_shards", "scenarios_requested")


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 ≤ I ≤ N) as ``(I, N)``; anything else raises ``InvalidArgument`` naming ``--shard``."""
    try:
        index, total = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise InvalidArgument(f"--shard={text!r} must read I/N, e.g. --shard 1/4.") from None
    check(1 <= index <= total, f"--shard={text!r} needs 1 <= I <= N, e.g. --shard 1/{max(total, 1)}.")
    return index, total


def shard_of(position: int, num_shards: int) -> int:
    """The shard (1-based) that runs the scenario at ``position`` in the family's matrix."""
    return position % num_shards + 1


def shard_document(cert: Certificate, *, shard: tuple[int, int], violation: str | None, meta: dict) -> dict:
    """The counts file of one shard: its scenario results, its protocol violation if any, and the run's identity."""
    return {
        "schema_version": SHARD_SCHEMA_VERSION,
        "kind": "specverify-shard",
        "shard": list(shard),
        **meta,
        "violation": violation,
        "reproducible": cert.reproducible,
        "reproducibility_note": cert.reproducibility_note,
        "elapsed_s": cert.elapsed_s,
        "versions": cert.versions,
        "scenarios": [s.to_dict() for s in cert.scenarios],
    }


def _load(part: object) -> dict:
    if isinstance(part, dict):
        return part
    with open(part) as fh:
        return json.load(fh)


def merge_shards(parts: Sequence[object]) -> Certificate:
    """One certificate from every shard's counts file (paths or loaded dicts) of one run."""
    from specverify.certification.core import finish_certificate

    docs = [_load(p) for p in parts]
    check(bool(docs), "parts=[] must hold the counts file of every shard (specverify merge PART1.json PART2.json ...).")
    for doc in docs:
        check(
            doc.get("kind") == "specverify-shard" and doc.get("schema_version") == SHARD_SCHEMA_VERSION,
            f"{doc.get('kind')!r} (schema_version {doc.get('schema_version')!r}) is not a specverify shard counts "
            f"file of schema version {SHARD_SCHEMA_VERSION}: write it with `specverify certify ... --counts-out`.",
        )
    first = docs[0]
    for doc in docs[1:]:
        differ = [key for key in _SAME if doc.get(key) != first.get(key)]
        check(not differ, f"shards of different runs: {differ!r} differ (one run: same factory, flags and --seed).")
    total = first["num_shards"]
    seen = sorted(doc["shard"][0] for doc in docs)
    check(
        seen == list(range(1, total + 1)),
        f"shards {seen!r} given, expected each of 1..{total} exactly once: run the missing --shard I/{total}.",
    )
    docs.sort(key=lambda d: d["shard"][0])
    order = {name: i for i, name in enumerate(first["scenarios_requested"] or first["matrix_order"])}  # as unsharded
    results = [ScenarioResult.from_dict(s) for doc in docs for s in doc["scenarios"]]
    results.sort(key=lambda r: (order.get(r.name.split("/")[0], len(order)), r.name))
    violations = [doc["violation"] for doc in docs if doc.get("violation")]
    repro = (docs[0]["reproducible"], docs[0]["reproducibility_note"])
    return finish_certificate(
        results,
        violations[0] if violations else None,
        repro,
        level=Level(first["level"]),
        seed=first["seed"],
        alpha=first["alpha"],
        factory=first["factory"],
        command=first["command"],
        elapsed_s=max(doc["elapsed_s"] for doc in docs),
    )
