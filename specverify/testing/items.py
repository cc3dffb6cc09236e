"""The ``@pytest.mark.specverify`` marker: its arguments, one item per scenario, and each item's own decision.

An item runs its scenario's parts of the run's plan (``certification.execution``: the parts a whole run, a shard
or a Ray actor would run, with the same N and draws, since the α plan counts the whole matrix; the item of the
first scenario also runs the reproducibility part) and fails on its own rejection at the planned per-test α
(``alpha / m``, Bonferroni, valid alone). Its part documents travel with its result; the ledger merges every item's
documents of one decoder with the one merge and decides the verdict once, by Holm (``ledger``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Optional

from specverify.certification.config.options import OPTIONS as _RUN_OPTIONS
from specverify.certification.config.options import marker_field
from specverify.certification.config.run_config import RunConfig
from specverify.certification.matrix.scenarios import scenario_names
from specverify.enums import NotRun, Verdict
from specverify.errors import InvalidArgument, check

MARKER_ARGS = tuple(o.marker_name or o.name for o in _RUN_OPTIONS if o.marker)

__all__ = [
    "MARKER_ARGS",
    "MarkerSpec",
    "marker_spec",
    "marker_configurations",
    "Unreachable",
    "planned_m",
    "ItemResult",
    "certify_item",
    "ItemDecision",
    "judge_item",
    "with_decision",
    "item_message",
]


@dataclass(frozen=True)
class MarkerSpec:
    """A marked test's certification: ``config`` (the marker's run options over the session's), the scenarios it
    expands into and whether an inconclusive decoder may pass (``allow_inconclusive``)."""

    config: RunConfig
    scenarios: tuple
    allow_inconclusive: bool = False
    reaches: dict = field(default_factory=dict)

    factory = property(lambda self: self.config.factory)
    factory_name = property(lambda self: self.config.factory_name)
    require = property(lambda self: str(self.config.require))
    level = property(lambda self: str(self.config.level))
    seed = property(lambda self: self.config.seed)
    alpha = property(lambda self: self.config.alpha)
    models = property(lambda self: str(self.config.models))
    budget = property(lambda self: self.config.budget_s)
    sequential = property(lambda self: self.config.sequential)
    engine_config = property(lambda self: self.config.engine_config)


_SERVER_KEYS = ("server", "url", "declaration", "dialect")


def _server_factory(kwargs: dict) -> dict:
    """``server=TEMPLATE`` (managed) or ``url=URL`` with ``declaration=FILE`` (attached), optionally ``dialect=``:
    the server adapter's factory with those as engine options (docs/servers.md); ``kwargs`` as they are otherwise."""
    given = {k: kwargs[k] for k in _SERVER_KEYS if k in kwargs}
    if not given:
        return kwargs
    check(
        "factory" not in kwargs and (("server" in given) != ("url" in given)),
        f"@pytest.mark.specverify({', '.join(f'{k}=...' for k in given)}): give server='TEMPLATE' (specverify starts "
        "it) or url='http://HOST:PORT' with declaration='FILE' (a running deployment), not both, and no factory=.",
    )
    check("url" not in given or "declaration" in given, "@pytest.mark.specverify(url=...) needs declaration='FILE'.")
    check("declaration" not in given or "url" in given, "declaration= goes with url= (attached mode).")
    rest = {k: v for k, v in kwargs.items() if k not in _SERVER_KEYS}
    from specverify.certification.config.options import parse_option

    options = dict(parse_option("engine_options", rest.pop("engine_options", None)))
    if "server" in given:
        rest["factory"], options["template"] = "specverify.adapters.server:managed", given["server"]
    else:
        rest["factory"] = "specverify.adapters.server:attached"
        options.update(url=given["url"], declaration=given["declaration"])
    if "dialect" in given:
        options["dialect"] = given["dialect"]
    return {**rest, "engine_options": options}


