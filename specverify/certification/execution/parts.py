"""A run cut into parts: each sampling scenario's draws in blocks, every other scenario whole (``--block-draws N``).

The library API a scheduler (a job array, Ray) calls; nothing here knows how parts travel:

- :func:`plan_parts` — every part of a run, in plan order (scenarios in run order, a scenario's blocks in index
  order, the reproducibility check last). It reads only the configuration and the oracle: no decoder is made.
- :class:`PartWorker` — a process's decoders, kept from one part to the next (engines are slow to start);
  ``worker.run(part)`` is a part's JSON-able document. :func:`run_part` is one part with a worker of its own.
- :func:`needed` — the parts still worth running given the documents so far: a sequential decision at a look,
  read from blocks in index order, makes the later blocks of its scenario unneeded (cancel them); a protocol
  violation makes every part unneeded.
- :func:`merge_parts` — one certificate from the documents: Holm and the verdict rules once, as the unsplit run.

**Blocks.** A sampling scenario's draws are its planned N (the fixed plan, ``--fixed``) or its sequential design's
look schedule (the default look rule). Each stretch between two looks (or the whole N) is cut into blocks of
``block_draws`` draws from its start, so every look ends a block; block ``b`` is draws ``start`` ..
``start + count - 1`` of the scenario's request stream, drawn with ``Session.draw(handle, request, count, start)``.
A block's counts depend only on (seed, scenario, block): a retry gives the same counts. The unsplit run draws the
same stream, so merged blocks give its counts exactly for a seeded scenario when the decoder's ``sample`` takes the
``start`` offset, or on the slow path (request seeds are ``seed + draw index``); a ``sample`` without the offset
draws fixed chunks of ``collect.FIXED_SAMPLE`` from a stretch's start, which the blocks repeat exactly when
``block_draws`` is a multiple of it (else the counts are another valid draw of the same law). Unseeded scenarios
and engines draw fresh entropy in every block: independent draws, the same law.

**Merging.** The merge takes a scenario's blocks in index order whatever their arrival order: at each block that
ends a look it applies the sequential rule to the counts so far, exactly as the unsplit run does after that look;
a decision there (or an outcome of exact probability 0) ends the scenario, and blocks after it are ignored (the
unsplit run would not have drawn them). It refuses a part given twice, a part of another run or split, and a set
missing a part still needed, naming each.

Refused (``check_split``): a run under ``--budget`` / ``--max-samples`` (the allocation is shared within one
process) and two-sample runs (``--against``, a user's checkpoints). A split scenario's engine counters
(``counters``) are each block's window, combined: every window's identities must hold. An impossible outcome at
the first look ends the scenario at that look (the unsplit run then draws the fixed plan's N from the start: the
verdict is the same, rejected at once, its N smaller).
"""

from __future__ import annotations

import time
from dataclasses import replace

from specverify.certification.checks.scenario import gate, reproducibility, run_scenario
from specverify.certification.config.run_config import RunConfig
from specverify.certification.execution.part_merge import PART_SCHEMA_VERSION, documents_of, merge_parts, needed
from specverify.certification.execution.part_plan import REPRODUCIBILITY, Part, check_split, plan_of, plan_parts
from specverify.certification.results.evidence import Certificate, ScenarioResult
from specverify.certification.run.collect import Session, scenario_seed
from specverify.certification.run.context import Deadline, Run
from specverify.certification.run.tally import draws_to_dict
from specverify.enums import Verdict
from specverify.errors import ProtocolViolation, check
from specverify.protocol import Request

__all__ = [
    "PART_SCHEMA_VERSION",
    "REPRODUCIBILITY",
    "Part",
    "PartWorker",
    "plan_parts",
    "run_part",
    "needed",
    "merge_parts",
    "documents_of",
    "run_parts",
    "command_of",
    "check_split",
]


