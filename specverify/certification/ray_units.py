"""The units the Ray executor schedules (``ray_executor.py``), and the engine host each Ray actor is.

A *unit run* describes one certification cut into parts that change no count: its ``parts`` (each with a ``key``,
a ``label`` and the model ``pair`` it needs), a ``worker()`` made once per actor (it keeps its decoders from one part
to the next: engines are slow to start), ``key_of(doc)`` (the part a document answers), ``needed(docs)`` (the keys
still worth running: a scheduler cancels the rest) and ``merge(docs, lost=...)``. :class:`ShardUnits` cuts by
scenario (``shards.py``: every scenario keeps the seeds and the α share of the whole run; shard 1 runs the
reproducibility check), so its merge is the unsharded certificate. No Ray here: these run in any process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from specverify.certification.config import RunConfig, factory_name
from specverify.certification.evidence import Certificate, ScenarioResult
from specverify.enums import Isolation, Verdict
from specverify.errors import check

__all__ = ["Shard", "ShardUnits", "plan_shard_parts", "merge_shard_documents", "EngineHost", "lost_part"]


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``total`` (1-based), holding ``scenarios`` (the run's order) on the model ``pair``."""

    index: int
    total: int
    scenarios: tuple
    pair: str = ""

    @property
    def key(self) -> int:
        return self.index

    @property
    def label(self) -> str:
        return f"shard {self.index}/{self.total} ({', '.join(self.scenarios)})"


def _shard_count(positions: list, size: int) -> int:
    """The split that spreads ``positions`` (the chosen scenarios' places in the matrix, the run's first first)
    over the most shards while the first stays on shard 1, which runs the reproducibility check on its pair as
    the unsharded run does on its first scenario's; ties go to the fewest shards."""
    best, most = 1, 1
    for total in range(2, size + 1):
        if positions[0] % total:
            continue
        used = len({p % total for p in positions})
        if used > most:
            best, most = total, used
    return best


def plan_shard_parts(config: RunConfig, family) -> list:
    """The parts of ``config`` on ``family`` (its matrix) as scenario shards: the shards of the split that hold a
    chosen scenario, shard 1 first (it holds the run's first scenario and runs the reproducibility check). A shard
    that holds none adds nothing to the merge, so it is not run."""
    from specverify.certification.scenarios import check_names
    from specverify.certification.shards import shard_of

    check_names(config.scenarios, family)
    chosen = list(config.scenarios) if config.scenarios else list(family)
    total = _shard_count([family.position(n) for n in chosen], len(family))
    held = {i: tuple(n for n in chosen if shard_of(family.position(n), total) == i) for i in range(1, total + 1)}
    return [Shard(i, total, held[i], str(family[held[i][0]].pair)) for i in range(1, total + 1) if held[i]]


def _checked(config: RunConfig, docs: Sequence[dict], expected: Sequence[int]) -> dict:
    """The documents by shard index: each once, of this run and split, none outside ``expected``."""
    seen: dict = {}
    for doc in docs:
        index, total = doc["shard"]
        check(index not in seen, f"part {index}/{total} given twice: a part is merged once (a retry replaces it).")
        seen[index] = doc
    totals = sorted({doc["shard"][1] for doc in docs})
    check(len(totals) <= 1, f"parts of different splits {totals!r}: merge the parts of one run.")
    whole = replace(config, shard=None).to_dict()
    for doc in docs:
        differ = sorted(k for k, v in doc["run"].items() if k != "shard" and whole.get(k) != v)
        check(not differ, f"part {doc['shard'][0]} is of another run: {differ!r} differ from this run's.")
    unplanned = sorted(set(seen) - set(expected))
    check(not unplanned, f"parts {unplanned!r} are not parts of this run (expected={sorted(expected)!r}).")
    return seen


def merge_shard_documents(
    config: RunConfig,
    docs: Sequence[dict],
    *,
    expected: Sequence[int],
    lost: Optional[str] = None,
    elapsed_s: float = 0.0,
) -> Certificate:
    """One certificate from the shards' counts documents (``shards.shard_document``) of one run: every part of
    ``expected`` (shard indices) once — a duplicate is refused, so a retried part never counts twice —, results
    in matrix order, the reproducibility check from shard 1, the first violation in shard order; ``lost`` (a part
    that could not be run, which is then missing) is the run's violation when no part broke the protocol first."""
    from specverify.certification.run import matrix_for
    from specverify.certification.verdict import finish_certificate

    check(bool(docs) or lost is not None, "docs=[] must hold the counts document of every part of the run.")
    seen = _checked(config, docs, expected)
    missing = sorted(set(expected) - set(seen))
    check(lost is not None or not missing, f"parts {missing!r} are missing: every part of the run must be merged.")
    config = replace(config, shard=None)
    family = matrix_for(config)
    ordered = [seen[i] for i in sorted(seen)]
    results = [ScenarioResult.from_dict(s) for doc in ordered for s in doc["scenarios"]]
    results.sort(key=lambda r: (family.position(r.scenario), r.name))
    violations = [doc["violation"] for doc in ordered if doc.get("violation")] + ([lost] if lost else [])
    first = seen.get(1)
    repro = (first["reproducible"], first["reproducibility_note"]) if first else (None, "not run: shard 1 was lost")
    return finish_certificate(
        results, violations[0] if violations else None, repro, config=config, matrix=family, elapsed_s=elapsed_s
    )