def _marker_values(args: tuple, kwargs: dict) -> dict:
    if not args:
        kwargs = _server_factory(kwargs)
    unknown = sorted(k for k in kwargs if k not in ("factory", "allow_inconclusive") and marker_field(k) is None)
    accepted = ["factory", *MARKER_ARGS, "allow_inconclusive", *_SERVER_KEYS]
    check(
        not unknown,
        f"@pytest.mark.specverify({', '.join(f'{k}=...' for k in unknown)}): unknown argument(s); use "
        f"{', '.join(accepted)}.",
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


def _configurations_asked(kwargs: dict) -> Optional[list]:
    """The marker's ``engine_config=`` as a list of names when it asks for several configurations (a list, or
    ``'all'``); None when it names one configuration or none (the test is then one decoder, as before)."""
    value = kwargs.get("engine_config")
    if value is None or (isinstance(value, str) and value != "all"):
        return None
    names = [value] if isinstance(value, str) else value
    check(
        isinstance(names, (list, tuple)) and names and all(isinstance(n, str) and n for n in names),
        f"@pytest.mark.specverify(engine_config={value!r}): expected a configuration name, a list of names or "
        "'all', e.g. engine_config=['prefix-cache', 'preempt'].",
    )
    return list(names)


@dataclass(frozen=True)
class Unreachable:
    """A configuration the marker asks for that cannot run on this machine (``EngineConfig.unreachable``):
    ``named`` when the marker names it (not covered: the item fails unless ``allow_inconclusive=True``), else it is
    only listed by ``'all'`` (the item is skipped with the reason)."""

    reason: str
    named: bool


def marker_configurations(args: tuple, kwargs: dict) -> Optional[dict]:
    """``{name: None | Unreachable}`` for a marker that names several engine configurations (``engine_config=[...]``
    or ``'all'``: every one ``factory.engine_configs`` declares, in its order); None for a marker that names one or
    none. Each configuration is its own decoder: its own items, its own α and decision (docs/pytest_plugin.md)."""
    v = _marker_values(args, kwargs)
    names = _configurations_asked(v)
    if names is None:
        return None
    from specverify.certification.config.execution import ALL_CONFIGURATIONS as ALL
    from specverify.certification.execution.plan import chosen_configurations
    from specverify.certification.run.factory import resolve_factory
    from specverify.protocol import engine_configs_of

    factory = v["factory"]
    factory_name = factory if isinstance(factory, str) else getattr(factory, "__qualname__", repr(factory))
    presets, _ = engine_configs_of(resolve_factory(factory))
    chosen = chosen_configurations(names, presets, factory_name, surface="@pytest.mark.specverify: engine_config=")
    listing = ALL in names
    return {
        n: Unreachable(presets[n].unreachable, not listing or n in names) if presets[n].unreachable else None
        for n in chosen
    }


def marker_spec(args: tuple, kwargs: dict, options, *, engine_config: Optional[str] = None) -> MarkerSpec:
    """Validate the marker's ``args``/``kwargs`` (the run options' one validator, named as the marker spells them)
    and fill the rest from the session's ``options``. ``engine_config``: the one configuration of a marker that names
    several (:func:`marker_configurations`), which this spec certifies."""
    v = _marker_values(args, kwargs)
    allow = v.pop("allow_inconclusive", False)
    check(isinstance(allow, bool), f"@pytest.mark.specverify(allow_inconclusive={allow!r}): expected True or False.")
    if _configurations_asked(v) is not None:
        check(
            engine_config is not None,
            f"@pytest.mark.specverify(engine_config={v['engine_config']!r}) names several configurations: each "
            "item certifies one (marker_configurations).",
        )
        v["engine_config"] = engine_config
    factory = v.pop("factory")
    config = options.config(factory, "marker", **{marker_field(k): value for k, value in v.items()})
    scenarios = config.scenarios or scenario_names(config.models, config.draft_family)
    reaches = {}
    if config.engine_config is not None:
        scenarios, reaches = _configured(config, scenarios)
    return MarkerSpec(config, tuple(scenarios), allow, reaches)


def _configured(config: RunConfig, scenarios: list) -> tuple:
    """The scenarios and the state evidence (``EngineConfig.reaches``) of ``config``'s engine configuration: its
    own scenarios are added when the marker does not choose the scenarios (``certification.matrix.configured``)."""
    from specverify.certification.run.context import matrix_for
    from specverify.certification.run.factory import resolve_factory
    from specverify.protocol import engine_configs_of

    presets, _ = engine_configs_of(resolve_factory(config.factory))
    preset = presets.get(config.engine_config)
    if preset is None:  # the run reports the unknown name (certification.factory.factory_options)
        return scenarios, {}
    return (list(scenarios) if config.scenarios else list(matrix_for(config))), dict(preset.reaches)


def planned_m(config: RunConfig) -> int:
    """``m`` of the α plan of the run ``config`` describes (its matrix, with an engine configuration's scenarios)."""
    from specverify.certification.checks import num_tests
    from specverify.certification.run.context import matrix_for

    return num_tests(matrix_for(config))


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
    state: dict = field(default_factory=dict)  # the run's engine_info["state"] (an engine configuration's evidence)
    parts: tuple = ()  # the part documents the item ran (certification.execution.worker), for the ledger's merge

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
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("results", "parts")}
        out["results"] = [r.to_dict() for r in self.results]
        out["parts"] = list(self.parts)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ItemResult:
        from specverify.certification.results.evidence import ScenarioResult

        data = dict(data)
        data["results"] = tuple(ScenarioResult.from_dict(r) for r in data.get("results", ()))
        data["parts"] = tuple(data.get("parts", ()))
        return cls(**data)


