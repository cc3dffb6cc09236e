"""The units the Ray executor schedules (``ray_executor.py``), and the engine host each Ray actor is.

:class:`PartUnits` is one certification cut into the parts of ``parts.py`` (a sampling scenario's draws in blocks of
``block_draws``, every other scenario whole, the reproducibility check): its ``parts`` in plan order, a ``worker()``
made once per actor (``parts.PartWorker``: it keeps its decoders from one part to the next, since engines are slow
to start), ``key`` and ``label`` of a part, ``needed(docs)`` (the parts still worth running: a sequential decision,
read from a scenario's blocks in index order, makes its later blocks unneeded; a scheduler cancels them) and
``merge(docs)``, which refuses a part given twice. No Ray here: these run in any process.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Optional, Sequence

from specverify.certification.config.run_config import RunConfig
from specverify.certification.results.evidence import Certificate, ScenarioResult
from specverify.enums import Isolation, Verdict

__all__ = ["DEFAULT_BLOCK_DRAWS", "PartUnits", "EngineHost", "lost_part"]

# draws per block when the run does not say (--block-draws): a multiple of collect.FIXED_SAMPLE, so a decoder whose
# sample() lacks the start offset draws the unsplit run's chunks too, and a quick scenario spreads over ~10 blocks
DEFAULT_BLOCK_DRAWS = 4096


class PartUnits:
    """A run cut into parts (``parts.py``) for the Ray executor."""

    def __init__(self, config: RunConfig, block_draws: int):
        from specverify.certification.execution.parts import plan_parts

        self.config, self.block_draws = config, block_draws
        self.parts = plan_parts(config, block_draws=block_draws)

    def worker(self):  # noqa: ANN201 - a parts.PartWorker (imported lazily)
        from specverify.certification.execution.parts import PartWorker

        return PartWorker(self.config, block_draws=self.block_draws)

    @staticmethod
    def key(part) -> str:
        return part.id

    @staticmethod
    def label(part) -> str:
        if part.count is None:
            return part.scenario
        return f"{part.scenario} block {part.block} (draws {part.start} .. {part.start + part.count - 1})"

    def needed(self, docs: Sequence[dict]) -> set:
        from specverify.certification.execution.parts import needed

        return {p.id for p in needed(self.config, docs, block_draws=self.block_draws)}

    def merge(self, docs: Sequence[dict], *, lost: Optional[tuple] = None) -> Certificate:
        """The certificate of the parts' documents; ``lost`` = (part, violation) is recorded as that part's protocol
        violation (a part whose worker died while the decoder ran inside it)."""
        from specverify.certification.execution.parts import merge_parts

        docs = list(docs) + ([self.lost_document(*lost)] if lost else [])
        return merge_parts(self.config, docs, block_draws=self.block_draws)

    def lost_document(self, part, violation: str) -> dict:
        """A part's document that records ``violation`` instead of counts (the shape ``PartWorker.run`` gives a
        part whose call broke the protocol)."""
        from specverify.certification.execution.part_plan import REPRODUCIBILITY, plan_of
        from specverify.certification.execution.parts import PART_SCHEMA_VERSION, command_of

        plan = plan_of(self.config, self.block_draws)
        results = []
        if part.scenario != REPRODUCIBILITY:
            scenario = plan.matrix[part.scenario]
            broke = ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=True, passed=False)
            again = plan.config.reproduce(scenario=scenario.name)
            results = [replace(broke, violation=violation, reproduce=again, note="protocol violation").to_dict()]
        return {
            "schema_version": PART_SCHEMA_VERSION,
            "kind": "specverify-part",
            "part": part.to_dict(),
            "block_draws": self.block_draws,
            "run": plan.config.to_dict(),
            "command": command_of(plan.config, self.block_draws),
            "violation": violation,
            "results": results,
            "elapsed_s": 0.0,
        }


class EngineHost:
    """One engine host (a Ray actor): runs parts of one run with one ``PartWorker``, kept across them."""

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
        from specverify.certification.run.factory import SetupFailure

        started = time.perf_counter()
        try:
            if self.worker is None:
                self.worker = self.units.worker()
            answer = {"doc": self.worker.run(part)}
        except SetupFailure as exc:
            answer = {"error": exc.reason}
        return dict(answer, pid=os.getpid(), elapsed_s=time.perf_counter() - started)

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def lost_part(config: RunConfig, label: str, scenario: Optional[str], why: str) -> tuple:
    """``(verdict, text)`` for a part whose Ray worker died on both attempts. With ``--isolation none`` the decoder
    ran inside that worker: a death while decoding is a protocol violation (``invalid``, DESIGN rule 1). Under
    ``--isolation process`` the decoder's calls ran in a worker process of their own, whose death the part itself
    reports as ``invalid``: the Ray worker's death says nothing about the decoder (``error``)."""
    again = config.reproduce(scenario=scenario) if scenario else config.reproduce()
    text = f"part {label} lost its Ray worker on both attempts ({why})"
    if config.isolation == Isolation.NONE:
        return Verdict.INVALID, f"{text}: the decoder ran inside it (--isolation none).\nReproduce: {again}"
    return Verdict.ERROR, (
        f"{text}; the decoder's calls ran in a worker process of their own, so this says nothing about the "
        f"decoder: check the cluster, or run it without Ray: {again}"
    )