class PartWorker:
    """Runs parts of one run in this process, keeping its decoders (one per model pair) between parts: a Ray actor
    or a job-array task makes one and calls :meth:`run` for each of its parts, then :meth:`close`."""

    def __init__(self, config: RunConfig, *, block_draws: int):
        from specverify.certification.run.runner import make_runner

        self.plan = plan_of(config, block_draws)
        self._runner = make_runner(self.plan.config.factory, self.plan.config)
        self.session = Session(Deadline(self._runner, None))
        self.run_state = Run(self.plan.config, self.plan.matrix, self.plan.alpha, self.session)

    def run(self, part: Part) -> dict:
        """The document of ``part`` (JSON-able): its identity and the run's, then its draws' counts, its results
        (a whole scenario, or a block the gates skip), or the reproducibility check; a protocol violation is
        recorded with how to reproduce it, never raised."""
        check(
            isinstance(part, Part) and self.plan.by_id.get(part.id) == part,
            f"part={part!r} is not a part of this run's plan: take it from plan_parts(config, block_draws=...).",
        )
        started = time.perf_counter()
        doc = _document(self.plan, part)
        run = replace(self.run_state, greedy_answers={}, started=started)
        scenario = None if part.scenario == REPRODUCIBILITY else self.plan.matrix[part.scenario]
        home = (self.plan.chosen[0].pair,) if self.plan.chosen else ()  # the reproducibility check's pair
        try:
            if scenario is not None:  # engines hold memory: close other pairs' decoders, as the unsplit run does
                self.session.release_unused([scenario], keep=home)
            if scenario is None:
                doc["reproducible"] = list(reproducibility(run, self.plan.chosen))
                first = self.plan.chosen[0] if self.plan.chosen else None
                doc["timings"] = self.session.timings(first) if first else None
                doc["engine"] = self.session.engine_info(first) if first else None
            elif part.count is None:
                doc["results"] = [r.to_dict() for r in run_scenario(run, scenario)]
            else:
                doc.update(_run_block(run, scenario, part))
        except ProtocolViolation as exc:
            doc["violation"] = f"{scenario.name}: {exc}\nReproduce: {run.reproduce(scenario)}"
            broke = ScenarioResult(scenario.name, scenario.kind, scenario.exercises, covered=True, passed=False)
            broke = replace(broke, violation=str(exc), reproduce=run.reproduce(scenario), note="protocol violation")
            doc["results"] = [broke.to_dict()]
        doc["elapsed_s"] = time.perf_counter() - started
        return doc

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> PartWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_part(config: RunConfig, part: Part, *, block_draws: int) -> dict:
    """:meth:`PartWorker.run` of one part, with a worker (and its decoder) of its own."""
    with PartWorker(config, block_draws=block_draws) as worker:
        return worker.run(part)


def _document(plan, part: Part) -> dict:
    return {
        "schema_version": PART_SCHEMA_VERSION,
        "kind": "specverify-part",
        "part": part.to_dict(),
        "block_draws": plan.block_draws,
        "run": plan.config.to_dict(),
        "command": command_of(plan.config, plan.block_draws),
        "violation": None,
    }


def command_of(config: RunConfig, block_draws: int) -> str:
    """The command line of a run in parts (``--block-draws`` after the run's own options)."""
    return config.reproduce().replace(" --seed ", f" --block-draws {block_draws} --seed ", 1)


def _run_block(run, scenario, part: Part) -> dict:
    """One block's counts (or its gate's skipped result), with what the merge needs of the decoder."""
    skipped = gate(run, scenario)
    if skipped is not None:
        return {"results": [skipped.to_dict()]}
    handle = run.session.decoder(scenario)
    seeded = handle.seeded and scenario.seeded
    seed = scenario_seed(run.seed, scenario.name) if seeded else None
    request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed)
    with run.session.counting() as scope:
        draws = run.session.draw(handle, request, part.count, start=part.start)
        counters = scope.close(run.session.handles())
    return {"draws": draws_to_dict(draws), "draft_law": handle.draft_law, "counters": counters}


