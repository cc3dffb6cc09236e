"""The pytest plugin's options: the run options the certifier's table marks for the plugin, and the plugin's own
outputs, resolved and validated once.

The run options (level, seed, alpha, models, drafts, scenario, budget, isolation, fixed, engine_option) are
rows of ``specverify.certification.config.options.OPTIONS`` with a plugin stem: each becomes ``--specverify-STEM`` with
the ini key ``specverify_STEM`` (and, for level and seed, ``$SPECVERIFY_LEVEL`` / ``$SPECVERIFY_SEED``), validated
by the row's parser. A value comes from the command line, else the environment variable, else the ini file
(``[tool.pytest.ini_options]`` / ``pytest.ini``), else the plugin's default or ``RunConfig``'s. The plugin's
level default is quick for the toy models and standard for an engine: a factory that declares ``default_level``
(every engine factory of ``specverify.adapters`` declares standard) or a run on ``--specverify-models checkpoint``
certifies at standard unless the level is given (``level_default``). A bad
value raises ``InvalidArgument`` naming where it came from (``--specverify-seed='x'``, ``ini specverify_seed='x'``
or ``$SPECVERIFY_SEED='x'``), what was expected and how to fix it. Importing this module stays light (no torch).

>>> Options().reproduce_flags()
'--specverify-seed=0 --specverify-level=quick --specverify-sequential'
>>> resolve({"seed": "7", "level": "thorough", "fixed": True}).reproduce_flags()
'--specverify-seed=7 --specverify-level=thorough --specverify-fixed'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Optional

from specverify.certification.config.options import OPTIONS as RUN_OPTIONS
from specverify.certification.config.options import OptionError, format_value, parse_option
from specverify.certification.config.run_config import RunConfig
from specverify.errors import InvalidArgument

__all__ = ["Option", "OPTIONS", "Options", "resolve", "PLUGIN_DEFAULTS", "level_default"]

PLUGIN_DEFAULTS = {"level": "quick"}  # a test suite certifies the toy models at quick unless told (level_default)
ENGINE_LEVEL = "standard"  # an engine's default: quick misses the shifts real engines had (TV 0.02-0.036)
_ENV = {"level": "SPECVERIFY_LEVEL", "seed": "SPECVERIFY_SEED"}


class Option(NamedTuple):
    """One plugin option: ``name`` (the flag's stem), ``field`` (the RunConfig field, None for the plugin's own
    outputs), metavar (None: a switch), ini type, environment variable, help."""

    name: str
    field: Optional[str]
    metavar: Optional[str]
    ini_type: str
    env: Optional[str]
    help: str
    negate: bool = False  # the switch sets its field to False (``--specverify-fixed``)

    @property
    def flag(self) -> str:
        return "--specverify-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "specverify_" + self.name


def level_default(factory: object, models: object = None) -> str:
    """The level a plugin run certifies ``factory`` at when no level is given: the factory's declared
    ``default_level`` (a string naming a level), else standard on the checkpoint family, else the plugin's quick.

    >>> level_default("specverify.reference:make_decoder"), level_default(None, "checkpoint")
    ('quick', 'standard')
    """
    declared = None if isinstance(factory, str) else getattr(factory, "default_level", None)
    if declared is not None:
        return str(parse_option("level", declared))
    if models is not None and str(models) == "checkpoint":
        return ENGINE_LEVEL
    return PLUGIN_DEFAULTS["level"]


def _run_option(row) -> Option:
    ini_type = "bool" if row.metavar is None else ("linelist" if row.many else "string")
    default = PLUGIN_DEFAULTS.get(row.name)
    text = row.help if default is None else f"{row.help.split(' (default')[0]} (default {default} here)"
    return Option(row.plugin, row.name, row.metavar, ini_type, _ENV.get(row.plugin), text, row.negate)


def _alias(row) -> Option:
    """The positive switch of a negated row (``--specverify-sequential``: the default, accepted and spelled in
    reproduce lines so that they keep their meaning)."""
    stem = row.alias.removeprefix("--")
    return Option(
        stem, row.name, None, "bool", None, f"{stem}: the default (the opposite of --specverify-{row.plugin})"
    )


_ROWS = [row for row in RUN_OPTIONS if row.plugin]
OPTIONS = tuple(_run_option(row) for row in _ROWS) + tuple(_alias(row) for row in _ROWS if row.negate) + (
    Option("json", None, "PATH", "string", None, "write each decoder's certificate as JSON: PATH for one decoder, "
           "STEM-<decoder>.json for several; specverify_certify calls' certificates apart, STEM.fixture-<test>.json"),
    Option("html", None, "PATH", "string", None, "write each decoder's certificate as a self-contained HTML page "
           "(named as --specverify-json names its files; needs the report extra, checked at start-up)"),
    Option("baseline", None, "DIR", "string", None, "compare each decoder with its stored certificate "
           "DIR/<decoder>.json: a worse verdict, lost coverage or a drop in acceptance length fails"),
    Option("update_baseline", None, None, "bool", None,
           "rewrite the certificates in --specverify-baseline DIR instead of comparing"),
    Option("baseline_tolerance", None, "FRACTION", "string", None, "a drop in mean accepted length fails only "
           "beyond this fraction of the baseline's mean, e.g. 0.05 or 5% (and only when significant; default 0)"),
    Option("progress", None, "SECONDS", "string", None, "an item certifying for longer prints a progress line "
           "every SECONDS (default 30; 0: never; not shown under xdist)"),
)  # fmt: skip
_BY_NAME = {o.name: o for o in OPTIONS}
_RUN_DEFAULTS = {row.name: row.default for row in RUN_OPTIONS}


@dataclass(frozen=True)
class Options:
    """The resolved options of a pytest session: ``run`` the RunConfig values it sets (field, value pairs) and the
    plugin's outputs. ``level``, ``seed``, … read the run values (with the plugin's defaults)."""

    run: tuple = ()
    json: Optional[str] = None
    html: Optional[str] = None
    baseline: Optional[str] = None
    update_baseline: bool = False
    baseline_tolerance: float = 0.0
    progress: float = 30.0

    def value(self, field: str) -> object:
        given = dict(self.run)
        if field in given:
            return given[field]
        if field in PLUGIN_DEFAULTS:
            return parse_option(field, PLUGIN_DEFAULTS[field])
        return _RUN_DEFAULTS[field]

    level = property(lambda self: str(self.value("level")))
    seed = property(lambda self: self.value("seed"))
    alpha = property(lambda self: self.value("alpha"))
    models = property(lambda self: str(self.value("models")))
    scenario = property(lambda self: tuple(self.value("scenarios")))
    budget = property(lambda self: self.value("budget_s"))
    isolation = property(lambda self: str(self.value("isolation")))

    def run_values(self) -> dict:
        """Every RunConfig value the session sets, plugin defaults included."""
        return {**{k: parse_option(k, v) for k, v in PLUGIN_DEFAULTS.items()}, **dict(self.run)}

    def config(self, factory: object, surface: str = "python", **overrides: object) -> RunConfig:
        """The ``RunConfig`` of certifying ``factory`` in this session (``overrides`` win); a level not given
        anywhere is ``level_default``'s for the factory and model family."""
        values = {**self.run_values(), **overrides}
        if "level" not in dict(self.run) and "level" not in overrides:
            values["level"] = parse_option("level", level_default(factory, values.get("models")))
        return RunConfig.create(surface, factory=factory, **values)

    def reproduce_flags(self) -> str:
        """The flags that reproduce this session's draws: seed and level always, the other run options set (not
        isolation, which changes no draw, nor the scenarios, which a test's node id selects)."""
        flags = [f"--specverify-seed={self.seed}", f"--specverify-level={self.level}"]
        for option in OPTIONS:
            if option.negate:  # the look rule is always spelled (--specverify-fixed / --specverify-sequential)
                flags.append(option.flag if self.value(option.field) is False else f"--specverify-{_alias_of(option)}")
                continue
            if option.field in (None, "seed", "level", "isolation", "scenarios") or option.field not in dict(self.run):
                continue
            if any(o.negate and o.field == option.field for o in OPTIONS):
                continue
            value = self.value(option.field)
            if value == _RUN_DEFAULTS[option.field]:
                continue
            if option.ini_type == "bool":
                flags.append(option.flag)
            elif option.ini_type == "linelist":
                flags += [f"{option.flag}={_text(v)}" for v in value]
            else:
                flags.append(f"{option.flag}={format_value(value)}")
        return " ".join(flags)

    def flat(self) -> dict:
        """Every plugin option by its name (``seed``, ``scenario``, ``json``, …) with its resolved value."""
        out = {o.name: self.value(o.field) for o in OPTIONS if o.field is not None}
        out["scenario"] = tuple(out["scenario"])
        out.update(json=self.json, html=self.html, baseline=self.baseline, update_baseline=self.update_baseline)
        out.update(baseline_tolerance=self.baseline_tolerance, progress=self.progress)
        return {k: (str(v) if hasattr(v, "value") else v) for k, v in out.items()}

    def to_dict(self) -> dict:
        """Plain values (for xdist's ``workerinput``); :meth:`from_dict` reads them back."""
        run = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.run}
        run = {k: (str(v) if hasattr(v, "value") else v) for k, v in run.items()}
        return {"run": run, "json": self.json, "html": self.html, "baseline": self.baseline,
                "update_baseline": self.update_baseline, "baseline_tolerance": self.baseline_tolerance,
                "progress": self.progress}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping) -> Options:
        run = tuple((k, parse_option(k, v)) for k, v in data["run"].items())
        return cls(run, data["json"], data["html"], data["baseline"], data["update_baseline"],
                   data.get("baseline_tolerance", 0.0), data.get("progress", 30.0))  # fmt: skip


