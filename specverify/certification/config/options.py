"""The table of run options: one row per field of ``RunConfig`` (what a run is) and of ``Execution`` (how it
executes), with its parser, CLI flag, plugin and marker names.

Every surface that starts a certification — the CLI, the pytest plugin's options, the ``@pytest.mark.specverify``
marker and ``certify(**kwargs)`` — validates a value with the row's ``parse`` and names it the way that surface
spells it (:func:`where`): ``seed`` in Python, ``--seed`` on the command line, ``--specverify-seed`` (or its ini key
or environment variable) in the plugin, ``seed`` after ``@pytest.mark.specverify:`` on a marker. A bad value raises
:class:`OptionError`, an ``InvalidArgument`` whose message each surface renders with its own names.

>>> where("budget_s", "cli"), where("budget_s", "python"), where("budget_s", "marker")
('--budget', 'budget_s', 'budget')
>>> OPTIONS_BY_NAME["seed"].parse("12", True)
12
"""

from __future__ import annotations

import json
import re
from typing import Callable, NamedTuple, Optional

from specverify.enums import DraftFamily, Isolation, Level, ModelFamily, Verdict, _StrEnum
from specverify.errors import InvalidArgument

__all__ = [
    "RunOption",
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "RUN",
    "EXECUTION",
    "OptionError",
    "where",
    "SEED_LIMIT",
    "format_value",
    "Executor",
    "RUN_OPTIONS",
    "EXECUTION_OPTIONS",
]


class Executor(_StrEnum):
    """Where a run's parts execute: ``local`` (this process, one after the other) or ``ray`` (engine actors)."""

    LOCAL = "local"
    RAY = "ray"


SEED_LIMIT = 2**62  # certification seeds; request seeds derived from them are 63-bit (protocol.Request, docs)


class OptionError(InvalidArgument):
    """A bad run option. ``template`` names options as ``{name}`` (``{value}`` is the offending value's repr);
    :meth:`render` spells them for one surface, ``str()`` for Python."""

    def __init__(self, template: str, value: object = None):
        self.template, self.value = template, value
        super().__init__(self.render("python"))

    def render(self, surface: str) -> str:
        names = {o.name: where(o.name, surface) for o in OPTIONS}
        factory = "FACTORY" if surface == "cli" else "factory"
        text = self.template.format(value=repr(self.value), factory=factory, **names)
        return f"@pytest.mark.specverify: {text}" if surface == "marker" else text


class RunOption(NamedTuple):
    """One run option: the ``RunConfig`` field ``name`` and ``certify`` keyword; ``parse(value, text)`` returns the
    normalised value or raises ``ValueError(what was expected)`` (``text``: the value is a string from a command line,
    an ini file or the environment); ``flag`` the CLI flag (``metavar`` None: a switch; ``many``: repeatable);
    ``plugin`` the stem of the plugin's ``--specverify-STEM`` option (None: not a plugin option); ``marker``
    whether ``@pytest.mark.specverify`` takes it (by ``marker_name``, default ``name``); ``negate``: the switch
    ``flag`` sets the field to False and ``alias`` (also a switch) to True, the default (``--fixed`` /
    ``--sequential`` for ``sequential``: reproduce lines always spell one of the two). ``owner`` is the dataclass
    whose field it is: ``RUN`` (``RunConfig``: what the run draws and decides) or ``EXECUTION`` (``Execution``: how
    its parts run, which changes no seeded count); ``in_command``: the certificate's command line spells it;
    ``cli``: the CLI has a flag of its own for it (``engine_configs`` comes from repeated ``--engine-config``)."""

    name: str
    flag: str
    parse: Callable[[object, bool], object]
    default: object
    help: str
    metavar: Optional[str] = "VALUE"
    many: bool = False
    plugin: Optional[str] = None
    marker: bool = True
    marker_name: Optional[str] = None
    negate: bool = False  # a switch that sets the field to False (``--fixed``); ``alias`` is the flag for True
    alias: Optional[str] = None
    owner: str = "run"
    in_command: bool = True
    cli: bool = True


RUN, EXECUTION = "run", "execution"


def _int(value: object, text: bool) -> int:
    if text and isinstance(value, str):
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError
    return value


def _real(value: object, text: bool) -> float:
    if text and isinstance(value, str):
        return float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError
    return float(value)


def _switch(value: object, text: bool) -> bool:
    if text and isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "0", "false", "no", ""):
        return value.strip().lower() in ("1", "true", "yes")
    if not isinstance(value, bool):
        raise ValueError("must be True or False")
    return value


