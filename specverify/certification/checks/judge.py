"""Evidence from draws against the exact law: the battery, TV beside its null, the worst outcomes, impossible
outcomes, acceptance (shared by the sampling, mixed and composition checks)."""

from __future__ import annotations

import time

from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.results.metrics import acceptance_evidence, metrics_evidence
from specverify.certification.run.context import BATTERY_SIZE
from specverify.enums import ModelFamily, NotRun

__all__ = ["judge", "budget_spent", "decode", "unfit_for_float32", "law_directions", "look_decision", "MIN_MARGIN"]

MIN_MARGIN = 1e-3  # probability between any reachable row and a processor cut point (docs/design.md)
_DIRECTIONS: dict = {}  # id(law) -> (law, directions): a law's prefix directions, made once per process
_DIRECTIONS_KEPT = 64


def law_directions(law) -> dict:
    """The battery's prefix directions of an exact ``law`` (``stats.battery_directions``), made once per law: a
    sequential scenario tests them at every look."""
    hit = _DIRECTIONS.get(id(law))
    if hit is not None and hit[0] is law:
        return hit[1]
    from specverify.stats import battery_directions

    directions = battery_directions(law.outcomes, law.probs)
    if len(_DIRECTIONS) >= _DIRECTIONS_KEPT:
        _DIRECTIONS.pop(next(iter(_DIRECTIONS)))
    _DIRECTIONS[id(law)] = (law, directions)
    return directions


def look_decision(design, law, counts, look, *, previous, floor) -> object:
    """The sequential decision at one look with the whole battery: the omnibus design's boundaries, and every other
    test of the battery at the look's level (``stats.sequential_decision``'s ``others``)."""
    from specverify.stats import sequential_decision, side_pvalues

    others = side_pvalues(counts, law.probs, law_directions(law))
    return sequential_decision(design, counts, look, previous=previous, pass_floor=floor, others=others)


def decode(law, outcome) -> str:
    """An outcome as the reports label it: ``repr(text) [tokens] finish_reason``."""
    tokens, reason = outcome
    return f"{law.text(outcome)!r} {list(tokens)} {reason}"


def budget_spent(scenario, planned: int, *, member=None) -> ScenarioResult:
    """The result of a scenario (or its ``member``) whose share of the budget would detect nothing."""
    note = "not run: budget exhausted (the share left would detect nothing)"
    return ScenarioResult.skipped(scenario, NotRun.BUDGET, note, member=member, planned_n=planned)


def unfit_for_float32(scenario, matrix) -> str | None:
    """Why a non-toy scenario cannot be run fairly (a processor boundary within ``MIN_MARGIN``), or None.

    Toy scenarios are built with the margin by construction (and tested); other families with an exact law are
    checked here, before any draw, so a float32 engine is never failed for rounding."""
    if scenario.pair.family == ModelFamily.TOY or not matrix.exact_law or scenario.members:
        return None
    from specverify.oracles.law import boundary_margin

    margin = boundary_margin(scenario.models().target, scenario.prompt, scenario.params)
    if margin < MIN_MARGIN:
        return (
            f"not run: the scenario comes within {margin:.2g} < {MIN_MARGIN:g} of a processor boundary on "
            f"the {scenario.pair.family} family (a float32 engine could be failed for rounding); a bug in the matrix"
        )
    return None


def sequential_evidence(decision, looks, fixed: int) -> dict:
    """The note (and, for an early pass, the detectable TV) of a sequential decision: what its look rules out.

    An early pass at look k means the statistic fell inside the look's pass boundary, the β_k quantile of the
    noncentral χ² a decoder at TV ε would give: such a decoder passes there with probability at most β_k, and the
    design as a whole rejects it with the planned power, so a pass detects TV ≥ ε (on the design's reference
    partition) whichever look it came at. The last look always decides, by the p-value (then Holm)."""
    design = looks.design if looks is not None else None
    total = design.num_looks if design is not None else None
    of = f" of {total}" if total else ""
    size = f"N = {decision.n} ({decision.n / fixed:.2f}× the fixed plan's {fixed})"
    held = looks.held if looks is not None else None
    held_text = ""
    if held is not None:
        look, p = held
        held_text = (
            f"; a pass at look {look + 1} was held back: its p-value {min(1.0, BATTERY_SIZE * p):.2g} is at "
            f"or below the floor α = {looks.floor:g}, so the design drew on"
        )
    if decision.status == "reject":
        return dict(note=f"sequential: reject at look {decision.look + 1}{of}, {size}{held_text}")
    if decision.status == "continue":
        return dict(note=f"sequential: stopped by the budget after look {decision.look + 1}{of}, {size}{held_text}")
    if design is not None and decision.look == design.num_looks - 1:
        return dict(note=f"sequential: reached the last look ({total}{of}), {size}; decided by its p-value{held_text}")
    out = dict(
        note=f"sequential: early pass at look {decision.look + 1}{of}, {size}: a decoder at TV ≥ {design.epsilon:g} "
        f"on the design's {decision.df + 1} cells passes at this look with probability ≤ "
        f"{design.beta_spent[decision.look]:.2g} (the design rejects it with probability ≥ {design.power:g})"
    )
    out["detectable_tv"] = float(design.epsilon)
    return out


