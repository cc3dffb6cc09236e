"""``RunConfig``: every option of one certification, frozen and validated once (docs/design.md, run configuration).

The CLI, the pytest plugin's options, the ``@pytest.mark.specverify`` marker and ``certify(**kwargs)`` all build it
with :meth:`RunConfig.create`, which validates each value with the table of ``options.py`` and names bad values the
way that surface spells them. :meth:`RunConfig.reproduce` is the command line that runs it again (one scenario of it
with ``scenario=NAME``); :meth:`RunConfig.from_command` reads such a line back into the same ``RunConfig``.

How an option is added (one place, here and in ``options.py``): a field of ``RunConfig`` with its default, a row of
``options.OPTIONS`` (its parser, CLI flag and help, the plugin's option stem, whether the marker takes it), and any
rule that ties it to other options in :meth:`RunConfig.__post_init__`. The CLI flag (:func:`add_run_arguments`), the
plugin option, the marker argument, ``certify``'s keyword and the ``reproduce`` flag all follow from the row;
``tests/certification/test_config.py`` checks the round trip options → RunConfig → reproduce() → the same RunConfig.

>>> cfg = RunConfig.create(factory="specverify.reference:make_decoder", level="quick", seed=7, budget_s=60)
>>> cfg.reproduce()
'specverify certify specverify.reference:make_decoder --level quick --budget 60 --sequential --seed 7'
>>> RunConfig.from_command(cfg.reproduce()) == cfg
True
>>> cfg.reproduce(scenario="greedy")
'specverify certify specverify.reference:make_decoder --level quick --budget 60 --sequential --scenario greedy --seed 7'
"""

from __future__ import annotations

import argparse
import contextvars
import shlex
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, Optional, Union

from specverify.certification.config.options import (
    OPTIONS,
    OPTIONS_BY_NAME,
    OptionError,
    engine_value,
    format_value,
    parse_option,
)
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


#: Set while a RunConfig is built for a set of engine configurations (``RunConfig.create(configurations=True)``):
#: its scenario names are checked against each configuration's own matrix when that run is built.
_CONFIGURATIONS_FOLLOW: contextvars.ContextVar = contextvars.ContextVar("configurations_follow", default=False)


