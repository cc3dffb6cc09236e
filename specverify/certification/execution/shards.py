"""Sharded certification: shards run fixed parts of the matrix, ``merge_shards`` decides one certificate.

Shards split the matrix **by scenario** (no protocol change): scenario k of the matrix, in matrix order, runs on
shard ``k % N + 1``; shard 1 also runs the reproducibility check. Greedy and collision scenarios are scenarios like
the others. Every scenario keeps the seeds and the α share of the unsharded run (m counts the whole matrix), so N
shards merged give exactly the unsharded certificate. A shard never decides a verdict on its own evidence: its
counts file holds every scenario result and its run configuration; the merge applies Holm and the verdict rules
once. With ``--block-draws N`` the shards split the run's parts instead (part k of the plan on shard
``k % N + 1``, ``parts.py``): their counts files are bundles of part documents (kind ``specverify-parts``), and the
merge is ``parts.merge_parts``.

The counts file (``--counts-out``) is JSON with ``schema_version`` 2 and ``kind: "specverify-shard"``; version 1
files are migrated when read (``specverify.certification.results.migrate``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Sequence

from specverify.certification.config.run_config import RunConfig
from specverify.certification.results.evidence import Certificate, ScenarioResult
from specverify.enums import Verdict
from specverify.errors import InvalidArgument, check

__all__ = ["SHARD_SCHEMA_VERSION", "shard_of", "shard_document", "shard_certificate", "merge_shards"]

SHARD_SCHEMA_VERSION = 2


def shard_of(position: int, num_shards: int) -> int:
    """The shard (1-based) that runs the scenario at ``position`` in the family's matrix."""
    return position % num_shards + 1


def shard_document(cert: Certificate, *, violation: str | None) -> dict:
    """The counts file of one shard: its scenario results, its protocol violation if any, and the run's identity
    (its configuration, and the matrix order the merge restores)."""
    from specverify.certification.run.context import matrix_for

    config = cert.config
    return {
        "schema_version": SHARD_SCHEMA_VERSION,
        "kind": "specverify-shard",
        "shard": list(config.shard),
        "run": config.to_dict(),
        "matrix_order": list(matrix_for(config)),
        "command": replace(config, shard=None).reproduce(),
        "violation": violation,
        "reproducible": cert.reproducible,
        "reproducibility_note": cert.reproducibility_note,
        "elapsed_s": cert.elapsed_s,
        "versions": cert.versions,
        "scenarios": [s.to_dict() for s in cert.scenarios],
    }


def shard_certificate(cert: Certificate, violation: str | None) -> Certificate:
    """A shard's own certificate: ``inconclusive`` with its counts file in ``shard_info``."""
    index, total = cert.config.shard
    return replace(
        cert,
        verdict=Verdict.INCONCLUSIVE,
        reason=f"shard {index}/{total} only: merge every shard's --counts-out with `specverify merge`",
        shard_info=shard_document(cert, violation=violation),
    )


def _load(part: object) -> dict:
    from specverify.certification.results.migrate import migrate_document

    if isinstance(part, dict):
        return migrate_document(part)
    try:
        with open(part) as fh:
            doc = json.load(fh)
    except ValueError as exc:
        raise InvalidArgument(f"{part}: not JSON ({exc}); give the files `specverify certify --counts-out` wrote.")
    if not isinstance(doc, dict):
        raise InvalidArgument(
            f"{part}: holds a JSON {type(doc).__name__}, not a shard's counts file (an object with "
            '"kind": "specverify-shard"): give the files `specverify certify ... --counts-out` wrote.'
        )
    return migrate_document(doc)


def merge_shards(parts: Sequence[object]) -> Certificate:
    """One certificate from every shard's counts file (paths or loaded dicts) of one run."""
    from specverify.certification.results.verdict import finish_certificate
    from specverify.certification.run.context import matrix_for

    check(
        bool(parts), "parts=[] must hold the counts file of every shard (specverify merge PART1.json PART2.json ...)."
    )
    docs = [_load(p) for p in parts]
    if any(doc.get("kind") == "specverify-parts" for doc in docs):
        return _merge_part_bundles(docs)
    for doc in docs:
        check(
            doc.get("kind") == "specverify-shard" and doc.get("schema_version") == SHARD_SCHEMA_VERSION,
            f"{doc.get('kind')!r} (schema_version {doc.get('schema_version')!r}) is not a specverify shard counts "
            f"file: write it with `specverify certify ... --shard I/N --counts-out PATH`.",
        )
    runs = [{k: v for k, v in doc["run"].items() if k != "shard"} for doc in docs]
    for run, doc in zip(runs[1:], docs[1:]):
        differ = sorted(k for k in run if run[k] != runs[0].get(k))
        check(not differ, f"shards of different runs: {differ!r} differ (one run: same factory, flags and --seed).")
    total = docs[0]["shard"][1]
    check(
        all(doc["shard"][1] == total for doc in docs),
        f"shards of different splits: {sorted({tuple(d['shard']) for d in docs})!r}; merge the parts of one run.",
    )
    seen = sorted(doc["shard"][0] for doc in docs)
    check(
        seen == list(range(1, total + 1)),
        f"shards {seen!r} given, expected each of 1..{total} exactly once: run the missing --shard I/{total}.",
    )
    docs.sort(key=lambda d: d["shard"][0])
    config = replace(RunConfig.from_dict(docs[0]["run"]), shard=None)
    family = matrix_for(config)
    order = {n: i for i, n in enumerate(config.scenarios or docs[0]["matrix_order"])}  # as unsharded
    results = [ScenarioResult.from_dict(s) for doc in docs for s in doc["scenarios"]]
    results.sort(key=lambda r: (order.get(r.scenario, len(order)), r.name))
    violations = [doc["violation"] for doc in docs if doc.get("violation")]
    return finish_certificate(
        results,
        violations[0] if violations else None,
        (docs[0]["reproducible"], docs[0]["reproducibility_note"]),
        config=config,
        matrix=family,
        elapsed_s=max(doc["elapsed_s"] for doc in docs),
    )


def _merge_part_bundles(docs: list) -> Certificate:
    """The shards of a run in parts (``--block-draws N --shard I/N``): each a bundle of part documents, merged by
    ``parts.merge_parts``, which names a part given twice or still missing."""
    from specverify.certification.execution.parts import merge_parts

    check(
        all(doc.get("kind") == "specverify-parts" for doc in docs),
        "a run in parts (--block-draws) and a run split by scenario cannot be merged together: give the "
        "--counts-out files of one command's shards.",
    )
    seen = sorted(tuple(doc["shard"]) for doc in docs)
    check(len(set(seen)) == len(seen), f"shards {seen!r}: a shard given twice; give each --counts-out file once.")
    total = seen[0][1]
    missing = [f"{i}/{total}" for i in range(1, total + 1) if (i, total) not in seen]
    check(
        not missing and all(n == total for _, n in seen),
        f"shard {', '.join(missing) or '?'} is missing (given: {seen!r}): merge every shard of one split.",
    )
    config = replace(RunConfig.from_dict(docs[0]["run"]), shard=None)
    return merge_parts(config, [part for doc in docs for part in doc["parts"]], block_draws=docs[0]["block_draws"])
