"""``RunConfig``: every option of one certification, frozen and validated once (docs/design.md, run configuration).

The CLI, the pytest plugin's options, the ``@pytest.mark.specverify`` marker and ``certify(**kwargs)`` all build it
with :meth:`RunConfig.create` (through ``execution.create_run``, which also builds how the run executes), validating
each value with the table of ``options.py`` and naming bad values the way that surface spells them.
:meth:`RunConfig.reproduce` is the command line that runs it again (one scenario of it with ``scenario=NAME``);
``execution.run_from_command`` reads such a line back into the same ``RunConfig``.

How an option is added (one place, here and in ``options.py``): a field of ``RunConfig`` with its default, a row of
``options.OPTIONS`` (its parser, CLI flag and help, the plugin's option stem, whether the marker takes it), and any
combination that has no meaning as a row of ``rules.RULES``. The CLI flag (:func:`add_run_arguments`), the
plugin option, the marker argument, ``certify``'s keyword and the ``reproduce`` flag all follow from the row;
``tests/certification/test_config.py`` checks the round trip options → RunConfig → reproduce() → the same RunConfig.

>>> cfg = RunConfig.create(factory="specverify.reference:make_decoder", level="quick", seed=7, budget_s=60)
>>> cfg.reproduce()
'specverify certify specverify.reference:make_decoder --level quick --budget 60 --sequential --seed 7'
>>> cfg.reproduce(scenario="greedy")
'specverify certify specverify.reference:make_decoder --level quick --budget 60 --sequential --scenario greedy --seed 7'
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, Optional, Union

from specverify.certification.config.options import (
    OPTIONS,
    OPTIONS_BY_NAME,
    RUN,
    RUN_OPTIONS,
    OptionError,
    engine_value,
    format_value,
    parse_option,
)
from specverify.certification.config.rules import check_rules
from specverify.enums import DraftFamily, Isolation, Level, ModelFamily, Verdict
from specverify.errors import InvalidArgument

__all__ = ["RunConfig", "factory_name", "add_run_arguments", "check_names"]


def factory_name(spec: object) -> str:
    """The ``module:attr`` that names ``spec`` on the command line (best effort for callables)."""
    if isinstance(spec, str):
        return spec
    return f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', getattr(spec, '__name__', '?'))}"


def _check_factory(factory: object) -> None:
    if callable(factory) and not isinstance(factory, str):
        return
    if not (isinstance(factory, str) and factory.count(":") == 1 and all(factory.split(":"))):
        raise OptionError(
            "{factory}={value} must be 'module:attr' (or a callable factory(target, draft) -> decoder), e.g. "
            "'specverify.reference:make_decoder'.",
            factory,
        )


@dataclass(frozen=True)
class RunConfig:
    """Every option of what a certification draws and decides (the ``run`` rows of ``options.OPTIONS`` document
    each; how it executes is ``config.execution.Execution``). ``drafts`` None means the factory's declared
    ``draft_family`` (else ``ar``): :meth:`with_factory_drafts` resolves it before a run."""

    factory: Union[str, Callable]
    level: Level = Level.STANDARD
    seed: int = 0
    alpha: float = 1e-6
    power: float = 0.9
    models: ModelFamily = ModelFamily.TOY
    drafts: Optional[DraftFamily] = None
    scenarios: tuple = ()
    isolation: Isolation = Isolation.PROCESS
    timeout_s: float = 120.0
    threads: Optional[int] = None
    budget_s: Optional[float] = None
    max_samples: Optional[int] = None
    sequential: bool = True  # sequential looks (docs/design.md); False: the fixed plan (--fixed)
    against: Optional[str] = None
    control: Optional[str] = None
    target_dir: Optional[str] = None
    draft_dir: Optional[str] = None
    engine_options: tuple = ()
    engine_config: Optional[str] = None
    require: Verdict = Verdict.EXACT
    require_reproducible: bool = False
    require_metrics: bool = False
    require_speculation: bool = False

    def __post_init__(self):
        _check_factory(self.factory)
        for option in RUN_OPTIONS:  # normalise (enums, tuples, floats) and validate each value once
            object.__setattr__(self, option.name, parse_option(option.name, getattr(self, option.name)))
        check_rules(self, None, owners=(RUN,))
        self._check_names()

    def _check_names(self) -> None:
        """The scenario names against the matrix they can belong to: a name of any draft family's matrix while the
        family is not known yet (the factory may declare it), and the names an engine configuration may add to the
        checkpoint matrix (each configuration's own matrix is checked when the run is planned)."""
        if not self.scenarios or self.user_pair:  # a user pair's names are checked once its matrix is built
            return
        from specverify.certification.matrix.configured import configuration_scenario_names
        from specverify.certification.matrix.scenarios import matrix

        added = set(configuration_scenario_names(self.models))
        if self.drafts is None and self.models == ModelFamily.TOY:
            known = {n for family in DraftFamily for n in matrix(self.models, family)}
            check_names([n for n in self.scenarios if n not in known], matrix(self.models, DraftFamily.AR))
        else:
            check_names([n for n in self.scenarios if n not in added], matrix(self.models, self.draft_family))

    @classmethod
    def create(cls, surface: str = "python", **values: object) -> RunConfig:
        """A validated ``RunConfig`` from ``values`` (``RunConfig`` field names; None or absent: the default);
        ``surface`` ("python", "cli", "plugin", "marker") names bad options as that surface spells them. Options of
        how the run executes (``Execution``) are taken by ``config.execution.create_run``."""
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            known = ", ".join(f.name for f in fields(cls))
            raise InvalidArgument(f"{unknown!r} are not certify options; use {known}.")
        text = surface in ("cli", "plugin")
        given = {k: v for k, v in values.items() if v is not None}
        try:
            parsed = {k: parse_option(k, v, text=text) if k in OPTIONS_BY_NAME else v for k, v in given.items()}
            return cls(**parsed)
        except OptionError as exc:
            raise InvalidArgument(exc.render(surface)) from None

    @property
    def factory_name(self) -> str:
        return factory_name(self.factory)

    @property
    def user_pair(self) -> bool:
        """Whether the run is on the user's own checkpoints (``--target DIR --draft DIR``): no exact law."""
        return bool(self.target_dir and self.draft_dir)

    @property
    def draft_family(self) -> DraftFamily:
        return self.drafts or DraftFamily.AR

    def with_factory_drafts(self, factory: object) -> RunConfig:
        """``drafts`` resolved: as given, else the resolved factory's ``draft_family`` attribute (zoo entries declare
        theirs) when it is not ``ar``; ``draft_family`` is ``ar`` for None."""
        declared = getattr(factory, "draft_family", None)
        if self.drafts is not None or declared in (None, DraftFamily.AR):
            return self  # ar stays None, so the command line (which leaves --drafts ar out) reads back the same
        try:
            return replace(self, drafts=DraftFamily(declared))
        except ValueError:
            raise InvalidArgument(
                f"{self.factory_name}.draft_family={declared!r} must be one of "
                f"{[str(d) for d in DraftFamily]} (docs/adapters.md)."
            ) from None

    def reproduce(self, scenario: Optional[str] = None) -> str:
        """The command line that runs this configuration again; with ``scenario``, that one scenario alone. Options
        at their default are left out (``--drafts ar`` too), except ``--level`` and ``--seed``."""
        return self.command(scenario=scenario)

    def command(self, *, scenario: Optional[str] = None, flags: tuple = ()) -> str:
        """:meth:`reproduce`, with ``flags`` (how the run executes, ``Execution.flags``) before ``--seed``."""
        cfg = self if scenario is None else replace(self, scenarios=(scenario,))
        parts = ["specverify certify", shlex.quote(self.factory_name), f"--level {cfg.level}"]
        for option in RUN_OPTIONS:
            value = getattr(cfg, option.name)
            if option.negate:  # spelled either way, so a stored line keeps its meaning if the default changes
                parts.append(option.alias if value else option.flag)
                continue
            if option.name in ("level", "seed", "scenarios") or value in (option.default, DraftFamily.AR):
                continue
            parts += _flag(option, value)
        parts += _flag(OPTIONS_BY_NAME["scenarios"], cfg.scenarios) + list(flags) + [f"--seed {cfg.seed}"]
        return " ".join(parts)

    def to_dict(self) -> dict:
        """Plain JSON values (the certificate's ``run``; schema v2): the factory by name, enums as strings."""
        out = asdict(self)
        out["factory"] = self.factory_name
        out["engine_options"] = {k: v for k, v in self.engine_options}
        if out["control"] is None:  # added within schema version 2: documents without it stay as they were
            del out["control"]
        return {k: (str(v) if hasattr(v, "value") else v) for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        """The inverse of :meth:`to_dict` (a document's ``run``: its ``shard``, how that run executed, is left out)."""
        data = {k: v for k, v in data.items() if k != "shard"}
        data["scenarios"] = tuple(data.get("scenarios") or ())
        return cls.create(**{k: v for k, v in data.items() if v is not None})


def check_names(names, chosen) -> None:
    """``OptionError`` (naming ``scenarios`` as the caller's surface spells it) for the first name not in the matrix
    ``chosen`` (``matrix.scenarios.name_problem`` says why)."""
    from specverify.certification.matrix.scenarios import name_problem

    for name in names:
        problem = name_problem(name, chosen)
        if problem:
            raise OptionError(problem, name)


def _flag(option, value) -> list:
    if value is True:
        return [option.flag]
    if option.name == "engine_options":
        return [f"{option.flag} {shlex.quote(f'{k}={_engine_text(v)}')}" for k, v in value]
    if option.many:
        return [f"{option.flag} {shlex.quote(str(v))}" for v in value]
    return [f"{option.flag} {shlex.quote(format_value(value))}"]


def _engine_text(value: object) -> str:
    import json

    if isinstance(value, str) and engine_value(value) == value:
        return value  # a plain string reads back as itself
    return json.dumps(value)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option with a flag of its own (``RunConfig``'s and ``Execution``'s) as a flag of ``parser`` (values
    validated by ``config.execution.from_args``, not argparse)."""
    for option in OPTIONS:
        if not option.cli:
            continue
        if option.negate:
            both = parser.add_mutually_exclusive_group()
            both.add_argument(option.flag, dest=option.name, action="store_const", const=False, help=option.help)
            both.add_argument(option.alias, dest=option.name, action="store_const", const=True, help="the default")
        elif option.metavar is None:
            parser.add_argument(option.flag, dest=option.name, action="store_true", help=option.help)
        elif option.many or option.name == "engine_config":  # several configurations: Execution.engine_configs
            parser.add_argument(
                option.flag, dest=option.name, action="append", default=[], metavar=option.metavar, help=option.help
            )
        else:
            parser.add_argument(option.flag, dest=option.name, default=None, metavar=option.metavar, help=option.help)
