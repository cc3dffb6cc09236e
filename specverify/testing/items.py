"""The ``@pytest.mark.specverify`` marker: its arguments, one item per scenario, and each item's own decision.

An item certifies one scenario (``certify(..., scenarios=[NAME])``: the same N and draws as in the full run, since
the α plan counts the whole matrix) and fails on its own rejection at the planned per-test α (``alpha / m``,
Bonferroni, valid alone). The verdict over all items of a decoder is decided once, by Holm, in ``ledger``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Optional

from specverify.enums import Level, ScenarioKind, Verdict
from specverify.errors import InvalidArgument, check

__all__ = [
    "MARKER_ARGS",
    "MarkerSpec",
    "marker_spec",
    "ItemResult",
    "certify_item",
    "ItemDecision",
    "judge_item",
    "with_decision",
    "item_message",
]

MARKER_ARGS = (
    "factory",
    "require",
    "level",
    "seed",
    "alpha",
    "models",
    "scenarios",
    "budget",
    "isolation",
    "timeout",
    "allow_inconclusive",
)
_SAMPLING = (ScenarioKind.SAMPLING, ScenarioKind.MIXED, ScenarioKind.COLLISION, ScenarioKind.COMPOSITION)


@dataclass(frozen=True)
class MarkerSpec:
    """A marked test's certification: the marker's arguments over the session's options."""

    factory: object
    require: str
    level: str
    seed: int
    alpha: float
    models: str
    scenarios: tuple
    budget: Optional[float]
    isolation: str
    timeout: float
    allow_inconclusive: bool

    @property
    def factory_name(self) -> str:
        from specverify.certification.runner import factory_name

        return factory_name(self.factory)


def _marker_values(args: tuple, kwargs: dict) -> dict:
    unknown = sorted(set(kwargs) - set(MARKER_ARGS))
    check(
        not unknown,
        f"@pytest.mark.specverify({', '.join(f'{k}=...' for k in unknown)}): unknown argument(s); use "
        f"{', '.join(MARKER_ARGS)}.",
    )
    check(
        len(args) <= 1 and not (args and "factory" in kwargs),
        f"@pytest.mark.specverify{args!r}: pass the factory once, as the only positional argument or factory=.",
    )
    values = dict(kwargs)
    if args:
        values["factory"] = args[0]
    check(
        "factory" in values,
        "@pytest.mark.specverify() needs factory='module:attr' (the decoder factory), e.g. "
        "@pytest.mark.specverify(factory='specverify.reference:make_decoder').",
    )
    return values


def marker_spec(args: tuple, kwargs: dict, options) -> MarkerSpec:
    """Validate the marker's ``args``/``kwargs`` and fill the rest from the session's ``options``."""
    from specverify.certification.scenarios import select_scenarios

    v = _marker_values(args, kwargs)
    factory = v["factory"]
    check(
        callable(factory) or (isinstance(factory, str) and factory.count(":") == 1 and all(factory.split(":"))),
        f"@pytest.mark.specverify(factory={factory!r}): expected 'module:attr' or a callable factory(target, draft).",
    )
    require = Verdict.parse(v.get("require", "exact"), "@pytest.mark.specverify(require=...)")
    check(
        require in Verdict.decoder_verdicts(),
        f"@pytest.mark.specverify(require={str(require)!r}): use one of "
        f"{[str(x) for x in Verdict.decoder_verdicts()]}.",
    )
    level = Level.parse(v.get("level", options.level), "@pytest.mark.specverify(level=...)")
    seed, alpha = v.get("seed", options.seed), v.get("alpha", options.alpha)
    check(
        isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**62,
        f"@pytest.mark.specverify(seed={seed!r}): expected an int in [0, 2**62).",
    )
    check(
        isinstance(alpha, float) and 0 < alpha < 0.5,
        f"@pytest.mark.specverify(alpha={alpha!r}): expected a float in (0, 0.5), e.g. 1e-6.",
    )
    models = v.get("models", options.models)
    check(models in ("toy", "checkpoint"), f"@pytest.mark.specverify(models={models!r}): use 'toy' or 'checkpoint'.")
    names = v.get("scenarios", options.scenario)
    if isinstance(names, str):
        names = (names,)
    try:
        chosen = select_scenarios(list(names), models)
    except InvalidArgument as exc:
        raise InvalidArgument(f"@pytest.mark.specverify(scenarios=...): {exc}") from None
    budget = v.get("budget", options.budget)
    check(
        budget is None or (isinstance(budget, (int, float)) and budget > 0),
        f"@pytest.mark.specverify(budget={budget!r}): expected None or seconds > 0.",
    )
    isolation = v.get("isolation", options.isolation)
    check(
        isolation in ("process", "none"),
        f"@pytest.mark.specverify(isolation={isolation!r}): use 'process' or 'none'.",
    )
    timeout = v.get("timeout", 120.0)
    check(
        isinstance(timeout, (int, float)) and timeout > 0,
        f"@pytest.mark.specverify(timeout={timeout!r}): expected seconds > 0 (the per-call limit).",
    )
    allow = v.get("allow_inconclusive", False)
    check(isinstance(allow, bool), f"@pytest.mark.specverify(allow_inconclusive={allow!r}): expected True or False.")
    return MarkerSpec(
        factory,
        str(require),
        str(level),
        seed,
        alpha,
        models,
        tuple(s.name for s in chosen),
        budget,
        isolation,
        float(timeout),
        allow,
    )


