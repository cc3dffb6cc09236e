"""Skip guards for tests that need one of pyproject's optional extras: without the extra such a test skips, naming
the extra and its pip line; CI installs every extra, so there it runs. A test module that needs an extra throughout
skips at import instead (``pytest.importorskip(MODULE, reason=...)`` at its top)."""

from __future__ import annotations

import importlib.util

import pytest

MODULES = {"hf": "transformers", "grammar": "xgrammar", "report": "matplotlib"}  # the package each extra brings


def needs(extra: str, what: str) -> pytest.MarkDecorator:
    """Skip unless ``extra`` is installed: ``@needs("hf", "the checkpoint family")``."""
    module = MODULES[extra]
    reason = f"needs the {extra} extra ({module}) for {what}: pip install -e '.[{extra}]'"
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=reason)


needs_hf = needs("hf", "the checkpoint family")
