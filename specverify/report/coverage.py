"""The coverage table of a certificate: what it proved per sampling parameter, and which paths its rounds took.

Users ask two things a verdict line does not say: which sampling parameters were proven (and to what TV), and which
code paths were exercised. Both are read from the certificate alone — its results, and the scenarios of the matrix
its run configuration names — so a stored certificate gives the same table as the run that wrote it.

**Per parameter** (``PARAMETERS``): the scenarios (and mixed members) whose requests set it. ``refused`` when one of
them failed (``seed`` reads the plain seeded scenarios, and the reproducibility check beside them); ``passed`` when
every one run passed — with the smallest TV its sampling scenarios ruled out (the least
``detectable_tv`` among them; greedy scenarios rule out any greedy mismatch on their prompts); ``not covered`` with
why (no scenario sets it, or the reason its scenarios were not run).

**Per path**: the draft family, the γ values of the scenarios run, the tree shapes, and the round kinds that occurred
in the decoder's own reported rounds (``accepted``): the first round, full acceptance + bonus, and "accepted k of γ"
(a rejection at position k, or a finish inside the block). A round that drafts nothing (a fallback) reports 0
accepted like a rejection at position 0, so fallback and resumed rounds are not told apart through the protocol:
the table says so instead of guessing.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["PARAMETERS", "coverage_table", "coverage_lines", "coverage_summary"]

#: The sampling parameters of the table: (label, ``SamplingParams`` field or a pseudo-field).
PARAMETERS = (
    ("temperature", "temperature"),
    ("top-k", "top_k"),
    ("top-p", "top_p"),
    ("min-p", "min_p"),
    ("repetition penalty", "repetition_penalty"),
    ("frequency penalty", "frequency_penalty"),
    ("presence penalty", "presence_penalty"),
    ("seed", "seed"),
    ("unseeded", "unseeded"),
    ("stop strings", "stop"),
    ("min_tokens", "min_tokens"),
    ("bad words", "bad_token_ids"),
    ("grammar", "grammar"),
    ("logits processors", "logits_processors"),
    ("n", "n"),
)
_NOT_ASKED = {"n": "no scenario of the matrix asks for n > 1 completions per request (parallel sampling)"}


def _scenarios(cert) -> dict:
    """The scenarios of the certificate's matrix by name (empty where this version cannot rebuild it)."""
    config = cert.config
    if config is None or config.user_pair:
        return {}
    from specverify.certification.matrix.checkpoint import configuration_scenarios
    from specverify.certification.matrix.scenarios import SCENARIOS, matrix
    from specverify.enums import ModelFamily

    try:
        found = dict(matrix(config.models, config.draft_family))
        if config.models == ModelFamily.CHECKPOINT:
            found = {**configuration_scenarios(SCENARIOS), **found}
    except Exception:  # noqa: BLE001 -- an optional extra missing (checkpoint: transformers): no table rows
        return {}
    return found


def _spec(result, specs: dict):
    """The scenario that made ``result``: its mixed member's own where it is one, else its scenario's."""
    if result.member is not None and result.member in specs and result.kind.value != "composition":
        return specs[result.member]
    return specs.get(result.scenario)


_PLAIN = frozenset({"temperature", "max_tokens"})


def _uses(spec, result, field: str, seeded: Optional[bool]) -> bool:
    if field == "seed":  # the plain seeded scenarios: a failure of another parameter's scenario is not the seed's
        plain = spec.params.active() <= _PLAIN and spec.params.temperature > 0
        return bool(seeded) and spec.seeded and plain and spec.kind.value in ("sampling", "mixed")
    if field == "unseeded":
        return spec.kind.value == "collision" or (spec.kind.value != "greedy" and (not spec.seeded or seeded is False))
    if field == "n":
        return getattr(spec.params, "n", 1) > 1
    return field in spec.params.active()


def _row(label: str, field: str, used: list, unselected: list) -> dict:
    """One parameter's row from the results that use it (``used``) and the matrix's scenarios using it that the run
    did not select (``unselected``)."""
    row = {"parameter": label, "field": field, "status": "not covered", "tv_ruled_out": None, "scenarios": []}
    row["scenarios"] = [r.name for r in used]
    run = [r for r in used if r.covered]
    if not used and unselected:
        return {**row, "why": f"its scenarios were not selected in this run: {', '.join(unselected)}"}
    if not used:
        return {**row, "why": _NOT_ASKED.get(field, "no scenario of the matrix sets it")}
    if not run:
        return {**row, "why": _not_run(used[0])}
    failed = [r.name for r in run if not r.passed]
    if failed:
        return {**row, "status": "refused", "why": f"failed: {', '.join(failed)}"}
    tvs = [r.detectable_tv for r in run if r.detectable_tv is not None]
    greedy = [r for r in run if r.kind.value == "greedy"]
    why = f"{len(run)} of {len(used)} scenarios run, all passed"
    if greedy:
        why += f"; greedy output equal on {sum(r.n for r in greedy)} prompts"
    return {**row, "status": "passed", "tv_ruled_out": min(tvs) if tvs else None, "why": why}


_WHY_NOT = {
    "broke": "not run: an earlier scenario broke the protocol",
    "budget": "not run: the budget ran out",
    "unfit": "not run: too close to a processor boundary for float32",
}


