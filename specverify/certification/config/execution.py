"""``Execution``: how a run executes, frozen beside ``RunConfig`` (what it draws and decides), and the one builder of
both from a surface's values.

A run is a plan of parts (``certification.execution.plan``): every scenario whole, or, with ``block_draws``, each
sampling scenario's draws in blocks. ``Execution`` says how those parts run — here one after the other or on Ray
engine actors (``executor``), all of them or one shard's (``shard``, written to ``counts_out``), kept in a resume
file (``resume``) — and for which engine configurations (``engine_configs``: several, each its own decoder). None of
it changes a seeded count: the same ``RunConfig`` gives the same verdict and seeded counts however it executes.

Its options are rows of the same table as ``RunConfig``'s (``options.OPTIONS``, owner ``execution``): one parser,
one CLI flag, and ``reproduce`` spells the ones that shape the certificate (``flags``). Combinations without a
meaning are rows of ``rules.RULES``; :func:`create_run` checks them once for both dataclasses.

>>> config, execution = create_run(factory="specverify.reference:make_decoder", level="quick", block_draws=4096)
>>> command_line(config, execution)
'specverify certify specverify.reference:make_decoder --level quick --sequential --block-draws 4096 --seed 0'
>>> run_from_command(command_line(config, execution)) == (config, execution)
True
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import asdict, dataclass, fields
from typing import Optional

from specverify.certification.config.options import (
    EXECUTION,
    EXECUTION_OPTIONS,
    OPTIONS,
    OPTIONS_BY_NAME,
    RUN,
    Executor,
    OptionError,
    format_value,
    parse_option,
)
from specverify.certification.config.rules import check_rules
from specverify.certification.config.run_config import RunConfig, add_run_arguments
from specverify.errors import InvalidArgument

__all__ = ["Execution", "ALL_CONFIGURATIONS", "create_run", "from_args", "run_from_command", "command_line"]

ALL_CONFIGURATIONS = "all"  # engine_configs: every configuration the factory declares


@dataclass(frozen=True)
class Execution:
    """How a run executes (the ``execution`` rows of ``options.OPTIONS`` document each field)."""

    block_draws: Optional[int] = None
    executor: Executor = Executor.LOCAL
    ray_address: Optional[str] = None
    ray_workers: Optional[int] = None
    shard: Optional[tuple] = None
    counts_out: Optional[str] = None
    resume: Optional[str] = None
    engine_configs: tuple = ()

    def __post_init__(self):
        for option in EXECUTION_OPTIONS:
            object.__setattr__(self, option.name, parse_option(option.name, getattr(self, option.name)))
        check_rules(None, self, owners=(EXECUTION,))

    @classmethod
    def create(cls, surface: str = "python", **values: object) -> Execution:
        """A validated ``Execution`` (``values`` by field name, None or absent: the default), bad values named as
        ``surface`` spells them."""
        text = surface in ("cli", "plugin")
        try:
            return cls(**{k: parse_option(k, v, text=text) for k, v in values.items() if v is not None})
        except OptionError as exc:
            raise InvalidArgument(exc.render(surface)) from None

    def flags(self) -> tuple:
        """The command-line flags that shape what the run certifies: ``--block-draws``, several ``--engine-config``,
        a shard's ``--shard`` and ``--counts-out``."""
        out = []
        for option in EXECUTION_OPTIONS:
            value = getattr(self, option.name)
            if not option.in_command or value == option.default:
                continue
            values = value if option.many else (value,)
            out += [f"{option.flag} {shlex.quote(format_value(v))}" for v in values]
        return tuple(out)

    @property
    def whole(self) -> Execution:
        """This execution as the merged run of its shards sees it: no shard, no counts file."""
        from dataclasses import replace

        return replace(self, shard=None, counts_out=None)

    @property
    def one(self) -> Execution:
        """This execution as one decoder of it sees it (its certificate names its own ``engine_config``): the whole
        run, without the list of configurations."""
        from dataclasses import replace

        return replace(self.whole, engine_configs=())

    def to_dict(self) -> dict:
        out = asdict(self)
        out["shard"] = list(self.shard) if self.shard else None
        out["engine_configs"] = list(self.engine_configs)
        return {k: (str(v) if hasattr(v, "value") else v) for k, v in out.items()}


def _configurations(values: dict) -> dict:
    """``engine_config`` given as a list or ``'all'`` (the CLI's repeated flag, the marker's list): one name stays
    the run's own configuration, several (or ``all``) are the execution's ``engine_configs``."""
    names = values.get("engine_config")
    if names is None or (isinstance(names, str) and names != ALL_CONFIGURATIONS):
        return values
    names = [names] if isinstance(names, str) else list(names)
    if len(names) == 1 and names[0] != ALL_CONFIGURATIONS:
        return dict(values, engine_config=names[0])
    if values.get("engine_configs"):
        return values  # the rule table names the clash
    return {**{k: v for k, v in values.items() if k != "engine_config"}, "engine_configs": tuple(names) or None}


def create_run(surface: str = "python", **values: object) -> tuple:
    """``(RunConfig, Execution)`` from ``values`` (field names of either; None or absent: the default), each value
    validated by its row of ``options.OPTIONS`` and every combination by ``rules.RULES``; bad values and clashes are
    named as ``surface`` ("python", "cli", "plugin", "marker") spells them."""
    own = {f.name for f in fields(Execution)}
    unknown = sorted(set(values) - own - {f.name for f in fields(RunConfig)})
    if unknown:
        known = ", ".join(o.name for o in OPTIONS if o.cli or o.owner == EXECUTION)
        raise InvalidArgument(f"{unknown!r} are not certify options; use factory, {known}.")
    values = _configurations(values)
    config = RunConfig.create(surface, **{k: v for k, v in values.items() if k not in own})
    execution = Execution.create(surface, **{k: v for k, v in values.items() if k in own})
    try:
        check_rules(config, execution, owners=(RUN, EXECUTION), surface=surface)
    except OptionError as exc:
        raise InvalidArgument(exc.render(surface)) from None
    return config, execution


def from_args(args: argparse.Namespace) -> tuple:
    """``(RunConfig, Execution)`` from the CLI's parsed arguments (``run_config.add_run_arguments``): bad values
    and clashes name their flags."""
    values = {o.name: getattr(args, o.name, None) for o in OPTIONS if o.cli}
    values = {k: (v or None) if OPTIONS_BY_NAME[k].many or k == "engine_config" else v for k, v in values.items()}
    kept = {k: v for k, v in values.items() if v is not None and (v is not False or OPTIONS_BY_NAME[k].negate)}
    return create_run("cli", factory=args.factory, **kept)


def run_from_command(command: str) -> tuple:
    """``(RunConfig, Execution)`` of a ``specverify certify`` command line (a certificate's ``command``)."""
    words = shlex.split(command)
    if words[:2] != ["specverify", "certify"]:
        raise InvalidArgument(f"command={command!r} must start with 'specverify certify FACTORY'.")
    parser = argparse.ArgumentParser(prog="specverify certify", add_help=False)
    parser.add_argument("factory")
    add_run_arguments(parser)
    args, _ = parser.parse_known_args(words[2:])
    return from_args(args)


def command_line(config: RunConfig, execution: Optional[Execution] = None, *, scenario: Optional[str] = None) -> str:
    """The command line that runs ``config`` again as ``execution`` executes it (its ``flags``); with ``scenario``,
    that one scenario alone, whole (the same draws: the α plan counts the whole matrix)."""
    flags = () if execution is None or scenario is not None else execution.flags()
    return config.command(scenario=scenario, flags=flags)