def _ranged(kind: Callable, low: float, high: float, expected: str, *, none: bool = False, closed_low=False):
    def parse(value: object, text: bool) -> object:
        if value is None and none:
            return None
        try:
            x = kind(value, text)
        except (TypeError, ValueError):
            raise ValueError(expected) from None
        if not ((low <= x) if closed_low else (low < x)) or not x < high:
            raise ValueError(expected)
        return x

    return parse


def _enum(cls, *, none: bool = False):
    def parse(value: object, text: bool) -> object:
        if value is None and none:
            return None
        try:
            return cls(value.strip() if isinstance(value, str) else value)
        except ValueError:
            import difflib

            close = difflib.get_close_matches(str(value), [m.value for m in cls], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"must be one of {', '.join(repr(m.value) for m in cls)}{hint}") from None

    return parse


def _text(expected: str):
    def parse(value: object, text: bool) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValueError(expected)
        return value.strip()

    return parse


def _names_of(what: str, *, once: bool = True):
    """A parser of one name or a list of names; ``once``: a name given twice counts once (scenarios), else the
    repeat is kept for whoever reads the names to refuse (engine configurations)."""

    def parse(value: object, text: bool) -> tuple:
        if value is None:
            return ()
        if isinstance(value, str):  # one name, never its letters
            value = (value,)
        try:
            names = tuple(value)
        except TypeError:
            raise ValueError(f"must be a {what} name or a list of them") from None
        if not all(isinstance(n, str) and n.strip() for n in names):
            raise ValueError(f"must be a {what} name or a list of them (strings)")
        names = tuple(n.strip() for n in names)
        return tuple(dict.fromkeys(names)) if once else names

    return parse


_names = _names_of("scenario")


def _shard(value: object, text: bool) -> Optional[tuple]:
    if value is None:
        return None
    if isinstance(value, (tuple, list)) and len(value) == 2:
        value = f"{value[0]}/{value[1]}"
    from specverify.certification.config.job_array import is_auto, shard_from_environment

    if is_auto(value):  # resolved here, so the certificate's command spells --shard I/N and reproduces anywhere
        import os

        return shard_from_environment(str(value), os.environ)
    try:
        index, total = (int(x) for x in str(value).split("/"))  # the shard spec I/N
    except ValueError:
        raise ValueError("must read I/N (1 <= I <= N), e.g. 1/4, or auto, auto/N (a CI job array)") from None
    if not 1 <= index <= total:
        raise ValueError("needs 1 <= I <= N, e.g. 1/4")
    return index, total