def _alias_of(option: Option) -> str:
    return next(o.name for o in OPTIONS if o.field == option.field and not o.negate)


def _text(value: object) -> str:
    if isinstance(value, tuple) and len(value) == 2:  # an engine option
        return f"{value[0]}={value[1]}"
    return str(value)


def _where(option: Option, source: str) -> str:
    return {"flag": option.flag, "ini": f"ini {option.ini}", "env": f"${option.env}"}.get(source, option.flag)


def _parent_exists(text: str, where: str) -> str:
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"{where}={text!r}: the folder {folder!r} does not exist; create it or write elsewhere.")
    if os.path.isdir(text):
        raise InvalidArgument(f"{where}={text!r} is a folder; give a file path, e.g. {where}=specverify.json.")
    return text


def _fraction(text: str, where: str) -> float:
    """A tolerance: ``0.05`` or ``5%``, in [0, 1)."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise InvalidArgument(
            f"{where}={text!r} must be a fraction in [0, 1) of the baseline's mean accepted length, e.g. 0.05 or 5%."
        )
    return value


def _seconds(text: str, where: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InvalidArgument(f"{where}={text!r} must be seconds >= 0, e.g. 30 (0: no progress lines).")
    return value


def _report_extra(text: str, where: str) -> str:
    """``--specverify-html`` needs matplotlib: refused at start-up (not after every item ran) when it is missing."""
    from specverify.report.plots import missing_report_extra

    hint = missing_report_extra()
    if hint is not None:
        fix = f"remove {where.split()[1]} from the ini file" if where.startswith("ini ") else f"leave out {where}"
        raise InvalidArgument(
            f"{where}={text!r}: matplotlib is not installed here. {hint[0].upper()}{hint[1:]}. Or {fix}."
        )
    return text


def _output(option: Option, value: object, where: str) -> object:
    if option.name == "html":
        return _report_extra(_parent_exists(str(value), where), where)
    if option.name == "json":
        return _parent_exists(str(value), where)
    if option.name == "baseline_tolerance":
        return _fraction(value, where)
    if option.name == "progress":
        return _seconds(value, where)
    return bool(value) if option.name == "update_baseline" else str(value)


def _check_baseline(opts: Options, where: str) -> None:
    if opts.update_baseline and not opts.baseline:
        raise InvalidArgument(
            "--specverify-update-baseline needs --specverify-baseline DIR (the folder of stored certificates)."
        )
    if opts.baseline and os.path.exists(opts.baseline) and not os.path.isdir(opts.baseline):
        raise InvalidArgument(f"{where}={opts.baseline!r} is a file; give a folder of stored certificates.")
    if opts.baseline and not opts.update_baseline and not os.path.isdir(opts.baseline):
        raise InvalidArgument(
            f"{where}={opts.baseline!r} does not exist: create it with --specverify-update-baseline "
            f"(--specverify-baseline {opts.baseline} --specverify-update-baseline), then commit it."
        )


def resolve(flags: Mapping, *, ini: Optional[Callable[[str], object]] = None, env: Optional[Mapping] = None) -> Options:
    """The session's :class:`Options` from ``flags`` (option name -> command-line value or None), then ``env``
    (default ``os.environ``), then ``ini`` (ini key -> value), validated. Raises ``InvalidArgument``."""
    env = os.environ if env is None else env
    run, outputs, sources = {}, {}, {}
    for option in OPTIONS:
        value, source = flags.get(option.name), "flag"
        if value in (None, [], False) and option.env and env.get(option.env):
            value, source = env[option.env], "env"
        if value in (None, [], False) and ini is not None:
            value, source = ini(option.ini), "ini"
        if value in (None, "", [], False):
            continue
        where = _where(option, source)
        sources[option.name] = where
        if option.field is None:
            outputs[option.name] = _output(option, value, where)
            continue
        try:
            parsed = parse_option(option.field, value, text=True)
        except OptionError as exc:
            raise InvalidArgument(exc.template.format(**_names(option.field, where), value=repr(value))) from None
        if option.negate:
            parsed = not parsed
        if option.field in run and run[option.field] != parsed:
            first = next(w for name, w in sources.items() if name != option.name and _field(name) == option.field)
            raise InvalidArgument(
                f"{first} and {where} contradict each other: give one of them (sequential looks are the default)."
            )
        run[option.field] = parsed
    opts = Options(tuple(run.items()), **outputs)
    opts.config("plugin:check", "plugin")  # the rules that tie options together (scenario names, families)
    _check_baseline(opts, sources.get("baseline", "--specverify-baseline"))
    return opts


def _field(name: str) -> Optional[str]:
    return _BY_NAME[name].field


def _names(field: str, where: str) -> dict:
    from specverify.certification.config.options import where as spelled

    names = {row.name: spelled(row.name, "plugin") for row in RUN_OPTIONS}
    return {**names, field: where, "factory": "factory"}