@dataclass(frozen=True)
class ItemResult:
    """What one item's certification found: the ``specverify_result`` fixture's value (plain data, sent from xdist
    workers as JSON). ``results`` holds the scenario's ``ScenarioResult``\\ s (several for mixed-batch and
    batch-composition), ``status`` the item's decision (pass, FAIL, INVALID, error, inconclusive, not covered,
    regressed) and ``failure`` why the item fails (None when it does not)."""

    group: str
    scenario: str
    results: tuple = ()
    violation: Optional[str] = None
    reproducible: Optional[bool] = None
    reproducibility_note: str = ""
    error: Optional[str] = None
    elapsed_s: float = 0.0
    command: str = ""
    status: str = ""
    failure: Optional[str] = None
    meta: dict = field(default_factory=dict)

    @property
    def result(self) -> object:
        """The scenario's single ``ScenarioResult`` (``results`` for scenarios with several)."""
        check(len(self.results) == 1, f"{self.scenario} has {len(self.results)} results: read .results instead.")
        return self.results[0]

    @property
    def covered(self) -> bool:
        return any(r.covered for r in self.results)

    @property
    def n(self) -> int:
        return sum(r.n for r in self.results)

    @property
    def pvalue(self) -> Optional[float]:
        """The smallest p-value of the scenario's results (None for greedy scenarios)."""
        found = [r.pvalue for r in self.results if r.pvalue is not None]
        return min(found) if found else None

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "results"}
        out["results"] = [r.to_dict() for r in self.results]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ItemResult:
        from specverify.certification.evidence import ScenarioResult

        data = dict(data)
        data["results"] = tuple(ScenarioResult.from_dict(r) for r in data.get("results", ()))
        return cls(**data)


def certify_item(spec: MarkerSpec, scenario: str, *, group: str, budget_s: Optional[float]) -> ItemResult:
    """Certify ``scenario`` alone with ``spec`` (``budget_s``: this item's share of the decoder's budget)."""
    from specverify.certification import certify

    started = time.perf_counter()
    try:
        cert = certify(
            spec.factory,
            level=spec.level,
            seed=spec.seed,
            alpha=spec.alpha,
            models=spec.models,
            scenarios=[scenario],
            isolation=spec.isolation,
            timeout_s=spec.timeout,
            budget_s=budget_s,
        )
    except InvalidArgument as exc:
        return ItemResult(group, scenario, error=str(exc), elapsed_s=time.perf_counter() - started)
    error = cert.reason if cert.verdict == Verdict.ERROR else None
    violation = cert.reason if cert.verdict == Verdict.INVALID else None
    return ItemResult(
        group,
        scenario,
        results=tuple(cert.scenarios),
        violation=violation,
        reproducible=cert.reproducible,
        reproducibility_note=cert.reproducibility_note,
        error=error,
        elapsed_s=time.perf_counter() - started,
        command=cert.command,
    )


