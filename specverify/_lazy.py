"""Lazy re-exports for package ``__init__`` modules: names resolve (and their modules import) on first use."""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Iterable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], object], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps each lazy name to the module that defines it;
    ``public`` is what ``dir()`` lists (the package's ``__all__``). A resolved name is cached in the package."""
    listed = sorted(public)

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list:
        return list(listed)

    return __getattr__, __dir__
