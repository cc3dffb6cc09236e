"""Baselines: a stored certificate per decoder in a folder of the repository, and what counts as a regression.

``DIR/<decoder>.json`` is a certificate JSON document (``specverify.report``, schema version 2; version 1 files
are read too) of the decoder's last accepted run, every test of the session that certified it merged into one
(``merge_certificates``, marked tests first); ``--specverify-update-baseline`` rewrites it. It stores only what the
seed determines (``baseline_document``), so two updates of an unchanged decoder write the same bytes. A run
regresses when its verdict is worse than the stored one (exact > greedy-only > approximate > invalid >
inconclusive / error), when a scenario the baseline covered is no longer covered, or when the mean accepted length
dropped beyond its interval.

Acceptance length: the comparison is on the first round's accepted-draft counts of each scenario
(``accepted_observed``; the all-round counts live in the ``metrics`` evidence): a one-sided two-sample z-test of
the mean accepted drafts, rejecting at the scenario's planned per-test α. With the same seed and an unchanged
decoder the counts are identical and nothing moves. A row drawn without a seed stores no counts, so its
acceptance is not compared.

>>> baseline_name("specverify.reference:make_decoder", "toy")
'specverify.reference--make_decoder.json'
>>> round(mean_accepted({0: 1, 2: 3})[0], 3)
1.5
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist
from typing import Optional

from specverify.enums import Verdict

__all__ = [
    "baseline_name",
    "baseline_path",
    "load_baseline",
    "write_baseline",
    "baseline_document",
    "baseline_text",
    "verdict_regression",
    "scenario_regressions",
    "acceptance_drop",
    "mean_accepted",
    "merge_certificates",
]

FIRST_ROUND_NOTE = "the first round's accepted drafts"


def baseline_name(factory: str, models: str = "toy") -> str:
    """The file name of ``factory``'s baseline (``module--attr.json``; ``.checkpoint.json`` for that family)."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", str(factory).replace(":", "--"))
    return f"{slug}.json" if models == "toy" else f"{slug}.{models}.json"


def baseline_path(directory: str, factory: str, models: str = "toy") -> Path:
    return Path(directory) / baseline_name(factory, models)


def load_baseline(directory: str, factory: str, models: str = "toy") -> Optional[object]:
    """The stored certificate of ``factory`` in ``directory``, or None when there is none yet."""
    from specverify.report import load_certificate

    path = baseline_path(directory, factory, models)
    return load_certificate(str(path)) if path.exists() else None


STORED_DIGITS = 6  # significant digits of a stored real: BLAS and summation order move the last bits only
UNSEEDED_NOTE = "unseeded: stored by its verdict and planned power (its counts differ from run to run)"
# what a row drawn without a seed stores in place of its counts: its N and TV are the plan's
_COUNTS = {"statistic": None, "df": None, "pvalue": None, "tests": [], "tv_estimate": None, "tv_interval": None,
           "tv_null_quantile": None, "worst": [], "impossible": [], "accepted_observed": None,
           "accepted_pvalue": None, "metrics": None, "counters": None}  # fmt: skip


def _stored(x):
    """``x`` with its reals to :data:`STORED_DIGITS` significant digits."""
    if isinstance(x, dict):
        return {k: _stored(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_stored(v) for v in x]
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.{STORED_DIGITS}g}")
    return x


def _unseeded(cert) -> tuple:
    """``({row name: matrix scenario}, matrix)``: the rows whose draws are not a function of the seed: the collision
    check (unseeded by design), scenarios (and mixed members) that send no seed (``seeded=False``), and every sampling-
    type row of a decoder whose same-seed reproducibility did not hold (it does not declare ``seed``, or its outputs
    differed)."""
    if cert.config is None:
        return {}, None
    from specverify.certification.run.context import matrix_for

    family = matrix_for(cert.config)
    out = {}
    for s in cert.scenarios:
        scenario = family[s.scenario] if s.scenario in family else None
        if str(s.kind) == "greedy" or scenario is None or not s.covered:
            continue
        if str(s.kind) == "mixed" and s.member in family:  # a mixed member draws as its own scenario would
            scenario = replace(family[s.member], pair=scenario.pair)
        if str(s.kind) == "collision" or not scenario.seeded or cert.reproducible is not True:
            out[s.name] = scenario
    return out, family