@dataclass(frozen=True)
class ItemDecision:
    """``status``: pass, FAIL, INVALID, error, inconclusive or not covered; ``failure`` the message when the item
    fails; ``skip`` the reason when it is reported as not covered (never a silent skip)."""

    status: str
    failure: Optional[str] = None
    skip: Optional[str] = None


def _rejected(r, alpha_test) -> bool:
    if r.kind == ScenarioKind.GREEDY:
        return r.passed is False
    return bool(r.impossible) or (r.pvalue is not None and r.pvalue < alpha_test)


def judge_item(record: ItemResult, spec: MarkerSpec, *, alpha_test: float, core: bool) -> ItemDecision:
    """The item's own decision: its scenario's rejection at ``alpha_test`` against ``spec.require``."""
    rank = Verdict(spec.require).rank
    if record.error is not None:
        return ItemDecision("error", record.error)
    if record.violation is not None:
        why = f"the decoder broke the protocol (invalid): {record.violation.splitlines()[0]}"
        return ItemDecision("INVALID", why) if rank > Verdict.INVALID.rank else ItemDecision("INVALID")
    results = record.results
    uncovered = [r for r in results if not r.covered]
    if results and len(uncovered) == len(results):
        note = uncovered[0].note
        if "budget" in note:
            return _inconclusive(spec, f"{record.scenario}: {note}")
        if core and rank == Verdict.EXACT.rank and not spec.allow_inconclusive:
            why = f"core scenario {record.scenario} {note}: no decoder is certified exact without it"
            return ItemDecision("not covered", why + " (allow_inconclusive=True lets the session go on)")
        return ItemDecision("not covered", skip=f"specverify: {record.scenario} {note}")
    greedy = [r for r in results if r.kind == ScenarioKind.GREEDY and _rejected(r, alpha_test)]
    if greedy and rank >= Verdict.GREEDY_ONLY.rank:
        return ItemDecision("FAIL", "greedy output differs from the target's greedy output (approximate)")
    sampling = [r for r in results if r.kind in _SAMPLING and _rejected(r, alpha_test)]
    if sampling and rank == Verdict.EXACT.rank:
        return ItemDecision("FAIL", f"law rejected at the per-test α {alpha_test:.2g} (not exact)")
    short = [r for r in results if r.covered and r.kind in _SAMPLING and r.n < r.planned_n]
    if short and rank == Verdict.EXACT.rank:
        r = short[0]
        return _inconclusive(
            spec, f"{r.name}: N = {r.n} of {r.planned_n} (budget), detects TV >= {r.detectable_tv:.3f}"
        )
    return ItemDecision("FAIL" if greedy or sampling else "pass")


def _inconclusive(spec: MarkerSpec, why: str) -> ItemDecision:
    if spec.allow_inconclusive:
        return ItemDecision("inconclusive")
    return ItemDecision(
        "inconclusive", f"inconclusive: {why} (an inconclusive result never passes; allow_inconclusive=True accepts it)"
    )


def with_decision(record: ItemResult, decision: ItemDecision) -> ItemResult:
    return replace(record, status=decision.status, failure=decision.failure)


def item_message(record: ItemResult, spec: MarkerSpec, *, alpha_test: float, pytest_command: str) -> str:
    """The failing item's explanation: the decision, the scenario's evidence, the known bug, how to reproduce."""
    from specverify.testing.messages import known_bug, scenario_lines

    lines = [f"specverify: {spec.factory_name} · scenario {record.scenario}: {record.failure}"]
    for r in record.results:
        if r.violation or not r.covered or _rejected(r, alpha_test) or r.n < r.planned_n:
            lines += scenario_lines(r, alpha_test=alpha_test)
    bug = known_bug(spec.factory_name)
    if bug:
        lines.append(bug)
    cli = next((r.reproduce for r in record.results if r.reproduce), record.command)
    lines.append(f"Reproduce: {pytest_command}")
    if cli:
        lines.append(f"           {cli}")
    return "\n".join(lines)
