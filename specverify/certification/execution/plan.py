"""A run's plan: every part it is made of, in the order they run, for each engine configuration it certifies.

``plan(config, execution)`` reads only the configuration, the factory's declarations and the oracle (a sampling
scenario's planned N or its sequential design's look schedule): no decoder is made. Each configuration is its own
decoder (its own ``RunPlan``: matrix, α plan, scenarios, parts); a run without ``engine_configs`` has one.

**Parts.** Without ``block_draws`` a part is a whole scenario. With it, a sampling scenario's draws are cut into
blocks: each stretch between two looks of its sequential design (or its whole planned N under the fixed plan) in
blocks of ``block_draws`` draws from its start, so every look ends a block; block ``b`` is draws ``start`` ..
``start + count - 1`` of the scenario's request stream. Every other scenario (greedy, collision, mixed, composition,
two-sample) is one part. Each configuration's parts end with the reproducibility check's part.

**Why parts change no count.** A block's draws depend only on (seed, scenario, block): draw i of a seeded request
is the same whoever draws it, when the decoder's ``sample`` takes the ``start`` offset or on the slow path (request
seeds are ``seed + draw index``). A ``sample`` without the offset draws fixed chunks of ``collect.FIXED_SAMPLE``
from a stretch's start, which blocks repeat exactly when ``block_draws`` is a multiple of it (else the counts are
another valid draw of the same law). Unseeded scenarios and engines draw fresh entropy in every part: independent
draws of the same law, not the same counts.

**Order.** Scenarios run by model pair, then by the γ of their calls (``matrix.scenarios.run_order``: an engine that
fixes γ per instance restarts on every change), a scenario's blocks in index order; under a budget, in matrix order
(the order is then the priority: core first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from specverify.certification import checks
from specverify.certification.checks.sampling import SamplingCheck
from specverify.certification.checks.scenario import gamma_span
from specverify.certification.config.execution import ALL_CONFIGURATIONS, Execution
from specverify.certification.config.run_config import RunConfig, check_names
from specverify.certification.matrix.laws import law_of
from specverify.certification.run.context import AlphaPlan, Run, matrix_for
from specverify.errors import InvalidArgument, check

__all__ = ["Part", "RunPlan", "Plan", "REPRODUCIBILITY", "plan", "chosen_configurations"]

REPRODUCIBILITY = "(reproducibility)"  # the part that runs the run-level reproducibility check


@dataclass(frozen=True)
class Part:
    """One part of a run: block ``block`` of ``scenario`` (draws ``start`` .. ``start + count - 1``), or the whole
    scenario (``count`` None), or the reproducibility check (``scenario == REPRODUCIBILITY``), of the engine
    configuration ``configuration`` (None: the run's own). ``look`` is the sequential look this block ends (None:
    none, or the fixed plan); ``pair`` names the model pair whose decoder runs it."""

    scenario: str
    block: int = 0
    start: int = 0
    count: Optional[int] = None
    look: Optional[int] = None
    pair: str = ""
    configuration: Optional[str] = None

    @property
    def id(self) -> str:
        """``[configuration:]scenario#block``: unique within a plan."""
        return ("" if self.configuration is None else f"{self.configuration}:") + f"{self.scenario}#{self.block}"

    @property
    def label(self) -> str:
        """How progress lines name it: ``temperature-1``, ``temperature-1 block 3 (draws 2100 .. 2799)``, ``the
        reproducibility check``."""
        head = "" if self.configuration is None else f"{self.configuration}: "
        if self.scenario == REPRODUCIBILITY:
            return head + "the reproducibility check"
        if self.count is None:
            return head + self.scenario
        return f"{head}{self.scenario} block {self.block} (draws {self.start} .. {self.start + self.count - 1})"

    def to_dict(self) -> dict:
        return {"id": self.id, "scenario": self.scenario, "block": self.block, "start": self.start,
                "count": self.count, "look": self.look, "pair": self.pair,
                "configuration": self.configuration}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> Part:
        return cls(**{k: v for k, v in data.items() if k != "id"})


class RunPlan:
    """One decoder's run (the run's own, or one engine configuration's): its ``config`` (drafts resolved,
    ``engine_config`` set), ``matrix``, α plan, ``chosen`` scenarios (matrix order), ``parts`` in run order, and
    what the merge needs to decide a split scenario (its sequential design). ``states`` is the merge's memory
    (``merge.py``): a scheduler asks what is still needed after every arrival."""

    def __init__(self, config: RunConfig, execution: Execution, configuration: Optional[str]):
        self.config, self.execution, self.configuration = config, execution, configuration
        self.matrix = matrix_for(config)
        check_names(config.scenarios, self.matrix)
        names = config.scenarios or tuple(self.matrix)
        self.chosen = [self.matrix[n] for n in names]
        self.alpha = AlphaPlan(config.alpha, config.level.epsilon, config.power, checks.num_tests(self.matrix))
        probe = Run(config, self.matrix, self.alpha, session=None)
        budgeted = config.budget_s is not None or config.max_samples is not None
        order = self.chosen if budgeted else _run_order(self.chosen, probe)
        self.designs: dict = {}
        self.parts: list = []
        for scenario in order:
            self.parts += self._blocks(scenario)
        home = str(self.chosen[0].pair) if self.chosen else ""
        self.parts.append(Part(REPRODUCIBILITY, pair=home, configuration=configuration))
        self.by_id = {p.id: p for p in self.parts}
        self._blocks_by_name: dict = {}
        self.states: dict = {}

    def split(self, scenario) -> bool:
        """Whether ``scenario`` is cut into blocks (a sampling check, with ``block_draws``)."""
        if self.execution.block_draws is None:
            return False
        return isinstance(checks.check_for(scenario, self.config, self.matrix), SamplingCheck)

    def _blocks(self, scenario) -> list:
        pair, name = str(scenario.pair), self.configuration
        if not self.split(scenario):
            return [Part(scenario.name, pair=pair, configuration=name)]
        law = law_of(scenario)
        if self.config.sequential:
            from specverify.stats import plan_sequential

            design = plan_sequential(law.probs, self.alpha.epsilon, alpha=self.alpha.alpha_test, power=self.alpha.power)
            ends, self.designs[scenario.name] = list(design.schedule), design
        else:
            ends = [self.alpha.sample_size(law)]
        out, begin, size = [], 0, self.execution.block_draws
        for look, end in enumerate(ends):
            for start in range(begin, end, size):
                count = min(size, end - start)
                ends_look = look if start + count == end and self.config.sequential else None
                out.append(Part(scenario.name, len(out), start, count, ends_look, pair, name))
            begin = end
        return out

    def blocks_of(self, name: str) -> list:
        """``name``'s parts in block index order."""
        return self._blocks_by_name.setdefault(name, [p for p in self.parts if p.scenario == name])