class _Kept:
    """A runner kept across parts: ``make`` of a pair it already holds answers from memory (the engine is not
    started again); ``release`` waits until another pair is made or the host shuts down (one pair's engine at a
    time: engines hold memory); ``close`` leaves it to the host."""

    def __init__(self, runner):
        self.runner, self.made = runner, {}

    def __getattr__(self, name):
        return getattr(self.runner, name)  # timeout_s, which sizes the calls

    def alive(self) -> bool:
        proc = getattr(self.runner, "_proc", None)  # a worker process is gone after a hang or a crash
        return proc is None or proc.is_alive()

    def request(self, op: str, *args: object) -> object:
        if op == "release":
            return None
        if op != "make":
            return self.runner.request(op, *args)
        key = args[0]
        if key not in self.made:
            for other in [k for k in self.made if k != key]:
                del self.made[other]
                self.runner.request("release", other)
            self.made[key] = dict(self.runner.request(op, *args))
        return dict(self.made[key])  # a copy: the session converts its fields

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        self.made.clear()
        self.runner.close()


class ShardWorker:
    """Runs shards of one run in this process, keeping a runner per factory (and its decoders) across them."""

    def __init__(self, config: RunConfig):
        self.config, self.kept = config, {}

    def _lend(self, spec, config):
        from specverify.certification.runner import make_runner

        key = factory_name(spec)
        kept = self.kept.get(key)
        if kept is None or not kept.alive():
            kept = self.kept[key] = _Kept(make_runner(spec, config))
        return kept

    @contextlib.contextmanager
    def _lending(self):
        from specverify.certification import pipeline

        made = pipeline.make_runner
        pipeline.make_runner = self._lend  # the pipeline makes its runners per run: this one outlives a shard
        try:
            yield
        finally:
            pipeline.make_runner = made

    def run(self, part: Shard) -> dict:
        """The shard's counts document; ``{"error": reason}`` when the factory could not be set up."""
        from specverify.certification.pipeline import run_certification

        with self._lending():
            cert = run_certification(replace(self.config, shard=(part.index, part.total)))
        return {"error": cert.reason} if cert.shard_info is None else {"doc": cert.shard_info}

    def close(self) -> None:
        for kept in self.kept.values():
            kept.shutdown()
        self.kept.clear()


class ShardUnits:
    """A run cut into scenario shards (the unit run of ``--executor ray`` on the scenario split)."""

    def __init__(self, config: RunConfig):
        from specverify.certification.run import matrix_for

        self.config = config
        self.parts = plan_shard_parts(config, matrix_for(config))

    def worker(self) -> ShardWorker:
        return ShardWorker(self.config)

    @staticmethod
    def key_of(doc: dict) -> int:
        return doc["shard"][0]

    def needed(self, docs: Sequence[dict]) -> set:
        """Every shard not merged yet (a shard runs its scenarios to their end: nothing to cancel early), none
        once one broke the protocol (the run is ``invalid`` whatever the rest says)."""
        if any(doc.get("violation") for doc in docs):
            return set()
        return {p.key for p in self.parts} - {self.key_of(d) for d in docs}

    def merge(self, docs: Sequence[dict], *, lost: Optional[str] = None, elapsed_s: float = 0.0) -> Certificate:
        if any(doc.get("violation") for doc in docs):
            lost = None  # the first violation decides; the shards cancelled after it are missing
            expected = [self.key_of(d) for d in docs]
        else:
            expected = [p.key for p in self.parts]
        return merge_shard_documents(self.config, docs, expected=expected, lost=lost, elapsed_s=elapsed_s)


class EngineHost:
    """One engine host (a Ray actor): runs parts of one unit run with one worker, kept across them."""

    def __init__(self, units, path: str):
        if path and os.path.isdir(path):  # the driver's directory: MODULE:ATTR resolves here and in the worker
            os.chdir(path)
            if path not in sys.path:
                sys.path.insert(0, path)
        self.units, self.worker = units, None

    def pid(self) -> int:
        return os.getpid()

    def run(self, part) -> dict:
        """``{"doc": ...}`` or ``{"error": reason}`` (a set-up failure), with this process's pid and the time."""
        from specverify.certification.factory import SetupFailure

        started = time.perf_counter()
        try:
            if self.worker is None:
                self.worker = self.units.worker()
            answer = self.worker.run(part)
        except SetupFailure as exc:
            answer = {"error": exc.reason}
        return dict(answer, pid=os.getpid(), elapsed_s=time.perf_counter() - started)

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def lost_part(config: RunConfig, part, why: str) -> tuple:
    """``(verdict, text)`` for a part whose Ray worker died on both attempts. With ``--isolation none`` the decoder
    ran inside that worker: a death while decoding is a protocol violation (``invalid``, DESIGN rule 1). Under
    ``--isolation process`` the decoder's calls ran in a worker process of their own, whose death the part itself
    reports as ``invalid``: the Ray worker's death says nothing about the decoder (``error``)."""
    scenarios = getattr(part, "scenarios", None) or (getattr(part, "scenario", None),)
    again = config.reproduce(scenario=scenarios[0]) if scenarios[0] else replace(config, shard=None).reproduce()
    text = f"{part.label} lost its Ray worker on both attempts ({why})"
    if config.isolation == Isolation.NONE:
        return Verdict.INVALID, f"{text}: the decoder ran inside it (--isolation none).\nReproduce: {again}"
    return Verdict.ERROR, (
        f"{text}; the decoder's calls ran in a worker process of their own, so this says nothing about the "
        f"decoder: check the cluster, or run it without Ray: {again}"
    )