def _not_run(result) -> str:
    """Why a parameter's first scenario gathered no evidence: the undeclared capability in the note's words, the
    other typed reasons in a line of their own (the scenario table carries the full note)."""
    reason = getattr(result.not_run, "value", None)
    if reason in _WHY_NOT:
        return _WHY_NOT[reason]
    return result.note.removeprefix("not covered: ") or "its scenarios were not run"


def _gammas(spec) -> tuple:
    if spec.kind.value == "greedy":
        from specverify.certification.checks.greedy import gammas_of

        return gammas_of(spec)
    return (spec.num_draft_tokens,)


def _round_kinds(results: list, specs: dict) -> dict:
    """Round kinds seen in the decoder's reported rounds: kind -> the scenarios where some round was of it (the
    first round from the first-round counts, the others from the all-round shares of the metrics check)."""
    kinds: dict = {}
    for r in results:
        gamma = _spec(r, specs).num_draft_tokens
        seen = ["first round"] if r.accepted_observed else []
        for row in (r.metrics or {}).get("rows", ()):
            get = row.get if isinstance(row, dict) else (lambda k, row=row: getattr(row, k, None))
            if get("metric") == "rounds_accepting" and get("measured"):
                k = get("index")
                seen.append("full acceptance + bonus" if k == gamma else f"accepted {k} of γ (rejected at {k})")
        for kind in seen:
            kinds.setdefault(kind, []).append(r.name)
    return dict(sorted(kinds.items()))


def coverage_table(cert) -> dict:
    """The coverage table of ``cert`` as a JSON-ready dict: ``parameters`` (one row per :data:`PARAMETERS` entry:
    ``parameter``, ``field``, ``status`` passed / refused / not covered, ``tv_ruled_out``, ``scenarios``, ``why``)
    and ``paths`` (``draft_family``, ``gammas``, ``tree_shapes``, ``round_kinds``, ``not_observable``)."""
    specs = _scenarios(cert)
    results = [r for r in cert.scenarios if _spec(r, specs) is not None]
    seeded = "does not declare the 'seed'" not in (cert.reproducibility_note or "")
    selected = {r.scenario for r in results} | {r.member for r in results}
    table = [
        _row(
            label,
            field,
            [r for r in results if _uses(_spec(r, specs), r, field, seeded)],
            [n for n, spec in specs.items() if n not in selected and _uses(spec, None, field, seeded)],
        )
        for label, field in PARAMETERS
    ]
    seed_row = table[[field for _, field in PARAMETERS].index("seed")]
    if cert.reproducible is not None:  # the named check beside the law: same seed, same output
        seed_row["why"] += f"; reproducible: {'yes' if cert.reproducible else 'NO'} ({cert.reproducibility_note})"
    run = [r for r in results if r.covered]
    gammas = sorted({g for r in run for g in _gammas(_spec(r, specs))})
    shapes = sorted({tuple(_spec(r, specs).pair.shape) for r in run if hasattr(_spec(r, specs).pair, "shape")})
    family = str(cert.config.draft_family) if cert.config is not None else None
    paths = {
        "draft_family": family,
        "gammas": gammas,
        "tree_shapes": [list(s) for s in shapes] if family == "tree" else [],
        "round_kinds": _round_kinds(run, specs),
        "not_observable": "fallback and resumed rounds: a round that drafts nothing reports 0 accepted, as a "
        "rejection at position 0 does (the protocol reports accepted drafts per round, not drafts verified)",
    }
    return {"parameters": table, "paths": paths}


def coverage_lines(table: dict) -> list:
    """The table as text lines (the text report and the plugin's summary)."""
    lines = ["coverage by sampling parameter:"]
    for row in table["parameters"]:
        tv = f" (TV ≥ {row['tv_ruled_out']:.3g} ruled out)" if row["tv_ruled_out"] is not None else ""
        lines.append(f"  {row['parameter']:<20s} {row['status']}{tv}: {row['why']}")
    paths = table["paths"]
    kinds = ", ".join(sorted(paths["round_kinds"])) or "none reported (the decoder does not report accepted)"
    lines.append(f"paths: drafts {paths['draft_family']}; γ {', '.join(map(str, paths['gammas'])) or 'none'}")
    if paths["tree_shapes"]:
        lines.append(f"  tree shapes: {'; '.join(str(tuple(s)) for s in paths['tree_shapes'])}")
    lines.append(f"  round kinds seen: {kinds}")
    lines.append(f"  not observable: {paths['not_observable']}")
    return lines


def coverage_summary(table: dict) -> list:
    """Two lines for the plugin's summary: the parameters by status (the smallest TV ruled out beside each passed
    one) and the paths taken."""
    by = {"passed": [], "refused": [], "not covered": []}
    for row in table["parameters"]:
        tv = f" {row['tv_ruled_out']:.2g}" if row["status"] == "passed" and row["tv_ruled_out"] is not None else ""
        by[row["status"]].append(row["parameter"] + tv)
    parts = [f"{status}: {', '.join(names)}" for status, names in by.items() if names]
    paths = table["paths"]
    rounds = len([k for k in paths["round_kinds"] if k != "first round"])
    return [
        f"  coverage (TV ruled out): {'; '.join(parts)}",
        f"  paths: drafts {paths['draft_family']}, γ {', '.join(map(str, paths['gammas'])) or 'none'}, "
        f"{rounds} round kinds seen beside the first round (fallback and resumed rounds not observable)",
    ]