def _planned_n(cert, scenario, family) -> int:
    """The fixed plan's N of a sampling scenario: what sequential looks would reach without an early decision."""
    from specverify.certification.checks import num_tests
    from specverify.certification.matrix.laws import law_of
    from specverify.certification.run.context import AlphaPlan

    plan = AlphaPlan(cert.alpha, cert.epsilon, cert.config.power, num_tests(family))
    return plan.sample_size(law_of(scenario))


def _unseeded_row(row: dict, cert, scenario, family) -> dict:
    """A row stored by its verdict and planned power: its counts (N under sequential looks, statistics, TV,
    outcomes, acceptance) left out; N is the fixed plan's and the TV it rules out the level's."""
    out = {**row, **_COUNTS, "note": UNSEEDED_NOTE if not row["violation"] else row["note"]}
    # a mixed member (row kind "mixed") drawn without a seed stops at its own looks too: its scenario is the member's
    if str(scenario.kind) == "sampling" and cert.config.sequential and row["not_run"] is None and family.exact_law:
        out["n"] = out["planned_n"] = _planned_n(cert, scenario, family)
        out["detectable_tv"] = float(cert.epsilon)
    return out


def baseline_document(cert) -> dict:
    """What a baseline stores of ``cert``: its JSON document with only what the seed determines. Left out: wall-clock
    times (``elapsed_s`` 0, no ``timings``), the derived ``coverage`` table, the environment's ``versions``, the
    engine's ``state`` counters, the notes after the verdict line of ``reason`` (the slow-decoder note measures
    throughput) and the counts of every row drawn without a seed (:func:`_unseeded`: stored by its verdict and planned
    power). Reals keep :data:`STORED_DIGITS` significant digits."""
    from specverify.errors import check
    from specverify.report import json_document

    check(
        all(hasattr(cert, k) for k in ("verdict", "scenarios", "reason", "config")),
        f"cert={cert!r:.80}: expected a Certificate (from specverify.certify or specverify.report.load_certificate).",
    )
    doc = json_document(cert)
    doc.pop("coverage", None)  # derived from the rest (and from unseeded rows' looks): recomputed, never stored
    doc.update(elapsed_s=0.0, timings=None, versions={}, reason=doc["reason"].split("\nnote: ")[0])
    if isinstance(doc.get("engine"), dict):
        doc["engine"] = {k: v for k, v in doc["engine"].items() if k != "state"}
    unseeded, family = _unseeded(cert)
    rows = [{**row, "elapsed_s": 0.0} for row in doc["scenarios"]]
    doc["scenarios"] = [
        _unseeded_row(row, cert, unseeded[row["name"]], family) if row["name"] in unseeded else row for row in rows
    ]
    return _stored(doc)


def baseline_text(cert) -> str:
    """The baseline file of ``cert``: :func:`baseline_document` as JSON with sorted keys, so that an update with the
    same seed and an unchanged decoder rewrites the file byte for byte (a diff shows only what changed)."""
    import json

    return json.dumps(baseline_document(cert), indent=2, sort_keys=True) + "\n"


def write_baseline(directory: str, cert, models: str = "toy") -> Path:
    """Store ``cert`` as ``factory``'s baseline (creating ``directory``); the path written."""
    os.makedirs(directory, exist_ok=True)
    path = baseline_path(directory, cert.factory, models)
    path.write_text(baseline_text(cert), encoding="utf-8")
    return path


def _rank(verdict) -> int:
    return Verdict(verdict).rank


def verdict_regression(now, base) -> Optional[str]:
    """Why ``now``'s verdict is worse than the baseline ``base``'s, or None."""
    if _rank(now.verdict) >= _rank(base.verdict):
        return None
    return f"{now.verdict} is worse than its stored {base.verdict} (level {base.level}, seed {base.seed})"


def mean_accepted(counts: dict) -> tuple:
    """(mean, variance, n) of the accepted-draft count from ``{accepted: count}``."""
    n = sum(counts.values())
    if n == 0:
        return 0.0, 0.0, 0
    mean = sum(m * c for m, c in counts.items()) / n
    return mean, sum((m - mean) ** 2 * c for m, c in counts.items()) / n, n