def run_parts(config: RunConfig, *, block_draws: int, progress=None, resume=None) -> Certificate:
    """A run in parts in this process (``certify(block_draws=N)``): every part of the plan in order, skipping those
    a decision made unneeded, then :func:`merge_parts` — or, with ``shard=(I, N)``, part k of the plan when
    ``k % N + 1 == I``, and an ``inconclusive`` certificate whose ``shard_info`` is the shard's bundle of part
    documents (kind ``specverify-parts``: ``specverify merge`` reads it). ``resume`` (a path, ``--resume``):
    each finished part's document is kept there, and a block in flight after each call (``resume.py``)."""
    from specverify.certification.results.verdict import error_certificate, finish_certificate
    from specverify.certification.run.factory import SetupFailure

    started = time.perf_counter()
    try:
        plan = plan_of(config, block_draws)
        mine = plan.parts
        if config.shard is not None:
            index, total = config.shard
            mine = [p for k, p in enumerate(plan.parts) if k % total + 1 == index]
        docs: list = []
        journal = None if resume is None else _resume_file(resume, config, block_draws, progress)
        with PartWorker(config, block_draws=block_draws) as worker:
            for i, part in enumerate(mine):
                if part.id not in {p.id for p in needed(config, docs, block_draws=block_draws)}:
                    continue  # a decision at an earlier look of its scenario, or a violation
                kept = None if journal is None else journal.part(part.id)
                if kept is None and progress:
                    progress(_progress_line(i, len(mine), part, time.perf_counter() - started))
                docs.append(kept or _run_recorded(worker, part, journal))
    except SetupFailure as exc:
        return error_certificate(exc.reason, config=config, elapsed_s=time.perf_counter() - started)
    if config.shard is None:
        return replace(merge_parts(config, docs, block_draws=block_draws), elapsed_s=time.perf_counter() - started)
    cert = finish_certificate(
        [], None, (None, "not run in this shard"), config=config, matrix=plan.matrix,
        elapsed_s=time.perf_counter() - started,
    )  # fmt: skip
    bundle = {"schema_version": PART_SCHEMA_VERSION, "kind": "specverify-parts", "shard": list(config.shard),
              "block_draws": block_draws, "run": config.to_dict(), "parts": docs}  # fmt: skip
    reason = f"shard {index}/{total} of a run in parts only: merge every shard's --counts-out with `specverify merge`"
    command = command_of(config, block_draws)
    return replace(cert, verdict=Verdict.INCONCLUSIVE, reason=reason, shard_info=bundle, command=command)


def _resume_file(path, config: RunConfig, block_draws: int, progress=None):
    from specverify.certification.execution.resume import ResumeFile

    journal = ResumeFile(path, config, block_draws=block_draws)
    if progress and journal.resumed:
        done = sum(1 for k in journal.data["finished"] if k.startswith("part "))
        progress(f"specverify: resuming {path}: {done} parts finished")
    return journal


def _run_recorded(worker: PartWorker, part: Part, journal) -> dict:
    """``worker.run(part)``, its draws recorded in the resume file as they come and its document once whole (a
    violation is not recorded: a resume runs the part again)."""
    if journal is None:
        return worker.run(part)
    worker.session.journal = journal.journal(part.id)
    try:
        doc = worker.run(part)
    finally:
        worker.session.journal = None
    if doc.get("violation"):
        journal.interrupted(doc["violation"])
    else:
        journal.finish_part(part.id, doc)
    return doc


def _progress_line(i: int, total: int, part: Part, elapsed: float) -> str:
    what = part.scenario if part.count is None else f"{part.scenario} block {part.block} (draws {part.start} .. "
    what += "" if part.count is None else f"{part.start + part.count - 1})"
    eta = f", ETA {elapsed / i * (total - i):.0f} s" if i else ""
    return f"specverify: [part {i + 1}/{total}] {what} (elapsed {elapsed:.0f} s{eta})"
