"""Resolving a factory (``module:attr``), its set-up failures, and the options it receives.

A module that does not exist is a usage error (``InvalidArgument``: a typo on the command line); a module that
raises on import, or a factory that raises, is a ``SetupFailure`` — verdict ``error``, docs/design.md rule 1.
"""

from __future__ import annotations

import importlib
import os
import traceback
from typing import Callable, Union

from specverify.errors import InvalidArgument, SpecverifyError, check

__all__ = ["SetupFailure", "resolve_factory", "factory_options", "check_engine_options", "user_traceback"]


class SetupFailure(SpecverifyError):
    """The factory or adapter could not be set up (its module raises on import, the factory raises, its
    ``capabilities`` are unknown names): verdict ``error`` (docs/design.md rule 1), nothing said of the decoder."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def user_traceback(exc: BaseException) -> str:
    """The exception once, with the frames of the user's code only (none of specverify's runner)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_OWN_DIR)]
    where = "".join(traceback.format_list(frames[-3:])).rstrip()
    head = f"{type(exc).__name__}: {exc}"
    return f"{head}\n{where}" if where else head


_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # specverify/


def resolve_factory(spec: Union[str, Callable]) -> Callable:
    """``module:attr`` (or a callable) -> the factory. Import problems raise ``InvalidArgument`` with hints."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    check(
        isinstance(spec, str) and spec.count(":") == 1 and all(spec.split(":")),
        f"factory={spec!r} must be 'module:attr', e.g. 'specverify.reference:make_decoder'.",
    )
    module_name, attr = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if not _is_missing(exc, module_name):
            raise SetupFailure(f"importing {module_name!r} raised {user_traceback(exc)}") from None
        raise InvalidArgument(
            f"factory={spec!r}: cannot import module {module_name!r} ({exc}). Is it installed, on PYTHONPATH, "
            "or in the current directory?"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - the module's own code failed: a set-up failure
        raise SetupFailure(f"importing {module_name!r} raised {user_traceback(exc)}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            import difflib

            names = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3)
            hint = f" Did you mean {', '.join(repr(f'{module_name}:{c}') for c in close)}?" if close else ""
            raise InvalidArgument(f"factory={spec!r}: {module_name!r} has no attribute {part!r}.{hint}")
        obj = getattr(obj, part)
    check(callable(obj), f"factory={spec!r} is not callable; expected factory(target, draft) -> decoder.")
    return obj


def _is_missing(exc: ImportError, module_name: str) -> bool:
    """Whether the module named on the command line (or a package above it) does not exist (a typo: usage)."""
    missing = getattr(exc, "name", None)
    parts = module_name.split(".")
    return isinstance(exc, ModuleNotFoundError) and missing in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def factory_options(factory: Callable, config) -> dict:
    """The keyword options the factory receives: the preset ``config.engine_config`` names among the factory's
    ``engine_configs`` (``{name: EngineConfig | {key: value}}``), overridden by ``config.engine_options``."""
    from specverify.protocol import engine_configs_of

    options = {}
    if config.engine_config is not None:
        presets, _ = engine_configs_of(factory)
        if config.engine_config not in presets:
            raise InvalidArgument(
                f"engine_config={config.engine_config!r} is not a configuration of {config.factory_name}: it names "
                f"{sorted(presets) or 'none'} (its engine_configs attribute, docs/adapters.md)."
            )
        preset = presets[config.engine_config]
        if preset.unreachable:
            raise InvalidArgument(
                f"engine_config={config.engine_config!r} of {config.factory_name} cannot run here: "
                f"{preset.unreachable} (docs/adapters.md, 'Engine configurations')."
            )
        options.update(preset.options)
    return {**options, **dict(config.engine_options)}


def check_engine_options(factory: Callable, options: dict) -> None:
    """``InvalidArgument`` for an option the factory cannot take, before any work: a key outside what it declares
    (``factory.engine_options``, a mapping of the names it accepts to their defaults, docs/adapters.md), or, where it
    declares nothing, outside its signature's keyword parameters (a factory with ``**options`` takes any name
    there, and checks them itself when it runs)."""
    import inspect

    name = getattr(factory, "__qualname__", getattr(factory, "__name__", repr(factory)))
    declared = getattr(factory, "engine_options", None)
    if declared is not None:
        accepted = set(declared)
    else:
        try:
            params = list(inspect.signature(factory).parameters.values())[2:]  # after (target, draft)
        except (TypeError, ValueError):  # no signature to read: the factory checks its own options
            return
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        accepted = {p.name for p in params if p.kind in keyword}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InvalidArgument(
            f"--engine-option {', '.join(f'{k}={options[k]!r}' for k in unknown)}: {name} takes "
            f"{sorted(accepted) or 'no options'} (its engine_options, or its keyword parameters)."
        )
