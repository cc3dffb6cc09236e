"""Part documents read back: which parts are still needed, and the one merge that decides every certificate.

The merge takes a split scenario's blocks in index order whatever their arrival order: at each block that ends a
look it applies the sequential rule to the counts so far, exactly as the scenario's check does between two looks
when it draws them itself; a decision there (or an outcome of exact probability 0) ends the scenario, and blocks
after it are ignored (a whole run would not have drawn them). A protocol violation in a part ends its decoder's run:
the scenarios not yet run are ``not run: the decoder already broke the protocol``. A part that could not set its
decoder up makes that decoder's certificate ``error``. The merge refuses a part given twice, a part of another run or
plan, and (unless asked for what is there) a set that misses a part still needed, naming each. Holm and the verdict
rules then run once per decoder (``results.verdict.finish_certificate``), as they always do.

An impossible outcome at the first look ends a split scenario at that look (the check drawing itself would go on to
the fixed plan's N: the verdict is the same, rejected at once, its N smaller).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Optional, Sequence

from specverify.certification.config.execution import command_line
from specverify.certification.execution.plan import REPRODUCIBILITY, Part, Plan, RunPlan
from specverify.certification.matrix.laws import law_of
from specverify.certification.results.evidence import Certificate, ScenarioResult
from specverify.certification.results.migrate import PART_SCHEMA_VERSION
from specverify.certification.run.collect import scenario_seed
from specverify.certification.run.context import BATTERY_SIZE
from specverify.certification.run.tally import draws_from_dict, merge_draws
from specverify.enums import NotRun
from specverify.errors import check
from specverify.protocol import merged_state

__all__ = ["needed", "merge", "scenario_results", "documents_by_id"]

_BROKE = "not run: the decoder already broke the protocol"
HOW = ("isolation", "timeout_s", "threads")  # how the decoder runs: parts run either way belong to one run


def _identity(run: dict) -> dict:
    """What makes two parts of one run: every option but how the decoder runs, as JSON has it (lists, not tuples);
    a version 2 document's ``shard`` (how that run executed) is not part of it."""
    return json.loads(json.dumps({k: v for k, v in run.items() if k not in HOW and k != "shard"}))


def documents_by_id(plan: Plan, docs: Sequence[dict]) -> dict:
    """``{part id: document}``, every document checked to be a part of this plan and given once (a document already
    checked, the same object, is not checked again: a scheduler asks after every arrival)."""
    out: dict = {}
    for doc in docs:
        seen = plan.checked.get(id(doc))
        part_id = seen[1] if seen is not None and seen[0] is doc else _check(plan, doc)
        plan.checked[id(doc)] = (doc, part_id)
        check(part_id not in out, f"part {part_id!r} given twice: a retry's document must replace the first.")
        out[part_id] = doc
    return out


def _check(plan: Plan, doc: object) -> str:
    """The id of the part ``doc`` is a document of, once checked against the plan."""
    check(
        isinstance(doc, dict) and doc.get("kind") == "specverify-part",
        f"{str(doc)[:80]!r} is not a specverify part document (kind 'specverify-part'): give what a run's "
        "parts wrote (`specverify certify ... --shard I/N --counts-out PATH`).",
    )
    part_id = (doc.get("part") or {}).get("id")
    check(
        doc.get("schema_version") == PART_SCHEMA_VERSION,
        f"part {part_id!r} has schema_version {doc.get('schema_version')!r}, expected {PART_SCHEMA_VERSION}: "
        "written by another specverify version; run it again.",
    )
    part = Part.from_dict(doc["part"])
    check(
        plan.by_id.get(part.id) == part,
        f"part {part.id!r} ({part}) is not in this run's plan (another --block-draws, split or configuration?): "
        f"the plan has {len(plan.parts)} parts.",
    )
    run = plan.run_of(part)
    want = dict(_identity(run.config.to_dict()), block_draws=run.execution.block_draws)
    have = dict(_identity(doc["run"]), block_draws=doc.get("block_draws"))
    differ = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    check(
        not differ,
        f"part {part.id!r} is of another run: {_differences(have, want, differ)}. Merge the parts of one command "
        "(same factory, flags, --seed).",
    )
    return part.id