def _run_order(chosen: list, probe: Run) -> list:
    from specverify.certification.matrix.scenarios import run_order

    return run_order(chosen, gammas=lambda s: gamma_span(probe, s))


class Plan:
    """The parts of a run over its configurations: ``runs`` (one ``RunPlan`` each, in order), ``parts`` (theirs,
    concatenated), ``listed`` (configurations named or listed by ``all`` that cannot run here: ``{name:
    EngineConfig}``), ``presets`` and ``default`` (the factory's configurations, for the configuration set);
    ``checked`` is the merge's memory of the documents it checked."""

    def __init__(self, config: RunConfig, execution: Execution, runs: list, listed: dict, presets: dict, default):
        self.config, self.execution, self.runs = config, execution, tuple(runs)
        self.listed, self.presets, self.default = listed, presets, default
        self.parts = [p for run in self.runs for p in run.parts]
        self.by_id = {p.id: p for p in self.parts}
        self._runs = {run.configuration: run for run in self.runs}
        self.checked: dict = {}  # id(document) -> (document, part id): the merge checked it (merge.py)

    def run_of(self, part: Part) -> RunPlan:
        return self._runs[part.configuration]

    def run_named(self, configuration: Optional[str]) -> RunPlan:
        return self._runs[configuration]

    @property
    def several(self) -> bool:
        """Whether the run certifies a set of engine configurations (``engine_configs``)."""
        return bool(self.execution.engine_configs)


def chosen_configurations(names, presets: dict, factory_name: str, *, surface: str = "--engine-config ") -> list:
    """The configuration names to run, in order: ``all`` expands to every declared one (in declaration order).
    ``surface`` spells the option in messages: ``--engine-config`` (the CLI) or ``@pytest.mark.specverify:
    engine_config=`` (the marker)."""
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgument(
            f"engine_configs={names!r} must be a non-empty list of configuration names (or ['all']), e.g. "
            "--engine-config NAME --engine-config OTHER."
        )
    if not presets:
        raise InvalidArgument(
            f"{surface}{' '.join(names)}: {factory_name} declares no engine configurations (its "
            "engine_configs attribute, docs/adapters.md)."
        )
    out = []
    for name in names:
        if name == ALL_CONFIGURATIONS:
            out += [n for n in presets if n not in out]
            continue
        if name not in presets:
            raise InvalidArgument(
                f"{surface}{name!r} is not a configuration of {factory_name}: it names {sorted(presets)} "
                f"(or {ALL_CONFIGURATIONS!r})."
            )
        if name in out:
            raise InvalidArgument(f"{surface}{name!r} is named twice; name each configuration once.")
        out.append(name)
    return out


def plan(config: RunConfig, execution: Optional[Execution] = None) -> Plan:
    """The plan of ``config`` executed as ``execution`` (default: whole scenarios, here). Resolves the factory (a
    module that raises on import is a ``run.factory.SetupFailure``) and checks each configuration's scenario
    names against its own matrix."""
    from specverify.certification.run.factory import resolve_factory
    from specverify.protocol import engine_configs_of

    check(isinstance(config, RunConfig), f"config={config!r} must be a RunConfig (create_run(...)).")
    execution = Execution() if execution is None else execution
    check(isinstance(execution, Execution), f"execution={execution!r} must be an Execution (create_run(...)).")
    check(
        not config.control,
        f"control={config.control!r}: the plain-path control runs before a run is planned, in `specverify certify` "
        "and certify() (execution/control.py), not in the pytest marker's items or a shard; there, certify the "
        "plain path first and give against= where it misses the exact law.",
    )
    from specverify.certification.run.factory import factory_options

    factory = resolve_factory(config.factory)
    config = config.with_factory_drafts(factory)
    presets, default = engine_configs_of(factory)
    if not execution.engine_configs:
        factory_options(factory, config)  # its engine_config: a name it declares, reachable here
        return Plan(config, execution, [RunPlan(config, execution, None)], {}, presets, default)
    names = chosen_configurations(list(execution.engine_configs), presets, config.factory_name)
    runs, listed = [], {}
    for name in names:
        if presets[name].unreachable:
            listed[name] = presets[name]
            continue
        runs.append(RunPlan(replace(config, engine_config=name), execution, name))
    return Plan(config, execution, runs, listed, presets, default)