def certify_item(
    spec: MarkerSpec, scenario: str, *, group: str, budget_s: Optional[float], progress=None, workers=None
) -> ItemResult:
    """Run ``scenario``'s parts of ``spec``'s plan (and, for the plan's first scenario, the reproducibility part)
    here (``budget_s``: this item's share of the decoder's budget; ``progress``: the certifier's progress callback,
    or None; ``workers``: a dict this process keeps its decoders in, ``{group: (plan, PartWorker)}``, so the items
    of one decoder share its worker process and engines; None: the item's own, closed after it)."""
    from specverify.certification.config.execution import command_line
    from specverify.certification.execution.local import run_local
    from specverify.certification.execution.merge import documents_by_id, scenario_results
    from specverify.certification.execution.plan import plan
    from specverify.certification.execution.store import MemoryStore
    from specverify.certification.execution.worker import PartWorker
    from specverify.certification.run.factory import SetupFailure
    from specverify.protocol import merged_state

    started = time.perf_counter()
    command = command_line(spec.config, scenario=scenario)
    kept = None if workers is None else workers.get(group)
    try:
        the_plan = plan(spec.config) if kept is None else kept[0]
    except (InvalidArgument, SetupFailure) as exc:
        why = exc.reason if isinstance(exc, SetupFailure) else str(exc)
        return ItemResult(group, scenario, error=why, elapsed_s=time.perf_counter() - started, command=command)
    if workers is not None and kept is None:
        kept = workers[group] = (the_plan, PartWorker(the_plan))
    run = the_plan.runs[0]
    ids = [p.id for p in run.parts if p.scenario == scenario]
    if run.chosen and run.chosen[0].name == scenario:  # the reproducibility check rides with the first scenario
        ids.append(run.parts[-1].id)
    store = MemoryStore()
    worker = None if kept is None else kept[1]
    run_local(the_plan, store, progress=progress, select=ids, budget_s=budget_s, worker=worker)
    docs = store.documents()
    have = documents_by_id(the_plan, docs)
    error = next((d["error"] for d in docs if d.get("error")), None)
    violation = next((d["violation"] for d in docs if d.get("violation")), None)
    if (error or violation) and workers is not None and group in workers:  # the next item starts afresh, as alone
        workers.pop(group)[1].close()
    repro = have.get(run.parts[-1].id)
    reproducible, note = tuple(repro["reproducible"]) if repro and repro.get("reproducible") else (None, "")
    return ItemResult(
        group,
        scenario,
        results=() if error else tuple(scenario_results(run, scenario, have, broken=violation is not None)),
        violation=violation,
        reproducible=reproducible,
        reproducibility_note=note,
        error=error,
        elapsed_s=time.perf_counter() - started,
        command=command,
        state=merged_state(d.get("state") for d in docs),
        parts=tuple(docs),
    )


@dataclass(frozen=True)
class ItemDecision:
    """``status``: pass, FAIL, INVALID, error, inconclusive or not covered; ``failure`` the message when the item
    fails; ``skip`` the reason when it is reported as not covered (never a silent skip)."""

    status: str
    failure: Optional[str] = None
    skip: Optional[str] = None