def _differences(have: dict, want: dict, keys: list) -> str:
    return ", ".join(f"{k}={have.get(k)!r} (this run: {want.get(k)!r})" for k in keys)


def _ended(run: RunPlan, docs: dict) -> Optional[dict]:
    """The first document of ``run`` (in plan order) that ended its decoder: a violation or a set-up failure."""
    return next((docs[p.id] for p in run.parts if p.id in docs and _ends(docs[p.id])), None)


def _ends(doc: dict) -> bool:
    return bool(doc.get("violation") or doc.get("error"))


def _draw_state(run: RunPlan, name: str, docs: dict) -> dict:
    """A split scenario read from its blocks in index order: ``done`` (True when decided, or when every block is
    in), ``used`` (the blocks that count), ``draws``, the sequential ``decision`` / ``held``, a gate's ``skipped``
    result or a block's ``broke`` results. Remembered per scenario, so a scheduler asking after every arrival
    reads each block once (while the documents it read are the ones given again)."""
    blocks = run.blocks_of(name)
    state = run.states.get(name)
    if state is None or any(docs.get(b.id) is not d for b, d in zip(blocks, state["used"])):
        state = dict(done=False, used=[], draws=None, decision=None, held=None, skipped=None, broke=None)
    if not state["done"]:
        state = _read_blocks(run, name, blocks, docs, dict(state, used=list(state["used"])))
        run.states[name] = state
    return state


def _read_blocks(run: RunPlan, name: str, blocks: list, docs: dict, state: dict) -> dict:
    from specverify.certification.checks.judge import look_decision

    design = run.designs.get(name)
    law = law_of(run.matrix[name])
    floor = min(run.alpha.alpha / BATTERY_SIZE, 0.5)
    for part in blocks[len(state["used"]) :]:
        doc = docs.get(part.id)
        if doc is None:
            return state
        state["used"].append(doc)
        if _ends(doc) or "draws" not in doc:
            key = "broke" if _ends(doc) else "skipped"
            return dict(state, done=True, **{key: [ScenarioResult.from_dict(r) for r in doc.get("results") or ()]})
        state["draws"] = merge_draws(state["draws"], draws_from_dict(doc["draws"]))
        if design is None or part.look is None:
            continue
        vec, impossible = law.align(state["draws"].outcomes)
        if impossible:
            return dict(state, done=True)
        decision = look_decision(design, law, vec, part.look, previous=state["decision"], floor=floor)
        state["decision"] = decision
        if decision.held and state["held"] is None:
            state["held"] = (part.look, decision.pvalue)
        if decision.status != "continue":
            return dict(state, done=True)
    return dict(state, done=True)


def needed(plan: Plan, docs: Sequence[dict]) -> list:
    """The parts still needed given ``docs`` (the documents so far, in any order), in plan order: not yet run, and
    not made unneeded by a decision (blocks after a sequential decision, read in index order) or by the end of their
    decoder's run (a protocol violation or a set-up failure in one of its parts). A scheduler cancels the rest."""
    have = documents_by_id(plan, docs)
    out = []
    for run in plan.runs:
        if _ended(run, have) is not None:
            continue
        for name in dict.fromkeys(p.scenario for p in run.parts):
            if name != REPRODUCIBILITY and run.split(run.matrix[name]) and _draw_state(run, name, have)["done"]:
                continue
            out += [p for p in run.blocks_of(name) if p.id not in have]
    return out


def merge(plan: Plan, docs: Sequence[dict], *, partial: bool = False) -> list:
    """``[(run plan, Certificate)]``, one per decoder of ``plan`` in order, from its parts' documents (any arrival
    order). ``partial``: decide on the scenarios whose parts are all there and leave the others out (a pytest
    session that ran some items), instead of refusing a set that misses a needed part."""
    have = documents_by_id(plan, docs)
    missing = [p for p in needed(plan, list(have.values()))]
    if not partial:
        shown = [p.id for p in missing[:6]]
        check(not missing, f"parts {shown!r}{' ...' if len(missing) > 6 else ''} are still needed: run them.")
    return [(run, _certificate(run, have, {p.id for p in missing})) for run in plan.runs]


