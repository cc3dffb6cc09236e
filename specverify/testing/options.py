"""The pytest plugin's options: one table (flag, ini key, environment variable), resolved and validated once.

A value comes from the command line, else from the environment variable (where the option has one), else from the
ini file (``[tool.pytest.ini_options]`` / ``pytest.ini``), else the default. A bad value raises ``InvalidArgument``
naming where it came from (``--specverify-seed='x'``, ``ini specverify_seed='x'`` or ``$SPECVERIFY_SEED='x'``),
what was expected and how to fix it. Importing this module stays light (no torch).

>>> Options().reproduce_flags()
'--specverify-seed=0 --specverify-level=quick'
>>> resolve({"seed": "7", "level": "thorough"}).reproduce_flags()
'--specverify-seed=7 --specverify-level=thorough'
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Callable, Mapping, NamedTuple, Optional

from specverify.enums import Level
from specverify.errors import InvalidArgument

__all__ = ["Option", "OPTIONS", "Options", "resolve", "SEED_LIMIT", "ISOLATIONS", "MODELS"]

SEED_LIMIT = 2**62
ISOLATIONS = ("process", "none")
MODELS = ("toy", "checkpoint")


class Option(NamedTuple):
    """One option: its field in :class:`Options`, metavar (None: a flag), ini type, environment variable, help."""

    name: str
    metavar: Optional[str]
    ini_type: str
    env: Optional[str]
    help: str

    @property
    def flag(self) -> str:
        return "--specverify-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "specverify_" + self.name


OPTIONS = (
    Option(
        "level",
        "LEVEL",
        "string",
        "SPECVERIFY_LEVEL",
        "quick / standard / thorough: detects TV >= 0.05 / 0.02 / 0.01 per scenario (default quick)",
    ),
    Option(
        "seed",
        "SEED",
        "string",
        "SPECVERIFY_SEED",
        "seed of every certification, in [0, 2**62); the header prints it (default 0)",
    ),
    Option("alpha", "ALPHA", "string", None, "family false-alarm rate of each decoder's certification (default 1e-6)"),
    Option(
        "models",
        "FAMILY",
        "string",
        None,
        "model family: toy (default) or checkpoint (tiny Llama checkpoints, the hf extra)",
    ),
    Option(
        "scenario",
        "NAME",
        "linelist",
        None,
        "certify only these scenarios (repeat the flag; `specverify scenarios` lists them); a marker's scenarios= wins",
    ),
    Option(
        "budget",
        "SECONDS",
        "string",
        None,
        "wall-clock budget of each decoder's certification, shared by its scenario items (default: none)",
    ),
    Option(
        "isolation",
        "MODE",
        "string",
        None,
        "process (default: the decoder runs in a worker with a per-call timeout) or none (in the test process: faster)",
    ),
    Option(
        "json",
        "PATH",
        "string",
        None,
        "write each decoder's certificate as JSON (several decoders: PATH-STEM-<decoder>.json)",
    ),
    Option("html", "PATH", "string", None, "write each decoder's certificate as a self-contained HTML page"),
    Option(
        "baseline",
        "DIR",
        "string",
        None,
        "compare each decoder with its stored certificate DIR/<decoder>.json: "
        "a worse verdict, lost coverage or a drop in acceptance length fails",
    ),
    Option(
        "update_baseline",
        None,
        "bool",
        None,
        "rewrite the certificates in --specverify-baseline DIR instead of comparing",
    ),
)
_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class Options:
    """The resolved options of a pytest session (what every fixture and marker item certifies with)."""

    level: str = "quick"
    seed: int = 0
    alpha: float = 1e-6
    models: str = "toy"
    scenario: tuple = ()
    budget: Optional[float] = None
    isolation: str = "process"
    json: Optional[str] = None
    html: Optional[str] = None
    baseline: Optional[str] = None
    update_baseline: bool = False

    def reproduce_flags(self) -> str:
        """The flags that reproduce this session's draws (those left at their default are left out)."""
        flags = [f"--specverify-seed={self.seed}", f"--specverify-level={self.level}"]
        flags += [f"--specverify-alpha={self.alpha:g}"] if self.alpha != 1e-6 else []
        flags += [f"--specverify-models={self.models}"] if self.models != "toy" else []
        return " ".join(flags)

    def to_dict(self) -> dict:
        """Plain values (for xdist's ``workerinput``); :func:`resolve` reads them back."""
        out = asdict(self)
        out["scenario"] = list(self.scenario)
        return out