def judge(
    scenario,
    law,
    draws,
    plan,
    *,
    seed,
    reproduce,
    started,
    planned=None,
    decision=None,
    looks=None,
    draft_law="model",
    parent=None,
    member=None,
    fixed=None,
) -> ScenarioResult:
    """Evidence from observed ``draws`` against the exact ``law`` (battery, TV, worst, impossible, acceptance).

    ``planned``: the scenario's planned N (default ``draws.n``); ``decision``: the sequential decision it stopped
    on, whose any-time-valid p-value replaces the battery's (the battery is then evidence only), with ``looks``
    (``checks.sampling.Looks``: the design and the floor) for the note and what a pass rules out; ``draft_law``: the
    decoder's (``DecoderHandle.draft_law``), which picks the acceptance expectation its counts are compared with;
    ``member``: these draws are that member of ``parent`` (default: of ``scenario`` itself), drawn as
    ``scenario`` (its request shape, on the parent's pair); ``fixed``: the fixed plan's N a sequential decision's
    note compares its N with (default: the level's plan for ``law``)."""
    from specverify.stats import battery, detectable_tv

    vec, impossible = law.align(draws.outcomes)
    owner = parent or scenario
    result = dict(
        scenario=owner.name,
        member=member,
        kind=owner.kind,
        exercises=scenario.exercises,
        covered=True,
        n=draws.n,
        planned_n=draws.n if planned is None else planned,
        num_outcomes=len(law),
        reproduce=reproduce,
        detectable_tv=float(detectable_tv(law.probs, max(draws.n, 1), alpha=plan.alpha_test, power=plan.power)),
    )
    if impossible:
        result.update(
            passed=False,
            pvalue=0.0,
            note="observed outcomes of exact probability 0",
            impossible=tuple((decode(law, o), c) for o, c in impossible[:5]),
        )
    if vec.sum() > 0:
        bat = battery(vec, law.probs, alpha=plan.alpha_scenario, seed=seed, directions=law_directions(law))
        pvalue = min(1.0, BATTERY_SIZE * bat.pvalue_min)
        worst = tuple(
            (decode(law, law.outcomes[w.index]), int(w.observed), float(w.expected_count), float(w.residual))
            for w in bat.worst
        )
        result.update(
            statistic=float(bat.gof.statistic),
            df=int(bat.gof.df),
            tests=tuple(bat.tests),
            worst=worst,
            tv_estimate=float(bat.tv.estimate),
            tv_interval=tuple(map(float, bat.tv.interval)),
            tv_null_quantile=float(bat.tv.null_quantile),
        )
        if decision is not None:
            pvalue = min(1.0, BATTERY_SIZE * float(decision.pvalue))
            result.update(sequential_evidence(decision, looks, fixed or plan.sample_size(law)))
        if not impossible:
            result.update(pvalue=pvalue)
    if draws.rounds or draws.violation:
        result.update(metrics=metrics_evidence(scenario, draws, law, alpha=plan.alpha, draft_law=draft_law))
    if draws.accepted:  # the first round's expectation follows the rule the metrics check found (block or chain)
        rule = (result.get("metrics") or {}).get("rule")
        result.update(acceptance_evidence(scenario, draws.accepted, law, draft_law, draws.prefill, rule=rule))
    result["elapsed_s"] = time.perf_counter() - started
    return ScenarioResult(**result)
