"""Every private transformers detail the transformers adapter relies on (``specverify.adapters.transformers.hooks``):
the version check against the installed transformers, and the hooks' names."""

import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install -e '.[hf]'")

from specverify.adapters.transformers import hooks  # noqa: E402


def test_version_check_and_hook_names():
    import transformers

    assert hooks.check_transformers_version() == transformers.__version__
    assert hooks.cache_class_names() == ("DynamicCache", "DynamicLayer")
    assert hooks._version_tuple("5.24.0.dev0") == (5, 24, 0)
