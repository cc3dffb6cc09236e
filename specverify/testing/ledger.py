"""The session's α ledger: every decoder's scenario results, gathered from items (and xdist workers), decided once.

Each ``@pytest.mark.specverify`` test is one *group*: one decoder certified with one set of options, one item per
scenario. Items judge their own test at the planned per-test α (``alpha / m``); the ledger applies Holm at the family
α over every result of the group and the verdict rules once (the items' part documents through the same merge as
``certify`` and ``specverify merge``), so a serial run and an xdist run, which gather the same parts, decide the same
verdict.
Certificates from the ``specverify_certify`` fixture are groups of their own (the test asserts on them itself).
Workers send :meth:`Ledger.dump` through ``workeroutput``; the controller :meth:`Ledger.merge`\\ s it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Optional

from specverify.enums import Verdict
from specverify.testing.items import ItemResult

__all__ = ["Group", "Decision", "Ledger"]


@dataclass
class Group:
    """One decoder's certification in this session (``kind``: ``marker`` items or one ``call`` of the fixture);
    ``config`` is its ``RunConfig`` as plain data (``RunConfig.to_dict``: it travels from xdist workers)."""

    key: str
    kind: str
    config: dict
    allow_inconclusive: bool = False
    planned: tuple = ()
    nodeid: str = ""
    reaches: dict = field(default_factory=dict)  # an engine configuration's state evidence (EngineConfig.reaches)
    records: list = field(default_factory=list)
    certificate: Optional[dict] = None  # a call's certificate (json_document)

    def meta(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("records", "certificate")}

    def run_config(self) -> object:
        from specverify.certification.config.run_config import RunConfig

        return RunConfig.from_dict(self.config)

    factory = property(lambda self: self.config["factory"])
    level = property(lambda self: self.config["level"])
    seed = property(lambda self: self.config["seed"])
    alpha = property(lambda self: self.config["alpha"])
    models = property(lambda self: self.config["models"])
    require = property(lambda self: self.config["require"])
    sequential = property(lambda self: self.config.get("sequential", True))


@dataclass(frozen=True)
class Decision:
    """A group's certificate and whether it meets its requirement (``None`` for fixture calls: the test decides)."""

    group: Group
    certificate: object
    meets: Optional[bool]
    why: str
    alpha_test: float
    num_tests: int
    not_run: tuple = ()
    holm_only: tuple = ()
    notes: tuple = ()


class Ledger:
    """Groups by key; plain data in and out (:meth:`dump` / :meth:`merge`)."""

    def __init__(self):
        self.groups: dict = {}
        self.baselines: dict = {}  # stored certificates read this session (not sent between processes)
        self.workers: dict = {}  # group key -> (plan, PartWorker): a decoder's worker, kept across its items here

    def close_workers(self) -> None:
        """Close the decoders this process kept for its items (their worker processes, their engines)."""
        while self.workers:
            _, worker = self.workers.pop(next(iter(self.workers)))
            worker.close()

    def open(self, **meta) -> Group:
        group = self.groups.get(meta["key"])
        if group is None:
            meta["planned"] = tuple(meta.get("planned", ()))
            group = self.groups[meta["key"]] = Group(**meta)
        return group

    def add_item(self, record: ItemResult, **meta) -> None:
        self.open(**meta).records.append(record)

    def add_certificate(self, cert, **meta) -> None:
        from specverify.report import json_document

        self.open(kind="call", **meta).certificate = json_document(cert)

    def dump(self) -> str:
        groups = [
            {**g.meta(), "records": [r.to_dict() for r in g.records], "certificate": g.certificate}
            for g in self.groups.values()
        ]
        return json.dumps({"groups": groups})

    def merge(self, text: str) -> None:
        for data in json.loads(text)["groups"]:
            records = [ItemResult.from_dict(r) for r in data.pop("records")]
            certificate = data.pop("certificate")
            group = self.open(**data)
            group.records.extend(records)
            if certificate is not None:
                group.certificate = certificate

    def decide(self) -> list:
        """One :class:`Decision` per group that ran something, by test id (the same order serially and under xdist)."""
        groups = sorted(self.groups.values(), key=lambda g: (g.nodeid, g.key))
        return [_decide(g) for g in groups if g.records or g.certificate is not None]


