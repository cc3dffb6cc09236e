"""Part documents read back: which parts are still needed, and the merge into one certificate (``parts.py``)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Optional, Sequence

from specverify.certification.config.run_config import RunConfig
from specverify.certification.execution.part_plan import REPRODUCIBILITY, Part, plan_of
from specverify.certification.matrix.laws import law_of
from specverify.certification.results.evidence import Certificate, ScenarioResult
from specverify.certification.run.collect import scenario_seed
from specverify.certification.run.context import BATTERY_SIZE
from specverify.certification.run.tally import draws_from_dict, merge_draws
from specverify.enums import NotRun
from specverify.errors import InvalidArgument, check

__all__ = ["PART_SCHEMA_VERSION", "EXECUTION", "needed", "merge_parts", "documents_of"]

PART_SCHEMA_VERSION = 2  # as the shard counts files (migrate.py reads version 1 as theirs)
EXECUTION = ("isolation", "timeout_s", "threads", "executor", "ray_address")  # how parts run, not what they draw
_BROKE = "not run: the decoder already broke the protocol"


def _identity(run: dict) -> dict:
    """What makes two runs one: every option but the shard and how parts run, as JSON has it (lists, not tuples)."""
    import json

    return json.loads(json.dumps({k: v for k, v in run.items() if k not in EXECUTION and k != "shard"}))


def _check_docs(plan, docs: Sequence[dict]) -> dict:
    """``{part id: document}``, every document checked to be a part of this run and given once (a document
    already checked, the same object, is not checked again: a scheduler asks after every arrival)."""
    out: dict = {}
    for doc in docs:
        seen = plan.checked.get(id(doc))
        part_id = seen[1] if seen is not None and seen[0] is doc else _check_doc(plan, doc)
        plan.checked[id(doc)] = (doc, part_id)
        check(part_id not in out, f"part {part_id!r} given twice: a retry's document must replace the first.")
        out[part_id] = doc
    return out


def _check_doc(plan, doc) -> str:
    """The id of the part ``doc`` is a document of, once checked against the run and its plan."""
    check(
        isinstance(doc, dict) and doc.get("kind") == "specverify-part",
        f"{str(doc)[:80]!r} is not a specverify part document (kind 'specverify-part'): give what "
        "PartWorker.run / `specverify certify --block-draws N --shard I/N --counts-out PATH` wrote.",
    )
    check(
        doc.get("schema_version") == PART_SCHEMA_VERSION,
        f"part {doc['part'].get('id')!r} has schema_version {doc.get('schema_version')!r}, expected "
        f"{PART_SCHEMA_VERSION}: written by another specverify version; run it again.",
    )
    want = dict(_identity(plan.config.to_dict()), block_draws=plan.block_draws)
    have = dict(_identity(doc["run"]), block_draws=doc.get("block_draws"))
    differ = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    check(
        not differ,
        f"part {doc['part']['id']!r} is of another run: {_differences(have, want, differ)}. Merge the parts of "
        "one command (same factory, flags, --seed).",
    )
    part = Part(**{k: v for k, v in doc["part"].items() if k != "id"})
    check(
        plan.by_id.get(part.id) == part,
        f"part {part.id!r} ({part}) is not in this run's plan (another --block-draws or split?): "
        f"the plan has {len(plan.parts)} parts.",
    )
    return part.id


def _differences(have: dict, want: dict, keys: list) -> str:
    return ", ".join(f"{k}={have.get(k)!r} (this run: {want.get(k)!r})" for k in keys)


def _draw_state(plan, name: str, docs: dict) -> dict:
    """A split scenario read from its blocks in index order: ``done`` (True when decided, or when every block is
    in), ``used`` (the blocks that count), ``draws``, the sequential ``decision`` / ``held``, a gate's ``skipped``
    result or a block's ``broke`` results. Remembered per scenario, so a scheduler asking after every arrival
    reads each block once (while the documents it read are the ones given again)."""
    blocks = plan.blocks_of(name)
    state = plan.states.get(name)
    if state is None or any(docs.get(b.id) is not d for b, d in zip(blocks, state["used"])):
        state = dict(done=False, used=[], draws=None, decision=None, held=None, skipped=None, broke=None)
    if not state["done"]:
        state = _read_blocks(plan, name, blocks, docs, dict(state, used=list(state["used"])))
        plan.states[name] = state
    return state


def _read_blocks(plan, name: str, blocks: list, docs: dict, state: dict) -> dict:
    from specverify.stats import sequential_decision

    design = plan.designs.get(name)
    law = law_of(plan.matrix[name])
    floor = min(plan.alpha.alpha / BATTERY_SIZE, 0.5)
    for part in blocks[len(state["used"]) :]:
        doc = docs.get(part.id)
        if doc is None:
            return state
        state["used"].append(doc)
        if doc.get("violation") or "draws" not in doc:
            key = "broke" if doc.get("violation") else "skipped"
            return dict(state, done=True, **{key: [ScenarioResult.from_dict(r) for r in doc["results"]]})
        state["draws"] = merge_draws(state["draws"], draws_from_dict(doc["draws"]))
        if design is None or part.look is None:
            continue
        vec, impossible = law.align(state["draws"].outcomes)
        if impossible:
            return dict(state, done=True)
        decision = sequential_decision(design, vec, part.look, previous=state["decision"], pass_floor=floor)
        state["decision"] = decision
        if decision.held and state["held"] is None:
            state["held"] = (part.look, decision.pvalue)
        if decision.status != "continue":
            return dict(state, done=True)
    return dict(state, done=True)


def needed(config: RunConfig, docs: Sequence[dict], *, block_draws: int) -> list:
    """The parts of the run still needed given ``docs`` (the documents so far, in any order), in plan order: not
    yet run, and not made unneeded by a decision (blocks after a sequential decision, read in index order) or a
    protocol violation (then nothing is needed). A scheduler cancels every part not listed."""
    plan = plan_of(config, block_draws)
    have = _check_docs(plan, docs)
    if any(doc.get("violation") for doc in have.values()):
        return []
    out = []
    for name in dict.fromkeys(p.scenario for p in plan.parts):
        if name != REPRODUCIBILITY and plan.split(plan.matrix[name]):
            state = _draw_state(plan, name, have)
            if state["done"]:
                continue
        out += [p for p in plan.blocks_of(name) if p.id not in have]
    return out


def merge_parts(config: RunConfig, docs: Sequence[dict], *, block_draws: int) -> Certificate:
    """The run's certificate from its parts' documents (any arrival order), as the unsplit run decides it."""
    from specverify.certification.results.verdict import finish_certificate

    plan = plan_of(config, block_draws)
    have = _check_docs(plan, docs)
    missing = [p.id for p in needed(config, list(have.values()), block_draws=block_draws)]
    check(not missing, f"parts {missing[:6]!r}{' ...' if len(missing) > 6 else ''} are still needed: run them.")
    violation = next((have[p.id]["violation"] for p in plan.parts if have.get(p.id, {}).get("violation")), None)
    results = []
    for scenario in plan.chosen:
        results += _scenario_results(plan, scenario, have, broken=violation is not None)
    repro_doc = have.get(f"{REPRODUCIBILITY}#0")
    repro = (None, "not run: the decoder broke the protocol") if violation or repro_doc is None else None
    used = [d for d in have.values()]
    cert = finish_certificate(
        results,
        violation,
        repro or tuple(repro_doc["reproducible"]),
        config=plan.config,
        matrix=plan.matrix,
        elapsed_s=sum(d.get("elapsed_s", 0.0) for d in used),
        timings=None if violation or repro_doc is None else repro_doc.get("timings"),
        engine=None if violation or repro_doc is None else repro_doc.get("engine"),
    )
    return replace(cert, command=cert.command.replace(" --seed ", f" --block-draws {block_draws} --seed ", 1))


def _scenario_results(plan, scenario, docs: dict, *, broken: bool) -> list:
    if not plan.split(scenario):
        doc = docs.get(f"{scenario.name}#0")
        if doc is None:
            return [ScenarioResult.skipped(scenario, NotRun.BROKE, _BROKE)] if broken else []
        return [ScenarioResult.from_dict(r) for r in doc["results"]]
    state = _draw_state(plan, scenario.name, docs)
    if state["broke"] or state["skipped"]:
        return state["broke"] or state["skipped"]
    if not state["done"]:
        return [ScenarioResult.skipped(scenario, NotRun.BROKE, _BROKE)]
    return [_judged(plan, scenario, state)]


def _judged(plan, scenario, state: dict) -> ScenarioResult:
    from specverify.certification.checks.judge import judge
    from specverify.certification.checks.sampling import Looks

    law, draws, decision = law_of(scenario), state["draws"], state["decision"]
    planned = plan.alpha.sample_size(law)
    if decision is not None and decision.status != "continue":
        planned = draws.n
    design = plan.designs.get(scenario.name)
    looks = Looks(design, state["held"], plan.alpha.alpha) if design is not None else None
    elapsed = sum(d.get("elapsed_s", 0.0) for d in state["used"])
    result = judge(
        scenario,
        law,
        draws,
        plan.alpha,
        seed=scenario_seed(plan.config.seed, scenario.name),
        reproduce=plan.config.reproduce(scenario=scenario.name),
        started=time.perf_counter() - elapsed,
        planned=planned,
        decision=decision,
        looks=looks,
        draft_law=state["used"][0]["draft_law"],
    )
    return replace(result, counters=_combined_counters([d.get("counters") for d in state["used"]]))


def _combined_counters(records: list) -> Optional[dict]:
    """The blocks' counter windows as one record: every window's identities must hold."""
    records = [r for r in records if r]
    if len(records) <= 1:
        return records[0] if records else None
    oks = [r["ok"] for r in records]
    ok = False if False in oks else (True if True in oks else None)
    notes = "; ".join(dict.fromkeys(r["note"] for r in records if r["note"]))
    rows = [row for r in records for row in r["identities"]]
    return {**records[-1], "ok": ok, "identities": rows, "note": notes}


def documents_of(parts: Sequence[object]) -> list:
    """Part documents from dicts or JSON files (a file may hold one document or a shard's bundle of them)."""
    import json

    out = []
    for item in parts:
        doc = item
        check(
            isinstance(item, (dict, str, os.PathLike)),
            f"parts item {item!r} must be a part document (a dict) or the path of a JSON file of them.",
        )
        if not isinstance(item, dict):
            try:
                with open(item) as fh:
                    doc = json.load(fh)
            except ValueError as exc:
                raise InvalidArgument(f"{item}: not JSON ({exc}); give the files --counts-out wrote.") from None
        if isinstance(doc, dict) and doc.get("kind") == "specverify-parts":
            out += list(doc["parts"])
        else:
            out.append(doc)
    return out