def acceptance_drop(now, base, alpha: float, tolerance: float = 0.0) -> Optional[str]:
    """Why the first-round mean accepted length of result ``now`` fell below the baseline result ``base``'s
    interval at ``alpha`` (one-sided z-test), or None. A baseline with acceptance and a run without is a drop.
    ``tolerance`` (a fraction of the baseline's mean, as pytest-benchmark's ``--benchmark-compare-fail``): the drop
    must also exceed it, so a significant but small change (a new draft with slightly lower acceptance) passes."""
    if not base.accepted_observed:
        return None
    if not now.accepted_observed:
        return f"{now.name}: the baseline has acceptance counts, this run has none (does the decoder report accepted?)"
    mean_b, var_b, n_b = mean_accepted(base.accepted_observed)
    mean_n, var_n, n_n = mean_accepted(now.accepted_observed)
    se = math.sqrt(var_b / n_b + var_n / n_n)
    if mean_n >= mean_b or mean_b - mean_n <= tolerance * mean_b:
        return None
    z = (mean_b - mean_n) / se if se > 0 else math.inf
    pvalue = 0.5 * math.erfc(z / math.sqrt(2))
    if pvalue >= alpha:
        return None
    lower = mean_b - NormalDist().inv_cdf(1 - alpha) * se
    allowed = f", beyond the tolerance {tolerance:.0%}" if tolerance else ""
    return (
        f"{now.name}: mean accepted drafts {mean_n:.3f} (N = {n_n}) < baseline {mean_b:.3f} (N = {n_b}); its "
        f"interval at α = {alpha:.2g} ends at {lower:.3f} (p = {pvalue:.2g}; {FIRST_ROUND_NOTE}){allowed}"
    )


def scenario_regressions(results, base, alpha: float, tolerance: float = 0.0) -> list:
    """What ``results`` (this run's ``ScenarioResult``\\ s) lost against the baseline certificate ``base``:
    coverage and acceptance length, one line each (a rejection fails on its own; the verdict is compared once)."""
    stored = {s.name: s for s in base.scenarios}
    out = []
    for now in results:
        was = stored.get(now.name)
        if was is None:
            continue
        if was.covered and not now.covered and not now.violation:
            out.append(f"{now.name}: covered in the baseline, not covered now ({now.note})")
        elif now.covered:
            drop = acceptance_drop(now, was, alpha, tolerance)
            if drop:
                out.append(drop)
    return out


def merge_certificates(certs: list, models: str = "toy") -> object:
    """One certificate of a decoder from several of one session (its tests), as the baseline stores it: every
    scenario once (the first test's result) in matrix order, Holm and the verdict rules over them; the run
    configuration is the first test's, with the scenarios they covered together."""
    from dataclasses import replace

    from specverify.certification.results.verdict import error_certificate, finish_certificate
    from specverify.certification.run.context import matrix_for

    first = certs[0]
    if len(certs) == 1:
        return first
    same = [c for c in certs if (c.level, c.seed, c.alpha) == (first.level, first.seed, first.alpha)]
    results, seen = [], set()
    for cert in same:
        for s in cert.scenarios:
            if s.name not in seen:
                seen.add(s.name)
                results.append(s)
    family = matrix_for(first.config)
    results.sort(key=lambda s: family.position(s.scenario))
    names = tuple(dict.fromkeys(s.scenario for s in results))
    config = replace(first.config, scenarios=() if len(names) == len(family) else names)
    elapsed = sum(c.elapsed_s for c in same)
    errors = [c.reason for c in same if c.verdict == Verdict.ERROR]
    if errors:
        return error_certificate(errors[0].removeprefix("set-up failed: "), config=config, elapsed_s=elapsed)
    violation = next((c.reason for c in same if c.verdict == Verdict.INVALID), None)
    repro = next(((c.reproducible, c.reproducibility_note) for c in same if c.reproducible is False), None)
    repro = repro or (first.reproducible, first.reproducibility_note)
    return finish_certificate(results, violation, repro, config=config, matrix=family, elapsed_s=elapsed)