def _where(option: Option, source: str) -> str:
    return {"flag": option.flag, "ini": f"ini {option.ini}", "env": f"${option.env}"}.get(source, option.flag)


def _int_seed(text: str, where: str) -> int:
    try:
        seed = int(str(text).strip())
    except ValueError:
        seed = None
    if seed is None or not 0 <= seed < SEED_LIMIT:
        raise InvalidArgument(f"{where}={text!r} must be an int in [0, 2**62), e.g. --specverify-seed=1234.")
    return seed


def _float_in(text: str, where: str, low: float, high: float, example: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        value = None
    if value is None or not low < value < high:
        raise InvalidArgument(f"{where}={text!r} must be a number in ({low:g}, {high:g}), e.g. {example}.")
    return value


def _choice(text: str, where: str, choices: tuple) -> str:
    value = str(text).strip()
    if value not in choices:
        raise InvalidArgument(f"{where}={text!r} must be one of {', '.join(map(repr, choices))}.")
    return value


def _parent_exists(text: str, where: str) -> str:
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"{where}={text!r}: the folder {folder!r} does not exist; create it or write elsewhere.")
    if os.path.isdir(text):
        raise InvalidArgument(f"{where}={text!r} is a folder; give a file path, e.g. {where}=specverify.json.")
    return text


_LEVELS = tuple(level.value for level in Level)
_PARSE: dict = {
    "level": lambda v, w: _choice(v, w, _LEVELS),
    "seed": _int_seed,
    "alpha": lambda v, w: _float_in(v, w, 0.0, 0.5, "--specverify-alpha=1e-6"),
    "models": lambda v, w: _choice(v, w, MODELS),
    "budget": lambda v, w: _float_in(v, w, 0.0, float("inf"), "--specverify-budget=300"),
    "isolation": lambda v, w: _choice(v, w, ISOLATIONS),
    "json": _parent_exists,
    "html": _parent_exists,
    "baseline": lambda v, w: str(v),
    "update_baseline": lambda v, w: bool(v),
}


def _scenarios(names, where: str, models: str) -> tuple:
    from specverify.certification.scenarios import select_scenarios

    names = tuple(str(n).strip() for n in names if str(n).strip())
    try:
        select_scenarios(list(names), models)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
    return names


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
    values, sources = {}, {}
    for option in OPTIONS:
        value, source = flags.get(option.name), "flag"
        if value in (None, [], False) and option.env and env.get(option.env):
            value, source = env[option.env], "env"
        if value in (None, [], False) and ini is not None:
            value, source = ini(option.ini), "ini"
        if value in (None, "", [], False):
            continue
        values[option.name], sources[option.name] = value, source
    models = (
        _PARSE["models"](values["models"], _where(_BY_NAME["models"], sources["models"]))
        if "models" in values
        else "toy"
    )
    parsed = {"models": models}
    for name, value in values.items():
        where = _where(_BY_NAME[name], sources[name])
        if name == "scenario":
            parsed[name] = _scenarios(value if isinstance(value, (list, tuple)) else [value], where, models)
        elif name != "models":
            parsed[name] = _PARSE[name](value, where)
    opts = Options(**parsed)
    _check_baseline(opts, _where(_BY_NAME["baseline"], sources.get("baseline", "flag")))
    return opts