def item_verdict(record: ItemResult, spec: MarkerSpec, *, num_tests: int):
    """The verdict rules (``certification.verdict.decide``, the one copy) over the item's own results: the core is
    the item's scenario if it is a core one, Holm counts the whole matrix's ``num_tests`` (the others as p = 1), so
    a rejection here is a rejection at the per-test α, valid alone."""
    from specverify.certification.results.verdict import decide
    from specverify.certification.run.context import matrix_for

    family = matrix_for(spec.config)
    core = (record.scenario,) if record.scenario in family.core else ()
    return decide(record.results, record.violation, matrix=family, alpha=spec.alpha, core=core, num_tests=num_tests)


def judge_item(record: ItemResult, spec: MarkerSpec, *, num_tests: int, alpha_test: float) -> ItemDecision:
    """The item's own decision: its scenario's verdict facts against ``spec.require``."""
    rank = Verdict(spec.require).rank
    if record.error is not None:
        return ItemDecision("error", record.error)
    if record.violation is not None:
        why = f"the decoder broke the protocol (invalid): {record.violation.splitlines()[0]}"
        return ItemDecision("INVALID", why) if rank > Verdict.INVALID.rank else ItemDecision("INVALID")
    decision = item_verdict(record, spec, num_tests=num_tests)
    uncovered = [r for r in record.results if not r.covered]
    if record.results and len(uncovered) == len(record.results):
        note = uncovered[0].note
        if uncovered[0].not_run == NotRun.BUDGET:
            return _inconclusive(spec, f"{record.scenario}: {note}")
        if decision.core_missing and rank == Verdict.EXACT.rank and not spec.allow_inconclusive:
            why = f"core scenario {record.scenario} {note}: no decoder is certified exact without it"
            return ItemDecision("not covered", why + " (allow_inconclusive=True lets the session go on)")
        return ItemDecision("not covered", skip=f"specverify: {record.scenario} {note}")
    if decision.greedy_mismatch and rank >= Verdict.GREEDY_ONLY.rank:
        return ItemDecision("FAIL", "greedy output differs from the target's greedy output (approximate)")
    if decision.rejected and rank == Verdict.EXACT.rank:
        return ItemDecision("FAIL", f"law rejected at the per-test α {alpha_test:.2g} (not exact)")
    if decision.short and rank == Verdict.EXACT.rank:
        r = next(r for r in decision.results if r.name == decision.short[0])
        return _inconclusive(
            spec, f"{r.name}: N = {r.n} of {r.planned_n} (budget), detects TV >= {r.detectable_tv:.3f}"
        )
    return ItemDecision("FAIL" if decision.greedy_mismatch or decision.rejected else "pass")


def _inconclusive(spec: MarkerSpec, why: str) -> ItemDecision:
    if spec.allow_inconclusive:
        return ItemDecision("inconclusive")
    return ItemDecision(
        "inconclusive", f"inconclusive: {why} (an inconclusive result never passes; allow_inconclusive=True accepts it)"
    )


def with_decision(record: ItemResult, decision: ItemDecision) -> ItemResult:
    return replace(record, status=decision.status, failure=decision.failure)


def item_message(
    record: ItemResult, spec: MarkerSpec, *, num_tests: int, alpha_test: float, pytest_command: str
) -> str:
    """The failing item's explanation: the decision, the scenario's evidence, the known bug, how to reproduce."""
    from specverify.testing.messages import known_bug, scenario_lines

    lines = [f"specverify: {spec.factory_name} · scenario {record.scenario}: {record.failure}"]
    judged = item_verdict(record, spec, num_tests=num_tests).results if record.violation is None else record.results
    for r in judged:
        if r.violation or not r.covered or r.passed is False or r.n < r.planned_n:
            lines += scenario_lines(r, alpha_test=alpha_test)
    bug = known_bug(spec.factory_name)
    if bug:
        lines.append(bug)
    cli = next((r.reproduce for r in record.results if r.reproduce), record.command)
    lines.append(f"Reproduce: {pytest_command}")
    if cli:
        lines.append(f"           {cli}")
    return "\n".join(lines)