def engine_value(text: str) -> object:
    """A ``--engine-option`` value: JSON when it parses, else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _engine_options(value: object, text: bool) -> tuple:
    if value is None:
        return ()
    items = value.items() if isinstance(value, dict) else value
    if isinstance(items, str):
        items = (items,)
    out = {}
    for item in items:
        if isinstance(item, str):
            key, sep, raw = item.partition("=")
            if not sep:
                raise ValueError('must be KEY=VALUE (a JSON value, else a string), e.g. draft_sample_method="greedy"')
            key, val = key.strip(), engine_value(raw)
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            key, val = item
        else:
            raise ValueError("must be KEY=VALUE strings, (key, value) pairs or a dict")
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"has the key {key!r}: keys are Python identifiers (the factory's keyword arguments)")
        try:
            json.dumps(val)
        except (TypeError, ValueError):
            raise ValueError(f"has {key}={val!r}: values must be JSON (numbers, strings, lists, dicts)") from None
        out[key] = val
    return tuple(out.items())


def _require(value: object, text: bool) -> Verdict:
    verdict = _enum(Verdict)(value, text)
    if verdict not in Verdict.decoder_verdicts():
        raise ValueError(
            f"must be a decoder verdict, one of {', '.join(repr(str(v)) for v in Verdict.decoder_verdicts())}"
        )
    return verdict


_FLOAT = "must be a number"
OPTIONS = (
    RunOption("level", "--level", _enum(Level), Level.STANDARD, "detects TV >= 0.05 / 0.02 / 0.01 per scenario "
              "(quick / standard / thorough) with the planned power (default standard)", "LEVEL", plugin="level"),
    RunOption("seed", "--seed", _ranged(_int, 0, SEED_LIMIT, "must be an int in [0, 2**62), e.g. 1234",
                                        closed_low=True), 0,
              "seed of every request, in [0, 2**62); reproduces the run (default 0)", "SEED", plugin="seed"),
    RunOption("alpha", "--alpha", _ranged(_real, 0.0, 0.5, "must be a number in (0, 0.5), e.g. 1e-6"), 1e-6,
              "family false-alarm rate (default 1e-6)", "ALPHA", plugin="alpha"),
    RunOption("power", "--power", _ranged(_real, 0.5, 1.0, "must be a number in [0.5, 1), e.g. 0.9",
                                          closed_low=True), 0.9,
              "power each sampling scenario is planned for at the level's TV (default 0.9)", "POWER"),
    RunOption("models", "--models", _enum(ModelFamily), ModelFamily.TOY,
              "model family: toy tables (default) or tiny Llama checkpoints real engines load (hf extra)", "FAMILY",
              plugin="models"),
    RunOption("drafts", "--drafts", _enum(DraftFamily, none=True), None,
              "draft family whose scenarios run; the factory receives its draft object (default: the factory's "
              "declared draft_family, else ar; toy models)", "FAMILY", plugin="drafts"),
    RunOption("scenarios", "--scenario", _names, (), "run only this scenario (repeatable); `specverify scenarios` "
              "lists them", "NAME", many=True, plugin="scenario"),
    RunOption("isolation", "--isolation", _enum(Isolation), Isolation.PROCESS,
              "process (default): the decoder runs in a worker with a per-call timeout; none: in-process (a call "
              "cannot be interrupted, so --timeout does not apply and --budget is checked between calls)", "MODE",
              plugin="isolation"),
    RunOption("timeout_s", "--timeout", _ranged(_real, 0.0, float("inf"), "must be seconds > 0, e.g. 120"), 120.0,
              "per-call time limit in seconds (default 120)", "SECONDS", plugin="timeout", marker_name="timeout"),
    RunOption("threads", "--threads", _ranged(_int, 0, 1 << 16, "must be an int >= 1, e.g. 1", none=True), None,
              "threads of the decoder's worker process (torch, OMP_NUM_THREADS; default 1)", "N"),
    RunOption("budget_s", "--budget", _ranged(_real, 0.0, float("inf"), "must be seconds > 0, e.g. 300", none=True),
              None, "wall-clock budget: a pilot measures throughput, samples are allocated (core first); short "
              "scenarios make the verdict inconclusive with the TV they could detect (default none)", "SECONDS",
              plugin="budget", marker_name="budget"),
    RunOption("max_samples", "--max-samples", _ranged(_int, 0, float("inf"), "must be an int >= 1, e.g. 50000",
                                                      none=True), None,
              "total outcomes to allocate across the scenarios (default none)", "N"),
    RunOption("sequential", "--fixed", _switch, True, "the fixed plan: draw each sampling scenario's planned N and "
              "test once (default: sequential looks, --sequential: stop each sampling scenario at its first "
              "decisive look, an early reject, or an early pass at the planned power while its p-value is above "
              "--alpha)", None, plugin="fixed", negate=True, alias="--sequential"),
    RunOption("against", "--against", _text("must be 'plain' or 'module:attr'"), None,
              "two-sample mode: compare each sampling scenario with this decoder (plain: the `plain` factory beside "
              "FACTORY, speculation off) instead of the exact law", "plain|MODULE:ATTR"),
    RunOption("control", "--control", _text("must be 'plain' or 'module:attr'"), None,
              "the plain-path control (docs/servers.md): first certify this decoder (plain: the `plain` factory "
              "beside FACTORY) on one law scenario with a tenth of --alpha; if it passes, the run goes on against the "
              "exact law with the rest, else it falls back to --against this decoder and is never `exact`",
              "plain|MODULE:ATTR"),
    RunOption("target_dir", "--target", _text("must be a checkpoint directory"), None,
              "your own target checkpoint directory (with --draft DIR and --against): two-sample scenarios only, no "
              "exact law, so never `exact`", "DIR", marker=False),
    RunOption("draft_dir", "--draft", _text("must be a checkpoint directory"), None,
              "your own draft checkpoint directory (with --target DIR)", "DIR", marker=False),
    RunOption("engine_options", "--engine-option", _engine_options, (),
              "KEY=VALUE passed to the factory as a keyword (VALUE is JSON when it parses, else a string; "
              "repeatable)", "KEY=VALUE", many=True, plugin="engine_option"),
    RunOption("engine_config", "--engine-config", _text("must be a configuration name"), None,
              "a named engine configuration the factory declares (factory.engine_configs), certified as its own "
              "decoder; repeatable, or 'all': one certificate per configuration, the exit code the worst's",
              "NAME"),
    RunOption("require", "--require", _require, Verdict.EXACT, "verdict needed for exit code 0: exact, greedy-only, "
              "approximate (default exact)", "VERDICT", plugin="require"),
    RunOption("require_reproducible", "--require-reproducible", _switch, False,
              "also require same seed -> same output (alone, batched, repeated)", None,
              plugin="require_reproducible"),
    RunOption("require_metrics", "--require-metrics", _switch, False, "also require the metrics check: reported "
              "acceptance consistent and inside its exact interval", None,
              plugin="require_metrics"),
    RunOption("require_speculation", "--require-speculation", _switch, False,
              "also require that speculation was observed (some draft accepted)", None,
              plugin="require_speculation"),
    # how the run executes (config.execution.Execution): none of these changes a seeded count
    RunOption("block_draws", "--block-draws", _ranged(_int, 0, float("inf"), "must be an int >= 1 (draws per "
              "block), e.g. 65536", none=True), None, "run in parts: each sampling scenario's draws in blocks of N, "
              "decided in block order (the shards, Ray's engine actors or a resume file then split or keep parts "
              "finer than a scenario; docs/ci.md); the same verdict and seeded counts as without", "N", marker=False,
              owner=EXECUTION),
    RunOption("executor", "--executor", _enum(Executor), Executor.LOCAL, "local (default): the parts run here, "
              "one after the other, as --isolation says; ray: on Ray engine actors, merged into the same "
              "certificate (the ray extra; docs/ray.md)", "local|ray", marker=False, owner=EXECUTION,
              in_command=False),
    RunOption("ray_address", "--ray-address", _text("must be a Ray address such as 'auto' or 'HOST:6379'"), None,
              "with --executor ray: the cluster (default: a local one)", "ADDR", marker=False, owner=EXECUTION,
              in_command=False),
    RunOption("ray_workers", "--ray-workers", _ranged(_int, 0, float("inf"), "must be an int >= 1 (engine "
              "actors), e.g. 2", none=True), None, "with --executor ray: engine actors (default: what the cluster "
              "holds)", "K", marker=False, owner=EXECUTION, in_command=False),
    RunOption("shard", "--shard", _shard, None, "run only shard I of N (part k of the run's plan on shard "
              "(k mod N) + 1: whole scenarios, or blocks with --block-draws; write --counts-out and merge them); auto "
              "or auto/N reads a Buildkite, Kubernetes or Slurm job array's index (docs/ci.md)", "I/N",
              marker=False, owner=EXECUTION),
    RunOption("counts_out", "--counts-out", _text("must be a file path"), None, "with --shard (required "
              "there): write the shard's parts (its counts) to PATH, for `specverify merge`", "PATH", marker=False,
              owner=EXECUTION),
    RunOption("resume", "--resume", _text("must be a file path"), None, "keep the run's finished parts and the "
              "counts of the one in flight in PATH, rewritten atomically after every decoder call; the same command "
              "with the same PATH after a kill continues where it stopped, with the same verdict and seeded counts "
              "(docs/ci.md); a missing PATH starts afresh", "PATH", marker=False, owner=EXECUTION, in_command=False),
    RunOption("engine_configs", "--engine-config", _names_of("configuration", once=False), (), "several engine "
              "configurations, each certified as its own decoder in one run (repeated --engine-config, or all)",
              "NAME", many=True, marker=False, owner=EXECUTION, cli=False),
)  # fmt: skip
OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}
RUN_OPTIONS = tuple(o for o in OPTIONS if o.owner == RUN)
EXECUTION_OPTIONS = tuple(o for o in OPTIONS if o.owner == EXECUTION)
_MARKER_NAMES = {(o.marker_name or o.name): o.name for o in OPTIONS if o.marker}


def where(name: str, surface: str) -> str:
    """How ``surface`` ("python", "cli", "plugin", "marker") spells the option ``name``."""
    option = OPTIONS_BY_NAME[name]
    if surface == "cli":
        return option.flag
    if surface == "plugin" and option.plugin:
        return "--specverify-" + option.plugin.replace("_", "-")
    if surface == "marker" and option.marker:
        return option.marker_name or option.name
    return name


def marker_field(key: str) -> Optional[str]:
    """The ``RunConfig`` field a marker argument ``key`` sets (None: not a run option)."""
    return _MARKER_NAMES.get(key)


def parse_option(name: str, value: object, *, text: bool = False) -> object:
    """``value`` of option ``name`` normalised, or :class:`OptionError` naming what was expected."""
    try:
        return OPTIONS_BY_NAME[name].parse(value, text)
    except ValueError as exc:
        expected = (str(exc) or "is not valid").replace("{", "{{").replace("}", "}}")
        end = "" if expected.endswith(("?", ".")) else "."
        raise OptionError(f"{{{name}}}={{value}} {_verb(expected)}{end}", value) from None


def _verb(expected: str) -> str:
    return expected if expected.split(" ", 1)[0] in ("must", "needs", "has", "is") else f"must be {expected}"


def format_value(value: object) -> str:
    """A value as the command line spells it: shortest exact float, enum values, ``I/N`` shards."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, float):
        text = f"{value:g}"
        return text if float(text) == value else repr(value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(x, int) for x in value):
        return f"{value[0]}/{value[1]}"
    return str(value)