@dataclass(frozen=True)
class RunConfig:
    """Every option of a certification (``options.OPTIONS`` documents each). ``drafts`` None means the factory's
    declared ``draft_family`` (else ``ar``): :meth:`with_factory_drafts` resolves it before a run."""

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
    shard: Optional[tuple] = None
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
        for option in OPTIONS:  # normalise (enums, tuples, floats) and validate each value once
            object.__setattr__(self, option.name, parse_option(option.name, getattr(self, option.name)))
        self._check_combinations()

    def _check_combinations(self) -> None:
        if self.drafts not in (None, DraftFamily.AR) and self.models != ModelFamily.TOY:
            raise OptionError("{drafts} runs on the toy models only; leave {models} at 'toy'.", self.drafts)
        if self.shard is not None and self.drafts not in (None, DraftFamily.AR):
            raise OptionError("{shard}={value} with {drafts}: shards run the AR matrix only.", self.shard)
        if self.target_dir or self.draft_dir:
            if not (self.target_dir and self.draft_dir and self.against):
                raise OptionError(
                    "{target_dir} and {draft_dir} go together, with {against} (e.g. plain): a user's checkpoints "
                    "have no exact law."
                )
            clashing = [n for n in ("shard", "budget_s") if getattr(self, n)]  # two-sample tests: the fixed plan
            clashing += ["models"] if self.models != ModelFamily.TOY else []
            clashing += ["drafts"] if self.drafts not in (None, DraftFamily.AR) else []
            if clashing:
                raise OptionError(", ".join(f"{{{n}}}" for n in clashing) + " cannot be used with {target_dir}.")
        if self.scenarios and not self.user_pair:  # a user pair's names are checked once its matrix is built
            from specverify.certification.matrix.scenarios import matrix

            if self.drafts is None and self.models == ModelFamily.TOY:  # the factory may declare its family: a name
                known = {n for family in DraftFamily for n in matrix(self.models, family)}  # of any family waits for it
                unknown = [n for n in self.scenarios if n not in known]
                check_names(unknown, matrix(self.models, DraftFamily.AR))
            else:  # with an engine configuration, the names it may add are checked once its matrix is built
                from specverify.certification.matrix.configured import configuration_scenario_names

                configured = self.engine_config or _CONFIGURATIONS_FOLLOW.get()
                added = configuration_scenario_names(self.models) if configured else ()
                check_names([n for n in self.scenarios if n not in added], matrix(self.models, self.draft_family))

    @classmethod
    def create(cls, surface: str = "python", *, configurations: bool = False, **values: object) -> RunConfig:
        """A validated ``RunConfig`` from ``values`` (``RunConfig`` field names; None or absent: the default);
        ``surface`` ("python", "cli", "plugin", "marker") names bad options as that surface spells them.
        ``configurations``: the run is certified once per engine configuration (each with its own
        ``engine_config``), so ``scenarios`` may name the scenarios a configuration adds to its matrix."""
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            known = ", ".join(f.name for f in fields(cls))
            raise InvalidArgument(f"{unknown!r} are not certify options; use {known}.")
        text = surface in ("cli", "plugin")
        given = {k: v for k, v in values.items() if v is not None}
        token = _CONFIGURATIONS_FOLLOW.set(bool(configurations))
        try:
            parsed = {k: parse_option(k, v, text=text) if k in OPTIONS_BY_NAME else v for k, v in given.items()}
            return cls(**parsed)
        except OptionError as exc:
            raise InvalidArgument(exc.render(surface)) from None
        finally:
            _CONFIGURATIONS_FOLLOW.reset(token)

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
        """The command line that runs this configuration again; with ``scenario``, that one scenario alone (no
        shard). Options at their default are left out (``--drafts ar`` too), except ``--level`` and ``--seed``."""
        cfg = self if scenario is None else replace(self, scenarios=(scenario,), shard=None)
        parts = ["specverify certify", shlex.quote(self.factory_name), f"--level {cfg.level}"]
        for option in OPTIONS:
            value = getattr(cfg, option.name)
            if option.negate:  # spelled either way, so a stored line keeps its meaning if the default changes
                parts.append(option.alias if value else option.flag)
                continue
            if option.name in ("level", "seed", "scenarios") or value in (option.default, DraftFamily.AR):
                continue
            parts += _flag(option, value)
        parts += _flag(OPTIONS_BY_NAME["scenarios"], cfg.scenarios) + [f"--seed {cfg.seed}"]
        return " ".join(parts)

    @classmethod
    def from_command(cls, command: str) -> RunConfig:
        """The ``RunConfig`` a :meth:`reproduce` line (or any ``specverify certify`` command line) describes."""
        words = shlex.split(command)
        if words[:2] != ["specverify", "certify"]:
            raise InvalidArgument(f"command={command!r} must start with 'specverify certify FACTORY'.")
        parser = argparse.ArgumentParser(prog="specverify certify", add_help=False)
        parser.add_argument("factory")
        add_run_arguments(parser)
        args, _ = parser.parse_known_args(words[2:])
        return cls.from_args(args)

    @classmethod
    def from_args(cls, args: argparse.Namespace, *, configurations: bool = False) -> RunConfig:
        """From the CLI's parsed arguments (:func:`add_run_arguments`): bad values name their flags."""
        values = {o.name: getattr(args, o.name, None) for o in OPTIONS}
        names = values.get("engine_config") or []
        if len(names) > 1 or "all" in names:
            raise InvalidArgument(
                f"--engine-config {' --engine-config '.join(names)}: several configurations are several runs; "
                "this command certifies them one by one (specverify.certification.execution.configurations)."
            )
        values["engine_config"] = names[0] if names else None
        values = {k: (v or None) if OPTIONS_BY_NAME[k].many else v for k, v in values.items()}
        kept = {k: v for k, v in values.items() if v is not None and (v is not False or OPTIONS_BY_NAME[k].negate)}
        return cls.create("cli", factory=args.factory, configurations=configurations, **kept)

    def to_dict(self) -> dict:
        """Plain JSON values (the certificate's ``run``; schema v2): the factory by name, enums as strings."""
        out = asdict(self)
        out["factory"] = self.factory_name
        out["shard"] = list(self.shard) if self.shard else None
        out["engine_options"] = {k: v for k, v in self.engine_options}
        return {k: (str(v) if hasattr(v, "value") else v) for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        """The inverse of :meth:`to_dict`."""
        data = dict(data)
        data["scenarios"] = tuple(data.get("scenarios") or ())
        data["shard"] = tuple(data["shard"]) if data.get("shard") else None
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
    """Every run option as a flag of ``parser`` (values validated by :meth:`RunConfig.from_args`, not argparse)."""
    for option in OPTIONS:
        if option.negate:
            both = parser.add_mutually_exclusive_group()
            both.add_argument(option.flag, dest=option.name, action="store_const", const=False, help=option.help)
            both.add_argument(option.alias, dest=option.name, action="store_const", const=True, help="the default")
        elif option.metavar is None:
            parser.add_argument(option.flag, dest=option.name, action="store_true", help=option.help)
        elif option.many or option.name == "engine_config":  # several configurations: one run each (cli.py)
            parser.add_argument(
                option.flag, dest=option.name, action="append", default=[], metavar=option.metavar, help=option.help
            )
        else:
            parser.add_argument(option.flag, dest=option.name, default=None, metavar=option.metavar, help=option.help)