def _certificate(run: RunPlan, have: dict, missing: set) -> Certificate:
    from specverify.certification.results.verdict import error_certificate, finish_certificate

    mine = [have[p.id] for p in run.parts if p.id in have]
    elapsed = sum(d.get("elapsed_s", 0.0) for d in mine)
    ended = _ended(run, have)
    config = run.config
    lacking = {p.scenario for p in run.parts if p.id in missing and p.scenario != REPRODUCIBILITY}
    if lacking and ended is None:  # a partial merge: the scenarios that ran, as a run of those would say
        config = replace(config, scenarios=tuple(s.name for s in run.chosen if s.name not in lacking))
    if ended is not None and ended.get("error"):
        return error_certificate(ended["error"], config=config, elapsed_s=elapsed)
    violation = ended.get("violation") if ended is not None else None
    results = []
    for scenario in run.chosen:
        if scenario.name not in lacking or ended is not None:
            results += scenario_results(run, scenario.name, have, broken=violation is not None)
    repro_doc = have.get(run.parts[-1].id)
    if violation:
        repro = (None, "not run: the decoder broke the protocol")
    elif repro_doc is None:
        repro = (None, "not run")
    else:
        repro = tuple(repro_doc["reproducible"])
    cert = finish_certificate(
        results,
        violation,
        repro,
        config=config,
        matrix=run.matrix,
        elapsed_s=elapsed,
        timings=None if violation or repro_doc is None else repro_doc.get("timings"),
        engine=None if violation or repro_doc is None else _engine(repro_doc, mine),
    )
    return replace(cert, command=command_line(config, run.execution.one))


def _engine(repro_doc: dict, docs: list) -> Optional[dict]:
    """The decoder's ``engine_info`` at the end of its run, its ``state`` over every part (each key the largest value
    a decoder reached: a state reached on any engine host counts)."""
    info = repro_doc.get("engine")
    states = [d.get("state") for d in docs if isinstance(d.get("state"), dict)]
    if not isinstance(info, dict) or not states:
        return info
    own = [info["state"]] if isinstance(info.get("state"), dict) else []
    return {**info, "state": merged_state(own + states)}


def scenario_results(run: RunPlan, name: str, have: dict, *, broken: bool = False) -> list:
    """The results of scenario ``name`` of ``run`` from the documents ``have`` (``{part id: document}``): a whole
    scenario's as recorded, a split one's judged from its blocks; ``not run`` when the decoder broke the protocol
    before it."""
    scenario = run.matrix[name]
    if not run.split(scenario):
        doc = have.get(run.blocks_of(name)[0].id)
        if doc is None:
            return [ScenarioResult.skipped(scenario, NotRun.BROKE, _BROKE)] if broken else []
        return [ScenarioResult.from_dict(r) for r in doc.get("results") or ()]
    state = _draw_state(run, name, have)
    if state["broke"] or state["skipped"]:
        return state["broke"] or state["skipped"]
    if not state["done"] or state["draws"] is None:
        return [ScenarioResult.skipped(scenario, NotRun.BROKE, _BROKE)] if broken else []
    return [_judged(run, scenario, state)]


def _judged(run: RunPlan, scenario, state: dict) -> ScenarioResult:
    from specverify.certification.checks.judge import judge
    from specverify.certification.checks.sampling import Looks

    law, draws, decision = law_of(scenario), state["draws"], state["decision"]
    planned = run.alpha.sample_size(law)
    if decision is not None and decision.status != "continue":
        planned = draws.n
    design = run.designs.get(scenario.name)
    looks = Looks(design, state["held"], run.alpha.alpha) if design is not None else None
    elapsed = sum(d.get("elapsed_s", 0.0) for d in state["used"])
    result = judge(
        scenario,
        law,
        draws,
        run.alpha,
        seed=scenario_seed(run.config.seed, scenario.name),
        reproduce=run.config.reproduce(scenario=scenario.name),
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