def _certificate(group: Group, config, records: list):
    """The decoder's certificate: every item's part documents through the one merge (the scenarios no item ran are
    left out, as a run of the others would say), or the error one item met setting the decoder up."""
    from specverify.certification.execution.merge import merge
    from specverify.certification.execution.plan import plan
    from specverify.certification.results.verdict import error_certificate

    elapsed = sum(r.elapsed_s for r in records)
    errors = [r.error for r in records if r.error]
    if errors:
        ran = tuple(r.scenario for r in records)
        return error_certificate(errors[0], config=replace(config, scenarios=ran), elapsed_s=elapsed)
    docs = [doc for r in records for doc in r.parts]
    [(_, cert)] = merge(plan(config), docs, partial=True)
    return replace(cert, elapsed_s=elapsed)


def _decide(group: Group) -> Decision:
    from specverify.certification.checks.alpha import planned_tests
    from specverify.certification.run.context import matrix_for
    from specverify.testing.items import planned_m

    config = group.run_config()
    m = planned_tests(config.models, config.draft_family) if group.kind == "call" else planned_m(config)
    alpha_test = config.alpha / m
    if group.kind == "call":
        from specverify.report import certificate_from_document

        cert = certificate_from_document(group.certificate)
        return Decision(group, cert, None, "", alpha_test, m)
    family = matrix_for(config)
    records = sorted(group.records, key=lambda r: family.position(r.scenario))
    cert = _certificate(group, config, records)
    passed_items = {r.scenario for r in records if not r.failure}
    holm_only = tuple(s.name for s in cert.failures if s.scenario in passed_items)
    not_run = tuple(n for n in group.planned if n not in {r.scenario for r in records})
    meets, why = _meets(cert, group)
    short = _state_shortfall(group, records)
    if short is not None:  # a configuration whose state was not reached is not covered, whatever the verdict
        meets, why = False, f"engine configuration {config.engine_config!r} not covered: {short}"
    failed = tuple(r.scenario for r in records if r.failure)
    if meets and failed:  # the summary never says "meets" beside failed items (a baseline regression, a core gap)
        statuses = ", ".join(f"{r.scenario} ({r.status})" for r in records if r.failure)
        meets, why = False, f"{why}, but {len(failed)} item(s) failed: {statuses}"
    return Decision(group, cert, meets, why, alpha_test, m, not_run=not_run, holm_only=holm_only)


def _state_shortfall(group: Group, records: list):
    """Why the group's engine configuration did not reach its state (``EngineConfig.shortfall`` over every item's
    ``engine_info["state"]``, each key the largest one item reached, as a whole run counts it); None when it did or
    declares nothing."""
    if not group.reaches:
        return None
    from specverify.protocol import EngineConfig, merged_state

    merged = merged_state(r.state for r in records)
    return EngineConfig(reaches=group.reaches).shortfall({"state": merged})


def _meets(cert, group: Group) -> tuple:
    """Whether ``cert`` meets the group's requirements (``require`` and each ``require_*`` of its run
    configuration, as the CLI's exit code does) and why, in words."""
    verdict = Verdict(cert.verdict)
    record = cert.requirements()
    unmet = [name for name in ("reproducible", "metrics", "speculation") if record[name]["required"]]
    unmet = [f"require_{name}: {_held(record[name]['ok'])}" for name in unmet if record[name]["ok"] is not True]
    if record["verdict_meets"] and record["met"]:
        return True, f"{verdict} meets require={group.require}" + _also(record)
    if verdict == Verdict.INCONCLUSIVE and group.allow_inconclusive and not cert.failures and not unmet:
        return True, f"inconclusive, allowed (allow_inconclusive=True; require={group.require})"
    if record["verdict_meets"]:
        return False, f"{verdict} meets require={group.require}, but " + "; ".join(unmet or ["counters NOT held"])
    return False, f"{verdict} does not meet require={group.require}" + "".join(f"; {u}" for u in unmet)


def _held(ok) -> str:
    return {True: "held", False: "NOT held", None: "NOT checked"}[ok]


def _also(record: dict) -> str:
    named = [name for name in ("reproducible", "metrics", "speculation") if record[name]["required"]]
    return f" ({', '.join(f'require_{n} held' for n in named)})" if named else ""
